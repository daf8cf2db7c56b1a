"""One run as a comparison needs it: its layout, how it ended (or that it has not), its figures.

The layout comes from the run's record (what the run store recorded: ``[sizes]`` as
launched, the hosts used, the plan's launcher), the state from
:func:`ezpz_tui.core.runs.liveness.run_state` (so a run whose supervisor died reads ``lost``,
not ``running``), the figures from :mod:`ezpz_tui.core.watching.numbers` (an ended run's
ranks past rank 0 from its ``digest.json``, one file whatever its size). A run still live is
``partial``: its figures are the steps done so far, and :attr:`RunFacts.notes` says so in words
the CLI and the TUI show as they are. Never raises: a foreign or half-written run gives blanks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.record import positive_int, read_record
from ezpz_tui.core.runs.restart import Restart, restart_of
from ezpz_tui.core.runs.staged import stage_seconds
from ezpz_tui.core.watching.efficiency import (
    Efficiency,
    PeakSettings,
    run_efficiency,
)
from ezpz_tui.core.watching.goodput import run_ledger
from ezpz_tui.core.watching.numbers import RunNumbers, read_numbers, warmup
from runtime.rundir import RunState, State


def _table(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = record.get(key)
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class Layout:
    """How a run was laid out: the parallel sizes and where its ranks ran (``None``: unknown)."""

    tp: int | None
    pp: int | None
    cp: int | None
    dp: int | None
    nodes: int | None
    ranks: int | None
    ppn: int | None
    launcher: str | None

    @property
    def label(self) -> str:
        """``tp2 pp1 cp1 dp2``: the sizes a person changes between runs, in one short word."""
        sizes = (("tp", self.tp), ("pp", self.pp), ("cp", self.cp), ("dp", self.dp))
        return " ".join(f"{name}{'?' if value is None else value}" for name, value in sizes)

    @property
    def placement(self) -> str:
        """``2x4``: nodes by ranks per node, or the rank count alone."""
        if self.nodes is not None and self.ppn is not None:
            return f"{self.nodes}x{self.ppn}"
        return "?" if self.ranks is None else str(self.ranks)


def layout_of(record: Mapping[str, Any]) -> Layout:
    """The layout a run's record says; the launcher ``auto`` resolved to the program it ran."""
    sizes, plan, launch = _table(record, "sizes"), _table(record, "plan"), _table(record, "launch")
    hosts = record.get("hosts")
    launcher = plan.get("launcher") if isinstance(plan.get("launcher"), str) else None
    argv = launch.get("argv")
    if launcher in (None, "auto") and isinstance(argv, list) and argv and isinstance(argv[0], str):
        launcher = Path(argv[0]).name
    return Layout(
        tp=positive_int(sizes.get("tp")),
        pp=positive_int(sizes.get("pp")),
        cp=positive_int(sizes.get("cp")),
        dp=positive_int(sizes.get("dp")),
        nodes=len(hosts) if isinstance(hosts, list) and hosts else positive_int(plan.get("nodes")),
        ranks=positive_int(sizes.get("world_size")),
        ppn=positive_int(record.get("ranks_per_node")) or positive_int(plan.get("ppn")),
        launcher=launcher,
    )


@dataclass(frozen=True)
class RunFacts:
    """One run, read for comparing: identity, layout, end, figures and what to know about them."""

    run_id: str
    path: Path
    layout: Layout
    state: RunState
    parent: str | None
    created: float | None
    numbers: RunNumbers
    first_step_s: float | None  # from the run's start to its first metric record
    stage_s: float | None  # staging its environment, before the run's start (``--stage``)
    goodput: float | None  # the productive share of its wall time (core/watching/goodput.py)
    notes: tuple[str, ...]
    record: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    record_problem: str | None = None  # why its run.toml cannot be read: no record to compare
    efficiency: Efficiency = field(default=Efficiency(None, None, None), compare=False)
    restart: Restart | None = None  # a relaunch's child: from its parent's save to its 1st step

    @property
    def tflops(self) -> float | None:
        """Achieved model TFLOPS per device at the run's median tokens/s."""
        return self.efficiency.tflops(self.numbers.tokens_per_s)

    @property
    def mfu(self) -> float | None:
        """MFU (a fraction) at the run's median tokens/s; None without FLOPs or a peak."""
        return self.efficiency.mfu(self.numbers.tokens_per_s)

    @property
    def partial(self) -> bool:
        """Still running (or about to): its figures are the steps so far."""
        return self.state.live


def _notes(state: RunState, numbers: RunNumbers, record_error: str | None) -> tuple[str, ...]:
    notes = []
    if record_error:
        notes.append(record_error)
    if state.live:
        notes.append(f"{state.state}: figures so far ({numbers.records} steps)")
    elif state.state == State.LOST and state.reason:
        notes.append(f"lost: {state.reason}")
    if not numbers.records:
        notes.append("no metric records")
    elif numbers.records <= warmup(numbers.records):
        notes.append(f"only {numbers.records} steps: warm-up not left out")
    if numbers.garbage:
        notes.append(f"{numbers.garbage} unreadable metric lines skipped")
    return tuple(notes)


def read_facts(run_dir: str | os.PathLike[str], peaks: PeakSettings | None = None) -> RunFacts:
    """Everything a comparison shows about the run in ``run_dir``; never raises. ``peaks``:
    how its peak is found, for MFU (default: the table or the CPU probe, bf16)."""
    path = Path(run_dir)
    record, error = read_record(path)
    state = run_state(path)
    numbers = read_numbers(path, state)  # an ended run's other ranks: from its digest
    epoch = record.get("created_epoch")
    created = float(epoch) if isinstance(epoch, (int, float)) else state.created
    start = state.start if state.start is not None else created
    first = numbers.first_timestamp
    parent = record.get("parent")
    layout = layout_of(record)
    efficiency = run_efficiency(
        path,
        record,
        numbers.flops_per_token,
        layout.ranks,
        peaks or PeakSettings(),
        numbers.hardware_flops_per_token,
    )
    return RunFacts(
        run_id=path.name,
        path=path,
        layout=layout,
        state=state,
        parent=parent if isinstance(parent, str) else None,
        created=created,
        numbers=numbers,
        first_step_s=first - start if first is not None and start is not None else None,
        stage_s=stage_seconds(path),
        goodput=run_ledger(path).goodput,
        notes=_notes(state, numbers, error),
        record=record,
        record_problem=error,
        efficiency=efficiency,
        restart=restart_of(path, record),
    )
