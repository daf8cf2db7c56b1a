"""What a finished run's ``digest.json`` holds (:mod:`ezpz_tui.core.runs.digest`), read from every
rank's files once, by the finalizer at the run's end.

Each figure is judged here exactly as its reader judges it from the files (``top``'s step times
from each metrics file's newest records, its newest telemetry sample, the status as the file
says it; ``compare``'s peak memory of each rank and the highest step goodput asks of a run's
ancestor, by the very functions that read them from the files), so a reader taking it from the
digest shows what it would have shown from the files.

Reading every rank's files is the finalizer's cost: ~7 s of CPU at 4,096 ranks, nearly all of it
parsing each rank's whole metrics file for the bands by step, so ~4 min at 131,072. The ranks
are read in parts of whole blocks (:data:`runtime.rundir.BLOCK` ranks), each part in a worker
process of its own when there are several (:func:`build_digest`'s ``workers``), each worker
judging what it can of its ranks alone (a rank's step time, its last values, the partial bands
of its ranks) and handing back only that; the parts are merged in rank order, so ties go to the
lower rank as when one process folds every rank.
The digest sits with the run's reading side (core/runs) and is built here, above it, because
building it takes watching's judgements (step times, bands, the end's verdicts).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
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
from ezpz_tui.core.runs.unreadable import unusable_status
from ezpz_tui.core.watching.collectives import lags_of
from ezpz_tui.core.watching.goodput import TAIL_BYTES
from ezpz_tui.core.watching.metrics.lean import LeanRanks, RankSummary, StepBands
from ezpz_tui.core.watching.numbers import RankPeaks, every_rank_memory
from ezpz_tui.core.watching.recorded import recorded_verdicts
from ezpz_tui.core.watching.stragglers import StepTimes
from ezpz_tui.core.watching.tails import plain as plain_text
from ezpz_tui.core.watching.telemetry import read_last
from ezpz_tui.core.watching.telemetry import read_tail as read_end
from ezpz_tui.core.watching.top import RECORDS_TAIL, SAMPLE_TAIL, no_use, recorded_reasons
from runtime.metric_files import metric_files
from runtime.record_columns import RecordColumns, merge_columns, parse_columns
from runtime.rundir import BLOCK, RankStatus, RunDir, read_state, read_status

LOG_TAIL = 4 << 10  # bytes of a log read for its last line
_STEP_LIMIT = 1 << 62
WORKERS_VAR = "EZPZ_DIGEST_WORKERS"  # processes reading the ranks (default: the CPUs, at most 8)
MAX_WORKERS = 8
PART_RANKS = BLOCK  # ranks a part holds: a block, a listing of each rank folder
_Listed = list[tuple[Path, int]]


def build_digest(
    run_dir: Path, verdicts: Mapping[str, Any] | None = None, workers: int | None = None
) -> dict[str, Any]:
    """The digest of the ended run in ``run_dir``, reading each rank's files once; ``verdicts``:
    its summary's ``verdicts`` section (default: as ``summary.json`` holds it), whose arrival
    lags and stragglers give the ``arrival_lag_s`` and ``slow`` columns. ``workers``: processes
    reading the ranks' parts (default :data:`WORKERS_VAR`, else the CPUs this process may run
    on, at most :data:`MAX_WORKERS`); one part, or one worker, is read in this process."""
    run = RunDir(Path(run_dir))
    state = read_state(run.path)
    listed = _Files(run.statuses(), run.logs(), metric_files(run.path), run.telemetries())
    part = _read_parts(run.path, listed.split(PART_RANKS), _workers(workers))
    statuses = part.statuses
    raised = {rank: said[0].line for rank, said in raises_in(run.path).items() if said}
    said = verdicts if verdicts is not None else recorded_verdicts(run.path)
    lags = lags_of(said.get("arrival")).lag_s if said is not None else {}
    slow = set(recorded_reasons(said)) if said is not None else set()
    seen = set(statuses) | set(part.unusable) | set(part.logs) | set(part.samples)
    world = max(seen | set(part.summaries), default=-1) + 1
    logs = part.logs
    ranks = _status_columns(statuses, world)
    ranks["raised"] = [raised.get(r) for r in range(world)]
    ranks["log_bytes"] = [logs[r][0] if r in logs else None for r in range(world)]
    ranks["last_line"] = [logs[r][1] if r in logs else None for r in range(world)]
    summaries = [part.summaries.get(r) for r in range(world)]
    ranks["last_step"], ranks["last_time"] = _newest(summaries)
    ranks["step_time_s"] = [plain(part.recent.get(r)) for r in range(world)]
    ranks["tokens_per_s"] = [plain(part.tokens_per_s.get(r)) for r in range(world)]
    ranks["records"] = [r in part.recent for r in range(world)]
    ranks["telemetry_file"] = [r in part.samples for r in range(world)]
    ranks["arrival_lag_s"] = [lags.get(r) for r in range(world)]
    ranks["slow"] = [r in slow for r in range(world)]
    lasts = part.lasts
    ranks["last"] = {name: [column.get(r) for r in range(world)] for name, column in lasts.items()}
    ranks["telemetry"] = _sample_columns(part.samples, world)
    reads: dict[str, Any] = {}
    memory = every_rank_memory(run.path)
    if memory is not None and _in_world(memory[0], world):
        ranks["peak"] = {
            name: [plain(held.get(r)) for r in range(world)] for name, held in memory[0].items()
        }
        reads["others_garbage"] = memory[1]
    times = [t for t in part.recent.values() if t is not None]
    return {
        "version": VERSION,
        "run_id": state.run_id or run.path.name,
        "written": time.time(),
        "world": world,
        "ranks": ranks,
        "bands": _bands(part.bands),
        "reads": {
            "unusable": {str(rank): line for rank, line in sorted(part.unusable.items())},
            "metrics_notes": part.metric_notes,
            "telemetry_notes": part.telemetry_notes,
            "median_step_s": plain(statistics.median(times) if times else None),
            "last_step": part.last_step,
            "highest_step": part.highest_step,
            **reads,
        },
    }


def _workers(asked: int | None) -> int:
    if asked is None:
        try:
            asked = int(os.environ.get(WORKERS_VAR, ""))
        except ValueError:
            asked = min(MAX_WORKERS, len(os.sched_getaffinity(0)))
    return max(1, asked)


@dataclass
class _Files:
    """A run's rank files as listed once (each list by rank): what the parts are cut from."""

    statuses: _Listed
    logs: _Listed
    metrics: _Listed  # with the rank each file defaults to
    telemetries: _Listed

    def split(self, ranks: int) -> list[_Files]:
        """The files in parts of ``ranks`` consecutive ranks, in rank order."""
        lists = [getattr(self, name) for name in _LISTS]
        parts = sorted({rank // ranks for listed in lists for _, rank in listed})
        at = {part: i for i, part in enumerate(parts)}
        out = [_Files([], [], [], []) for _ in parts]
        for name, listed in zip(_LISTS, lists, strict=True):
            for path, rank in listed:
                getattr(out[at[rank // ranks]], name).append((path, rank))
        return out

    @classmethod
    def joined(cls, parts: list[_Files]) -> _Files:
        return cls(*([entry for part in parts for entry in getattr(part, name)] for name in _LISTS))


_LISTS = ("statuses", "logs", "metrics", "telemetries")


@dataclass
class _Part:
    """What the files of some ranks say, judged as far as those ranks alone allow."""

    statuses: dict[int, RankStatus] = field(default_factory=dict)
    unusable: dict[int, str] = field(default_factory=dict)
    logs: dict[int, tuple[int | None, str | None]] = field(default_factory=dict)
    metric_notes: list[str] = field(default_factory=list)
    recent: dict[int, float | None] = field(default_factory=dict)  # each rank's step time
    tokens_per_s: dict[int, float] = field(default_factory=dict)
    last_step: int | None = None  # the newest records' highest step
    highest_step: int | None = None  # goodput's: the highest step at the files' ends
    samples: dict[int, Any] = field(default_factory=dict)
    telemetry_notes: list[str] = field(default_factory=list)
    summaries: dict[int, RankSummary] = field(default_factory=dict)
    bands: list[StepBands] = field(default_factory=list)  # each part's, in rank order
    lasts: dict[str, dict[int, float | str]] = field(default_factory=dict)


def _read_parts(run_dir: Path, parts: list[_Files], workers: int) -> _Part:
    """Every part read (in worker processes where there are several) and merged, or, where
    a rank's records lie in more than one part's files (an ezpz run's shared file), the whole
    run read as one part."""
    if len(parts) < 2 or workers < 2:
        return _read_part(run_dir, _Files.joined(parts))
    with ProcessPoolExecutor(min(workers, len(parts)), mp_context=get_context("spawn")) as pool:
        read = list(pool.map(_read_part, [run_dir] * len(parts), parts))
    merged = _merge(read)
    return merged if merged is not None else _read_part(run_dir, _Files.joined(parts))


def _read_part(run_dir: Path, files: _Files) -> _Part:
    """Read one part's files: each rank's status, log end, newest records and step time,
    newest sample, and its records folded into the part's bands and last values."""
    part = _Part()
    for path, rank in files.statuses:
        status = read_status(path, rank)
        if status is not None:
            part.statuses[status.rank] = status
    for path, rank in files.statuses:
        why = None if rank in part.statuses else unusable_status(run_dir, path)
        if why is not None:
            part.unusable[rank] = why
    part.logs = {rank: _log_end(path) for path, rank in files.logs}
    newest: dict[int, RecordColumns] = {}
    highest: list[int] = []
    for path, rank in files.metrics:
        data = read_end(path, RECORDS_TAIL)  # as top reads a rank's newest records
        found = parse_columns(data, rank).columns if data is not None else {}
        note = None if found else no_use(run_dir, path, "record", True)
        part.metric_notes += [note] if note else []
        newest.update(found)
        highest += _highest(path, rank)
    steps = StepTimes()
    steps.update(newest)
    part.recent = {rank: steps.recent(rank) for rank in steps.ranks}
    part.tokens_per_s = dict(steps.tokens_per_s)
    recorded = [w for c in newest.values() for w in c.steps if w is not None]
    part.last_step = max(recorded) if recorded else None
    part.highest_step = max(highest) if highest else None
    for path, rank in files.telemetries:
        part.samples[rank] = read_last(path, SAMPLE_TAIL)
        note = None if part.samples[rank] is not None else no_use(run_dir, path, "sample", True)
        part.telemetry_notes += [note] if note else []
    lean, part.lasts = _fold_metrics(files.metrics)
    part.summaries, part.bands = lean.ranks, [lean.bands]
    return part


def _highest(path: Path, rank: int) -> list[int]:
    """The highest step at the end of one rank's file, as goodput's ``highest_step`` reads it
    (the digest holds it for that reader): [] where none is known."""
    result = parse_columns(read_tail(path, TAIL_BYTES).encode() + b"\n", rank)
    known = [s for cols in result.columns.values() for s in cols.steps if s is not None]
    return [max(known)] if known else []


def _merge(parts: list[_Part]) -> _Part | None:
    """The parts as one, in rank order; None where two of them hold records of one rank."""
    out = _Part()
    for part in parts:
        if not part.summaries.keys().isdisjoint(out.summaries):
            return None
        out.statuses.update(part.statuses)
        out.unusable.update(part.unusable)
        out.logs.update(part.logs)
        out.metric_notes += part.metric_notes
        out.recent.update(part.recent)
        out.tokens_per_s.update(part.tokens_per_s)
        out.last_step = _max(out.last_step, part.last_step)
        out.highest_step = _max(out.highest_step, part.highest_step)
        out.samples.update(part.samples)
        out.telemetry_notes += part.telemetry_notes
        out.summaries.update(part.summaries)
        out.bands += part.bands
        for name, column in part.lasts.items():
            out.lasts.setdefault(name, {}).update(column)
    return out


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


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


def _fold_metrics(files: _Listed) -> tuple[LeanRanks, dict[str, dict[int, float | str]]]:
    """The ranks' records (``files``: metric files with their default rank) folded into the
    bands, and each metric's last finite value by rank (the JSONL's spelling for none: left
    out)."""
    lean = LeanRanks()
    lasts: dict[str, dict[int, float | str]] = {}
    for path, default in files:
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


def _bands(parts: list[StepBands]) -> dict[str, dict[str, list[Any]]]:
    """Each metric across ranks at the steps a rank holding it logged: the mean, the extremes
    with their ranks, the values counted, the step's earliest time; ``parts``: the bands of
    consecutive parts of the ranks, merged in their order as one fold of every rank in rank
    order would have made them (an extreme held by two ranks is the lower one's)."""
    grid = np.unique(np.concatenate([b.steps.view() for b in parts] or [np.zeros(0, np.int64)]))
    when = np.full(len(grid), math.nan)
    for b in parts:
        at = np.searchsorted(grid, b.steps.view())
        when[at] = np.fmin(when[at], b.when.view())
    out = {}
    for name in dict.fromkeys(name for b in parts for name in b.rows):
        t = _merged_row(name, parts, grid)
        present = t["present"] > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = t["total"] / t["count"]
        out[name] = {
            "step": grid[present].tolist(),
            "time": [plain(x) for x in when[present].tolist()],
            "mean": [plain(x) for x in mean[present].tolist()],
            "lo": [plain(x) for x in t["lo"][present].tolist()],
            "hi": [plain(x) for x in t["hi"][present].tolist()],
            "lo_rank": t["lo_rank"][present].tolist(),
            "hi_rank": t["hi_rank"][present].tolist(),
            "count": t["count"][present].tolist(),
        }
    return out


def _merged_row(name: str, parts: list[StepBands], grid: np.ndarray) -> dict[str, np.ndarray]:
    """Metric ``name``'s tables over ``grid``, the parts' summed and their extremes taken in
    order, a later part's only where it is strictly beyond (as one fold's ``moved``)."""
    t = {
        "total": np.zeros(len(grid)),
        "count": np.zeros(len(grid), np.int64),
        "present": np.zeros(len(grid), np.int64),
        "lo": np.full(len(grid), math.nan),
        "hi": np.full(len(grid), math.nan),
        "lo_rank": np.full(len(grid), -1, np.int64),
        "hi_rank": np.full(len(grid), -1, np.int64),
    }
    for b in parts:
        row = b.rows.get(name)
        if row is None:
            continue
        n = b.steps.n
        at = np.searchsorted(grid, b.steps.view())
        held = {key: table[row, :n] for key, table in b.tables.items()}
        for key in ("total", "count", "present"):
            t[key][at] += held[key]
        for extreme, ranks, pick in (("lo", "lo_rank", np.fmin), ("hi", "hi_rank", np.fmax)):
            before = t[extreme][at]
            after = pick(before, held[extreme])
            moved = ~np.isnan(after) & ((after != before) | np.isnan(before))
            t[extreme][at] = after
            t[ranks][at[moved]] = held[ranks][moved]
    return t
