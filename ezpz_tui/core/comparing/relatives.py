"""The runs a run is naturally compared with: the runs it was relaunched from, and the other
runs of its sweep.

A relaunch records the run it replaced as ``parent`` in its record, a retry the run it
retried, and a sweep's runs name the sweep (:mod:`ezpz_tui.core.comparing.sweep_record`). So
opening Compare on a relaunched run can include its parent without being asked, and on a sweep's
run every layout the sweep tried. Parents are looked for in the run's own outputs directory;
the chain stops at a parent that is not there (deleted, or another outputs directory), at a
sweep, or at a loop. Never raises.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ezpz_tui.core.comparing.sweep_record import read_sweep
from ezpz_tui.core.runs.record import RunStoreError, read_run_toml
from runtime.rundir import RunDir

_MAX_CHAIN = 1000


@dataclass(frozen=True)
class Relatives:
    """``run``'s parents (nearest first), and the sweep it belongs to with its other runs."""

    run: Path
    parents: tuple[Path, ...]
    sweep: str | None
    siblings: tuple[Path, ...]  # the sweep's other runs, in the order they ran

    def together(self) -> tuple[Path, ...]:
        """The run and its relatives, oldest first (run ids sort by time): the set a Compare
        view opens with."""
        return tuple(sorted({*self.parents, *self.siblings, self.run}, key=lambda p: p.name))


def _parent_of(run_dir: Path) -> str | None:
    try:
        parent = read_run_toml(run_dir).get("parent")
    except RunStoreError:
        return None
    return parent if isinstance(parent, str) and parent and "/" not in parent else None


def relatives_of(run_dir: Path) -> Relatives:
    """``run_dir``'s relatives in its outputs directory (its parent directory)."""
    run = Path(run_dir)
    outputs = run.parent
    parents: list[Path] = []
    seen = {run.name}
    current, sweep = run, None
    for _ in range(_MAX_CHAIN):
        name = _parent_of(current)
        if name is None or name in seen:
            break
        record = read_sweep(outputs, name)
        if record is not None:
            sweep = record
            break
        candidate = outputs / name
        if not RunDir(candidate).looks_like_run():
            break
        parents.append(candidate)
        seen.add(name)
        current = candidate
    siblings: tuple[Path, ...] = ()
    if sweep is not None:
        siblings = tuple(
            outputs / rid
            for rid in sweep.runs
            if rid not in seen and RunDir(outputs / rid).looks_like_run()
        )
    return Relatives(run, tuple(parents), sweep.sweep_id if sweep else None, siblings)
