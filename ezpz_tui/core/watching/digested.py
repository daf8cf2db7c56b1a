"""A finished run as its ``digest.json`` has it, read off the UI's interpreter.

Opening a finished run of 131,072 ranks from its files reads half a million of them; its digest
(:mod:`ezpz_tui.core.runs.digest`) holds what opening it shows in one file. Parsing that file
still costs a second or more at that size, and the UI's interpreter must not hold its lock that
long: :func:`read_apart` reads it in a child interpreter (``python -m`` this module), which
hands back a :class:`Digested` of columns and numpy arrays, pickled: a few lists of plain values
per field, not an object per rank, so the UI's side unpickles it in a fraction of the parse.
What becomes of it is the monitor's (:meth:`~.monitor.RunMonitor.settle`) and the metric
store's (:class:`~.metrics.settled.SettledRanks`).
"""

from __future__ import annotations

import math
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from ezpz_tui.core.runs.digest import number, read_digest
from ezpz_tui.core.watching.metrics.settled import SettledRanks, floats, step_bands
from runtime.efficiency.flops import FLOPS_PER_TOKEN
from runtime.rundir import RunDir
from runtime.telemetry.record import Sample

# A digest this large (~8,000 ranks) parses in a child: json.loads holds the interpreter's lock
# throughout, ~12 ms a MiB, and a key must repaint within 100 ms; a child takes ~0.15 s to start.
APART_BYTES = 4 << 20
READ_TIMEOUT_S = 120.0  # a 131,072-rank digest parses in about a second; a stuck disk is no hang
STATUS_FIELDS = ("local_rank", "state", "exit_code", "signal_name", "cause", "end")
"""The status columns a rank's row shows (with ``host``, an index into ``hosts``)."""


@dataclass
class Digested:
    """What the rank list, the summary bar and the metrics plot show of a finished run, by
    rank (index = rank; None where the digest has nothing)."""

    world: int
    hosts: list[str]
    host: list[int | None]
    status: dict[str, list[Any]]  # the STATUS_FIELDS, as the status files wrote them
    last_line: list[str | None]
    step_time: list[float | None]
    tokens_per_s: list[float | None]
    slow: list[int]  # the stragglers the summary's verdicts named at the end
    telemetry: dict[str, list[Any]]  # each rank's last Sample, its fields in their order
    metrics: SettledRanks
    records: int  # metric records across ranks (the band's counts of its fullest metric)
    step: int | None  # the summary bar's: rank 0's last step and loss, the run's step rate
    loss: float | None
    steps_per_s: float | None
    flops_per_token: float | None


def read_digested(run_dir: Path) -> Digested | None:
    """The run's digest as columns; None without a readable one (the files tell instead)."""
    digest = read_digest(run_dir)
    if digest is None:
        return None
    world = digest.world
    column = digest.column
    last: dict[str, list[Any]] = column("last")
    lasts = {name: floats(values) for name, values in last.items()}
    for values in lasts.values():
        values[~np.isfinite(values)] = math.nan  # a digest keeps last finite values only
    last_step = np.array([-1 if s is None else s for s in column("last_step")], dtype=np.int64)
    last_time = floats(column("last_time"))
    bands = {name: band for name in digest.metrics() if (band := digest.band(name)) is not None}
    settled = SettledRanks(world, step_bands(bands), lasts, last_step, last_time)
    counts = settled.bands.tables["count"][:, : settled.bands.steps.n]
    shown = settled.with_metric(None)
    first = shown[0] if shown else 0
    loss = lasts.get("loss")
    return Digested(
        world=world,
        hosts=list(column("hosts")),
        host=list(column("host")),
        status={name: list(column(name)) for name in STATUS_FIELDS},
        last_line=list(column("last_line")),
        step_time=[number(t) for t in column("step_time_s")],
        tokens_per_s=[number(t) for t in column("tokens_per_s")],
        slow=[rank for rank, slow in enumerate(column("slow")) if slow is True],
        telemetry=_samples(column("telemetry"), world),
        metrics=settled,
        records=int(counts.sum(axis=1).max()) if counts.size else 0,
        step=digest.last_step(first) if shown else None,
        loss=float(loss[first]) if loss is not None and not math.isnan(loss[first]) else None,
        steps_per_s=_rate(settled),
        flops_per_token=next(
            (v for v in lasts.get(FLOPS_PER_TOKEN, ()) if not math.isnan(v)), None
        ),
    )


def _samples(held: dict[str, list[Any]], world: int) -> dict[str, list[Any]]:
    """The telemetry columns in :class:`Sample`'s field order (None where a digest lacks one),
    numbers as numbers (the JSONL's "NaN" as NaN): what :func:`~.monitor.settled` makes a
    Sample of by position, 131,072 times."""
    out: dict[str, list[Any]] = {}
    for field in fields(Sample):
        values = held.get(field.name)
        if values is None:
            out[field.name] = [None] * world
        elif field.name in ("device", "device_name"):
            out[field.name] = [v if isinstance(v, str) else None for v in values]
        else:
            out[field.name] = [number(v) if isinstance(v, str) else v for v in values]
    return out


def _rate(settled: SettledRanks) -> float | None:
    """Steps a second from the first timed step to the last, as the summary bar's rate."""
    steps, when = settled.bands.steps.view(), settled.bands.when.view()
    timed = np.flatnonzero(np.isfinite(when))
    if len(timed) < 2:
        return None
    a, b = timed[0], timed[-1]
    seconds = when[b] - when[a]
    return float((steps[b] - steps[a]) / seconds) if seconds > 0 else None


def read_apart(
    run_dir: Path, apart_bytes: int = APART_BYTES, timeout_s: float = READ_TIMEOUT_S
) -> Digested | None:
    """:func:`read_digested` in a child interpreter (the UI's keeps its lock for its keys),
    or here for a digest under ``apart_bytes`` (its parse holds the lock for less than the
    child takes to start); None when the run has no readable digest or the child failed.
    Never raises."""
    try:
        size = RunDir(run_dir).digest_json.stat().st_size
    except OSError:  # none: no child for a run without one
        return None
    if size < apart_bytes:
        return read_digested(run_dir)
    argv = [sys.executable, "-m", __name__, str(run_dir)]
    try:
        done = subprocess.run(
            argv, capture_output=True, timeout=timeout_s, env=os.environ.copy(), check=False
        )
        found = pickle.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, pickle.UnpicklingError, EOFError, ValueError):
        return None
    return found if isinstance(found, Digested) else None


def _main(argv: list[str]) -> int:
    # By the module's own name: what run as ``__main__`` defines would pickle as ``__main__``'s.
    from ezpz_tui.core.watching import digested

    found = digested.read_digested(Path(argv[0]))
    sys.stdout.buffer.write(pickle.dumps(found, pickle.HIGHEST_PROTOCOL))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
