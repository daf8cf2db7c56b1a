"""A sweep's record: the layouts it tried, the ones it skipped and why, the runs it made.

A sweep is not a run: it starts ordinary runs one after another, each naming the sweep as its
``parent``, so everything that reads runs reads them as it always has. The record
(``<outputs>/sweeps/<sweep-id>.json``, :func:`runtime.rundir.sweep_record`) is what lets a run
find its siblings and ``ezpz-tui compare`` find the latest sweep. Sweep ids are
``sweep-YYYYmmdd-HHMMSS-mmm`` (``-N`` on a collision), made with an exclusive create, as run ids
are. The record is rewritten whole (atomically) as each run starts and when the sweep ends.
Readers never raise: an unreadable record is no sweep.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from runtime.atomic import write_atomic
from runtime.rundir import SWEEP_FILE, SWEEP_PREFIX, SWEEPS, sweep_record

RUNNING, FINISHED, STOPPED = "running", "finished", "stopped"


@dataclass(frozen=True)
class SweepRecord:
    """What a sweep tried and made; ``layouts`` and ``skipped`` are ``tp2 pp1 cp1`` labels."""

    sweep_id: str
    created: float
    state: str  # running | finished | stopped
    layouts: tuple[str, ...]
    skipped: tuple[tuple[str, str], ...]  # (layout, why)
    runs: tuple[str, ...]  # run ids, in the order they ran
    steps: int | None
    command: tuple[str, ...]

    def with_run(self, run_id: str) -> SweepRecord:
        return replace(self, runs=(*self.runs, run_id))


def write_sweep(outputs: Path, record: SweepRecord) -> None:
    """Rewrite the sweep's record whole; ``OSError`` when the disk refuses."""
    data = asdict(record)
    write_atomic(sweep_record(outputs, record.sweep_id), json.dumps(data, indent=1).encode())


def new_sweep(outputs: Path, record: SweepRecord) -> SweepRecord:
    """Record a new sweep under a fresh id (``record.sweep_id`` is replaced); ``OSError`` when
    the outputs directory cannot hold it."""
    now = datetime.now().astimezone()
    base = f"{SWEEP_PREFIX}{now:%Y%m%d-%H%M%S}-{now.microsecond // 1000:03d}"
    (outputs / SWEEPS).mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        sweep_id = base if n == 1 else f"{base}-{n}"
        try:
            os.close(os.open(sweep_record(outputs, sweep_id), os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            continue
        made = replace(record, sweep_id=sweep_id, created=now.timestamp())
        write_sweep(outputs, made)
        return made
    raise FileExistsError(f"too many sweeps named {base} in {outputs / SWEEPS}")


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()


def read_sweep(outputs: Path, sweep_id: str) -> SweepRecord | None:
    """The sweep's record, or ``None`` when there is none or it cannot be read."""
    try:
        data = json.loads(sweep_record(outputs, sweep_id).read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    skipped = data.get("skipped")
    created, steps = data.get("created"), data.get("steps")
    return SweepRecord(
        sweep_id=sweep_id,
        created=float(created) if isinstance(created, (int, float)) else 0.0,
        state=data["state"] if isinstance(data.get("state"), str) else "unknown",
        layouts=_strings(data.get("layouts")),
        skipped=tuple(
            (item[0], item[1])
            for item in (skipped if isinstance(skipped, list) else [])
            if isinstance(item, list) and len(item) == 2 and all(isinstance(v, str) for v in item)
        ),
        runs=_strings(data.get("runs")),
        steps=steps if isinstance(steps, int) and not isinstance(steps, bool) else None,
        command=_strings(data.get("command")),
    )


def latest_sweep(outputs: Path) -> SweepRecord | None:
    """The newest readable sweep in ``outputs`` (ids sort by time), or ``None``."""
    try:
        matches = [SWEEP_FILE.fullmatch(p.name) for p in (outputs / SWEEPS).iterdir()]
    except OSError:
        return None
    for sweep_id in sorted((m.group(1) for m in matches if m), reverse=True):
        record = read_sweep(outputs, sweep_id)
        if record is not None:
            return record
    return None
