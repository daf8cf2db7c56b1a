"""A sweep: every valid combination of TP, PP and CP run in turn on the allocation.

Each combination is an ordinary run made through :meth:`ezpz_tui.core.session.Session.launch`
(so the run directory, the supervisor, fail-fast and the tether are the ones every launch gets)
with ``parent`` set to the sweep's id, and the sweep's record
(:mod:`ezpz_tui.core.comparing.sweep_record`) lists the runs it made. Runs go one at a time:
layouts measured side by side on shared nodes would measure each other.

:func:`plan_sweep` decides what runs, in order (TP, then PP, then CP, each in the order given),
checking each layout with the one plan validation (:func:`ezpz_tui.core.launching.plan.check`);
an invalid one is skipped with its reason. A launch refused when its turn comes is recorded and
the sweep goes on; one the outputs directory (or a value) refuses ends the sweep, and so does an
outputs directory that cannot hold the sweep's record: the outcome says why
(:attr:`SweepOutcome.halted`), in the session's own words. :func:`run_sweep` runs the plan and
blocks; the CLI
calls it in its main thread, the TUI from a worker thread. ``should_stop`` is polled while a run
goes on (every ``poll_s``): once it says stop, the current run is stopped cleanly (as Ctrl-C on
``ezpz-tui launch`` does) and no other run starts. It is a callable, not a flag the sweep
owns, so a signal handler (the CLI) or a worker's cancellation (the TUI) can answer it without
locks.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from ezpz_tui.core.comparing.sweep_record import (
    FINISHED,
    RUNNING,
    STOPPED,
    SweepRecord,
    new_sweep,
    write_sweep,
)
from ezpz_tui.core.launch_result import NotStarted, not_started
from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import DEMO_MODULE, LaunchPlan, LaunchRefused, check
from ezpz_tui.core.launching.supervisor import RunHandle
from ezpz_tui.core.session import Session
from runtime.rundir import State


def layout_label(plan: LaunchPlan) -> str:
    return f"tp{plan.tp} pp{plan.pp} cp{plan.cp}"


def is_demo(command: Sequence[str]) -> bool:
    """Whether ``command`` runs the built-in demo (``python -m runtime.examples.train``)."""
    return list(command[1:3]) == ["-m", DEMO_MODULE]


def with_steps(
    command: Sequence[str], steps: int | None, global_batch: int | None = None
) -> tuple[str, ...]:
    """``command`` with ``--steps N`` (and ``--global-batch N``: the same batch in every
    layout, so their losses compare) for the demo. A user's command is not changed: what its
    options are called cannot be known, so asking for either with one is a ``ValueError`` (put
    them in the command instead)."""
    given = [(f, v) for f, v in (("--steps", steps), ("--global-batch", global_batch)) if v]
    if not given:
        return tuple(command)
    if not is_demo(command):
        names = " and ".join(f for f, _ in given)
        verb = "reaches" if len(given) == 1 else "reach"
        raise ValueError(f"{names} {verb} the built-in demo only; give your command its own")
    return (*command, *(item for f, v in given for item in (f, str(v))))


@dataclass(frozen=True)
class SweepPlan:
    """The runs a sweep makes, in order, and the layouts it skips with the reason."""

    runs: tuple[LaunchPlan, ...]
    skipped: tuple[tuple[LaunchPlan, str], ...]


def _unique(values: Sequence[int]) -> list[int]:
    return list(dict.fromkeys(values))


def plan_sweep(
    base: LaunchPlan, alloc: Allocation, tps: Sequence[int], pps: Sequence[int], cps: Sequence[int]
) -> SweepPlan:
    """Every combination of the sizes on ``base``, valid ones to run, invalid ones with why."""
    runs, skipped = [], []
    for tp, pp, cp in itertools.product(_unique(tps), _unique(pps), _unique(cps)):
        plan = base.with_changes(tp=tp, pp=pp, cp=cp)
        try:
            check(plan, alloc)
        except LaunchRefused as refused:
            skipped.append((plan, " ".join(p.message for p in refused.problems)))
        else:
            runs.append(plan)
    return SweepPlan(tuple(runs), tuple(skipped))


EventKind = Literal["started", "ended", "stopping", "refused"]


@dataclass(frozen=True)
class SweepEvent:
    """What happened to one run of a sweep: ``started``, ``ended``, ``stopping`` (the stop was
    asked for while it ran) or ``refused`` (the launch was refused when its turn came, e.g.
    every host is now in ``bad_hosts.txt``)."""

    kind: EventKind
    index: int  # 0-based position in the sweep plan
    total: int
    plan: LaunchPlan
    handle: RunHandle | None = None
    message: str = ""


@dataclass(frozen=True)
class SweepOutcome:
    """How the sweep went: its record (run ids in order) and every run's final state;
    ``halted``: why it ended before its plan was through, when the outputs directory (or a value
    a launch could not take) stopped it."""

    record: SweepRecord
    run_dirs: tuple[Path, ...]
    states: tuple[State, ...]
    stopped: bool
    refused: tuple[str, ...] = ()
    halted: NotStarted | None = None

    @property
    def all_succeeded(self) -> bool:
        ok = all(s == State.SUCCEEDED for s in self.states)
        return ok and not self.refused and self.halted is None


def never() -> bool:
    """A sweep's ``should_stop`` when nothing asks it to stop."""
    return False


def start_in_sweep(
    session: Session, plan: LaunchPlan, record: SweepRecord
) -> tuple[SweepRecord, RunHandle | NotStarted]:
    """Launch ``plan`` as a run of ``record``'s sweep; a started run is added to the record,
    written at once so that the runs list and ``compare`` find it while it runs. OSError: the
    record could not be rewritten."""
    result = session.launch(plan, parent=record.sweep_id)
    if isinstance(result, NotStarted):
        return record, result
    record = record.with_run(result.handle.run_dir.name)
    write_sweep(session.store.outputs, record)
    return record, result.handle


def run_sweep(
    session: Session,
    plan: SweepPlan,
    steps: int | None = None,
    on_event: Callable[[SweepEvent], None] = lambda event: None,
    should_stop: Callable[[], bool] = never,
    poll_s: float = 0.2,
    stop_reason: Callable[[], str | None] = lambda: None,
) -> SweepOutcome:
    """Run ``plan``'s runs one after another until done or ``should_stop``; blocks.

    ``on_event`` and ``should_stop`` are called in the thread that runs the sweep (a TUI posts
    a message from ``on_event`` and answers ``should_stop`` from its worker's cancellation);
    ``stop_reason`` says what asked for the stop when it was not the user (the run's record
    keeps it).
    """
    total = len(plan.runs)
    record = SweepRecord(
        sweep_id="",
        created=0.0,
        state=RUNNING,
        layouts=tuple(layout_label(p) for p in plan.runs),
        skipped=tuple((layout_label(p), why) for p, why in plan.skipped),
        runs=(),
        steps=steps,
        command=plan.runs[0].command if plan.runs else (),
    )
    outputs = session.store.outputs
    try:
        record = new_sweep(outputs, record)
    except OSError as exc:
        return SweepOutcome(record, (), (), False, halted=not_started(exc, outputs, "launch"))
    run_dirs: list[Path] = []
    states: list[State] = []
    refused: list[str] = []
    stopped = False
    halted: NotStarted | None = None
    try:
        for index, run_plan in enumerate(plan.runs):
            if should_stop():
                stopped = True
                break
            record, handle = start_in_sweep(session, run_plan, record)
            if isinstance(handle, NotStarted) and handle.kind == "refused":
                said = " ".join(handle.reasons)
                refused.append(f"{layout_label(run_plan)}: {said}")
                on_event(SweepEvent("refused", index, total, run_plan, message=said))
                continue
            if isinstance(handle, NotStarted):
                halted = handle
                break
            run_dirs.append(handle.run_dir)
            on_event(SweepEvent("started", index, total, run_plan, handle))
            while handle.wait(poll_s) is None:
                if should_stop():
                    stopped = True
                    on_event(SweepEvent("stopping", index, total, run_plan, handle))
                    handle.stop(reason=stop_reason())
                    break
            states.append(handle.state.state)
            on_event(SweepEvent("ended", index, total, run_plan, handle))
            if stopped:
                break
    except OSError as exc:  # the sweep's record could not be rewritten
        halted = not_started(exc, outputs, "launch")
    finally:
        record = _record_end(outputs, record, stopped or len(states) + len(refused) < total)
    return SweepOutcome(record, tuple(run_dirs), tuple(states), stopped, tuple(refused), halted)


def _record_end(outputs: Path, record: SweepRecord, stopped: bool) -> SweepRecord:
    """Write the sweep's final state (``stopped`` when it did not get through its plan)."""
    ended = replace(record, state=STOPPED if stopped else FINISHED)
    try:
        write_sweep(outputs, ended)
    except OSError:
        return record
    return ended
