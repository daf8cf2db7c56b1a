"""What a finished run's ``digest.json`` holds (:mod:`ezpz_tui.core.runs.digest`), read from every
rank's files once, by the finalizer at the run's end.

Each figure is judged here exactly as its reader judges it from the files (``top``'s step times
from each metrics file's newest records, its newest telemetry sample, the status as the file
says it; ``compare``'s peak memory of each rank and the highest step goodput asks of a run's
ancestor, by the very functions that read them from the files), so a reader taking it from the
digest shows what it would have shown from the files.
The digest sits with the run's reading side (core/runs) and is built here, above it, because
building it takes watching's judgements (step times, bands, the end's verdicts).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ezpz_tui.core.runs.culprit import raises_in
from ezpz_tui.core.runs.digest import (
    MAX_LINE,
    RANK_COLUMNS,
    SAMPLE_COLUMNS,
    STATUS_COLUMNS,
    VERSION,
    plain,
)
from ezpz_tui.core.runs.tail import read_tail
from ezpz_tui.core.runs.unreadable import unusable_statuses
from ezpz_tui.core.watching.collectives import lags_of
from ezpz_tui.core.watching.goodput import highest_step
from ezpz_tui.core.watching.metrics.lean import LeanRanks, StepBands
from ezpz_tui.core.watching.numbers import RankPeaks, every_rank_memory
from ezpz_tui.core.watching.recorded import recorded_verdicts
from ezpz_tui.core.watching.stragglers import StepTimes
from ezpz_tui.core.watching.tails import plain as plain_text
from ezpz_tui.core.watching.telemetry import read_last
from ezpz_tui.core.watching.top import SAMPLE_TAIL, newest_records, no_use, recorded_reasons
from runtime.record_columns import RecordColumns, merge_columns, parse_columns
from runtime.rundir import RankStatus, RunDir, metric_files, read_state, read_statuses

LOG_TAIL = 4 << 10  # bytes of a log read for its last line
_STEP_LIMIT = 1 << 62


def build_digest(run_dir: Path, verdicts: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The digest of the ended run in ``run_dir``, reading each rank's files once; ``verdicts``:
    its summary's ``verdicts`` section (default: as ``summary.json`` holds it), whose arrival
    lags and stragglers give the ``arrival_lag_s`` and ``slow`` columns."""
    run = RunDir(Path(run_dir))
    state = read_state(run.path)
    statuses = {s.rank: s for s in read_statuses(run.path)}
    unusable = unusable_statuses(run.path, statuses.values())
    raised = {rank: said[0].line for rank, said in raises_in(run.path).items() if said}
    logs = {rank: _log_end(path) for path, rank in run.logs()}
    metric_notes: list[str] = []
    newest = newest_records(run, metric_notes, ended=True)
    steps = StepTimes()
    steps.update(newest)
    recorded = [w for c in newest.values() for w in c.steps if w is not None]
    telemetry_notes: list[str] = []
    samples = {}
    for path, rank in run.telemetries():
        samples[rank] = read_last(path, SAMPLE_TAIL)
        note = None if samples[rank] is not None else no_use(run.path, path, "sample", True)
        telemetry_notes += [note] if note else []
    lean, lasts = _fold_metrics(run.path)
    said = verdicts if verdicts is not None else recorded_verdicts(run.path)
    lags = lags_of(said.get("arrival")).lag_s if said is not None else {}
    slow = set(recorded_reasons(said)) if said is not None else set()
    seen = set(statuses) | set(unusable) | set(logs) | set(samples) | set(lean.ranks)
    world = max(seen, default=-1) + 1
    ranks = _status_columns(statuses, world)
    ranks["raised"] = [raised.get(r) for r in range(world)]
    ranks["log_bytes"] = [logs[r][0] if r in logs else None for r in range(world)]
    ranks["last_line"] = [logs[r][1] if r in logs else None for r in range(world)]
    summaries = [lean.ranks.get(r) for r in range(world)]
    ranks["last_step"], ranks["last_time"] = _newest(summaries)
    ranks["step_time_s"] = [plain(steps.recent(r)) for r in range(world)]
    ranks["tokens_per_s"] = [plain(steps.tokens_per_s.get(r)) for r in range(world)]
    ranks["records"] = [r in steps.ranks for r in range(world)]
    ranks["telemetry_file"] = [r in samples for r in range(world)]
    ranks["arrival_lag_s"] = [lags.get(r) for r in range(world)]
    ranks["slow"] = [r in slow for r in range(world)]
    ranks["last"] = {name: [column.get(r) for r in range(world)] for name, column in lasts.items()}
    ranks["telemetry"] = _sample_columns(samples, world)
    reads: dict[str, Any] = {}
    memory = every_rank_memory(run.path)
    if memory is not None and _in_world(memory[0], world):
        ranks["peak"] = {
            name: [plain(held.get(r)) for r in range(world)] for name, held in memory[0].items()
        }
        reads["others_garbage"] = memory[1]
    return {
        "version": VERSION,
        "run_id": state.run_id or run.path.name,
        "written": time.time(),
        "world": world,
        "ranks": ranks,
        "bands": _bands(lean.bands),
        "reads": {
            "unusable": {str(rank): line for rank, line in sorted(unusable.items())},
            "metrics_notes": metric_notes,
            "telemetry_notes": telemetry_notes,
            "median_step_s": plain(steps.median),
            "last_step": max(recorded) if recorded else None,
            "highest_step": highest_step(run.path),
            **reads,
        },
    }


def _in_world(peaks: RankPeaks, world: int) -> bool:
    """Whether every rank a peak was recorded on has its place in the rank columns."""
    return all(0 <= rank < world for held in peaks.values() for rank in held)


def _status_columns(statuses: Mapping[int, RankStatus], world: int) -> dict[str, Any]:
    """Each status field as a column, host and command as indexes into their distinct values;
    null everywhere for a rank with no readable status."""
    columns: dict[str, Any] = {name: [None] * world for name in RANK_COLUMNS}
    hosts: dict[str, int] = {}
    commands: dict[tuple[str, ...], int] = {}
    for rank, status in statuses.items():
        data = status.to_json()
        for name in STATUS_COLUMNS:
            columns[name][rank] = data.get(name)
        columns["destroyed_at_exit"][rank] = status.destroyed_at_exit
        if status.host is not None:
            columns["host"][rank] = hosts.setdefault(status.host, len(hosts))
        if status.command is not None:
            columns["command"][rank] = commands.setdefault(status.command, len(commands))
    columns["hosts"] = list(hosts)
    columns["commands"] = [list(c) for c in commands]
    return columns


def _log_end(path: Path) -> tuple[int | None, str | None]:
    """The log's size and its last line that is not blank (at most :data:`MAX_LINE`)."""
    try:
        size = path.stat().st_size
    except OSError:
        return None, None
    lines = [line for line in read_tail(path, LOG_TAIL).splitlines() if line.strip()]
    return size, plain_text(lines[-1].rstrip())[:MAX_LINE] if lines else None


def _fold_metrics(run_dir: Path) -> tuple[LeanRanks, dict[str, dict[int, float | str]]]:
    """Every rank's records folded into the bands, and each metric's last finite value by rank
    (the JSONL's spelling for none: left out)."""
    lean = LeanRanks()
    lasts: dict[str, dict[int, float | str]] = {}
    for path, default in metric_files(run_dir):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        for rank, columns in _parse(data, default).items():
            steps = _steps(columns.steps, lean.ranks[rank].n if rank in lean.ranks else 0)
            times = np.array(columns.timestamps, dtype=np.float64)
            lean.fold(rank, steps, times, columns.metrics)
            for name, values in columns.metrics.items():
                value = next((v for v in reversed(values) if math.isfinite(v)), None)
                if value is not None:
                    lasts.setdefault(name, {})[rank] = value
    return lean, lasts


def _parse(data: bytes, default: int) -> dict[int, RecordColumns]:
    """A metrics file's records by rank; its first line parsed on its own, because the first
    record names what the rest do not (the run's FLOPs per token) and would send its whole block
    down the record-by-record path (:func:`runtime.record_columns.parse_columns`)."""
    head = data.find(b"\n") + 1
    columns = parse_columns(data[:head], default).columns
    merge_columns(columns, parse_columns(data[head:], default).columns)
    return columns


def _steps(steps: list[int | None], n0: int) -> np.ndarray:
    """The steps as int64, a record without one (or one past int64) numbered by its place, as
    the metric store numbers them."""
    return np.array(
        [
            s if s is not None and -_STEP_LIMIT < s < _STEP_LIMIT else n0 + i
            for i, s in enumerate(steps)
        ],
        dtype=np.int64,
    )


def _newest(summaries: Iterable[Any]) -> tuple[list[int | None], list[float | str | None]]:
    """Each rank's newest record's step and time, over its metrics' last records."""
    step_col: list[int | None] = []
    time_col: list[float | str | None] = []
    for summary in summaries:
        held = list(summary.last.values()) if summary is not None else []
        newest = max(held, key=lambda last: last.step, default=None)
        step_col.append(None if newest is None else newest.step)
        time_col.append(None if newest is None else plain(newest.time))
    return step_col, time_col


def _sample_columns(samples: Mapping[int, Any], world: int) -> dict[str, list[Any]]:
    columns: dict[str, list[Any]] = {name: [None] * world for name in SAMPLE_COLUMNS}
    for rank, sample in samples.items():
        if sample is None:
            continue
        for name in SAMPLE_COLUMNS:
            columns[name][rank] = getattr(sample, name)
    return columns


def _bands(bands: StepBands) -> dict[str, dict[str, list[Any]]]:
    """Each metric across ranks at the steps a rank holding it logged: the mean, the extremes
    with their ranks, the values counted, the step's earliest time."""
    out = {}
    n = bands.steps.n
    for name, row in bands.rows.items():
        t = {key: table[row, :n] for key, table in bands.tables.items()}
        present = t["present"] > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = t["total"] / t["count"]
        out[name] = {
            "step": bands.steps.view()[present].tolist(),
            "time": [plain(x) for x in bands.when.view()[present].tolist()],
            "mean": [plain(x) for x in mean[present].tolist()],
            "lo": [plain(x) for x in t["lo"][present].tolist()],
            "hi": [plain(x) for x in t["hi"][present].tolist()],
            "lo_rank": t["lo_rank"][present].tolist(),
            "hi_rank": t["hi_rank"][present].tolist(),
            "count": t["count"][present].tolist(),
        }
    return out
