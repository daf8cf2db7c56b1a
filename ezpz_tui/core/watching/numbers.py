"""The numbers that say how fast and how well one run trained, read from its metric files.

Speed and loss come from rank 0's records: the demo's ``tokens_per_s`` and ``samples_per_s`` are
already global (every replica's tokens over the step time) and ranks of one run step together,
so the other ranks would repeat rank 0's figures at the cost of reading every file; on a
1,000-rank run that cost is the whole budget. Only peak memory differs by rank, so the other
ranks' files are read only when rank 0 records a memory metric (:data:`MEMORY_METRICS`), and
not even then for a run that has ended with its ``digest.json``: the finalizer read them once
(:func:`every_rank_memory`) and the digest holds each rank's peak.

Speed is the median over the steady part: the first ``max(2, n // 10)`` records of rank 0 are
warm-up (compilation, allocator growth, the first collectives' setup) and are left out
(:func:`warmup`). A step's time is its ``dt`` metric; where a run records none, the difference of
consecutive record timestamps divided by the steps between them (logging included, so slightly
longer). A resumed run's checkpoint load is its own figure (``restore_s``), in no step's time.
Readers never raise: missing files, garbage lines and a run still writing give fewer
numbers (``None``), never an error.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

from ezpz_tui.core.runs.digest import RunDigest, ended_digest, number
from ezpz_tui.core.watching.tails import file_columns
from runtime.efficiency.flops import FLOPS_PER_TOKEN, HARDWARE_FLOPS_PER_TOKEN
from runtime.metric_files import first_metric_file, metric_files
from runtime.record_columns import RecordColumns, is_missing, merge_columns
from runtime.rundir import RunState

STEP_TIME, TOKENS, SAMPLES, LOSS = "dt", "tokens_per_s", "samples_per_s", "loss"
RESTORE = "ckpt_load_s"  # runtime.checkpoint's: a resumed run's load, out of every step's dt

MEMORY_METRICS: Mapping[str, float] = MappingProxyType(
    {
        "mem_peak_gb": 1.0,
        "peak_mem_gb": 1.0,
        "memory/peak_gb": 1.0,
        "max_memory_allocated_gb": 1.0,
        "max_memory_allocated": 1 / 2**30,  # torch.cuda.max_memory_allocated(): bytes
        "max_memory_reserved": 1 / 2**30,
        "mem_peak_bytes": 1 / 2**30,
    }
)
"""Peak-memory metric names recognised, each with the factor that turns it into GiB (names
ending in ``_gb`` are taken as GiB already; the others are bytes). The first one a run records
is used."""


Peaks = tuple[tuple[int, float], ...]  # (rank, GiB), by rank
RankPeaks = dict[str, dict[int, float]]  # memory metric -> rank -> its largest finite value


def warmup(records: int) -> int:
    """How many of the first records are warm-up, left out of the speed medians."""
    return max(2, records // 10)


@dataclass(frozen=True)
class RunNumbers:
    """One run's figures from its metrics; ``None`` where the run did not record what a figure
    needs (or has no steady step yet)."""

    records: int  # rank 0's records read
    last_step: int | None
    first_timestamp: float | None  # rank 0's first record: when the first step was done
    step_time_s: float | None  # median over the steady part
    step_time_from: str | None  # "dt" or "timestamps"
    samples_per_s: float | None
    tokens_per_s: float | None
    steady: int  # records the speed medians are taken over (after warm-up)
    peak_mem_gb: Peaks  # each rank that recorded a memory metric
    memory_metric: str | None
    final_loss: float | None  # rank 0's last loss, NaN kept: a loss that diverged must show
    best_loss: float | None  # the lowest finite loss
    garbage: int  # lines of rank 0's files (and others read) that were not records
    loss_by_step: Mapping[int, float] = field(default_factory=dict, repr=False, compare=False)
    restore_s: float | None = None  # loading the checkpoint a resumed run began from
    flops_per_token: float | None = None  # the model's, as the script recorded it once
    hardware_flops_per_token: float | None = None  # torch's flop counter's, where recorded

    @property
    def peak_mem_max_gb(self) -> float | None:
        """The largest rank's peak: the one that decides whether a layout fits."""
        return max((gb for _, gb in self.peak_mem_gb), default=None)

    def loss_at(self, step: int) -> float | None:
        return self.loss_by_step.get(step)


NO_NUMBERS = RunNumbers(0, None, None, None, None, None, None, 0, (), None, None, None, 0)


def _values(column: Sequence[float] | None, start: int = 0) -> list[float]:
    """The finite values of ``column`` from index ``start``
    (:data:`~runtime.record_columns.MISSING` is a NaN, so this leaves out the records without
    the metric too); one C-level pass."""
    return [] if column is None else list(filter(math.isfinite, column[start:]))


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _step_times(cols: RecordColumns, skip: int) -> tuple[list[float], str | None]:
    """Seconds per step of the steady records: ``dt`` where recorded, else timestamp gaps."""
    recorded = [v for v in _values(cols.metrics.get(STEP_TIME), skip) if v > 0]
    if recorded:
        return recorded, STEP_TIME
    gaps = []
    steps, stamps = cols.steps, cols.timestamps
    for i in range(max(skip, 1), len(steps)):
        t0, t1, s0, s1 = stamps[i - 1], stamps[i], steps[i - 1], steps[i]
        if t0 is not None and t1 is not None and s0 is not None and s1 is not None and s1 > s0:
            gaps.append((t1 - t0) / (s1 - s0))
    return gaps, ("timestamps" if gaps else None)


def _losses(
    steps: list[int], column: list[float] | None
) -> tuple[float | None, float | None, dict[int, float]]:
    """The last loss (NaN kept), the lowest finite one, and the loss at each step."""
    if column is None:
        return None, None, {}
    finite = _values(column)
    by_step = dict(zip(steps, column, strict=True))
    if len(finite) != len(column):  # a NaN or infinite loss, or records without one
        by_step = {s: v for s, v in by_step.items() if not is_missing(v)}
    final = next((v for v in reversed(column) if not is_missing(v)), None)
    return final, (min(finite) if finite else None), by_step


def _read(path: Path, rank: int, into: dict[int, RecordColumns]) -> int:
    """Add one file's records to ``into`` by rank; the garbage lines it held."""
    garbage = 0
    for result in file_columns(path, rank):
        merge_columns(into, result.columns)
        garbage += result.garbage
    return garbage


def _rank_peaks(by_rank: Mapping[int, RecordColumns]) -> RankPeaks:
    """Each memory metric's largest finite value on each rank that recorded one, as recorded
    (not yet in GiB)."""
    found: RankPeaks = {}
    for name in MEMORY_METRICS:
        for rank in sorted(by_rank):
            values = _values(by_rank[rank].metrics.get(name))
            if values:
                found.setdefault(name, {})[rank] = max(values)
    return found


def _memory(peaks: RankPeaks) -> tuple[str | None, Peaks]:
    """The memory metric recorded and each rank's peak of it, in GiB."""
    for name, factor in MEMORY_METRICS.items():
        held = peaks.get(name)
        if held:
            return name, tuple((rank, held[rank] * factor) for rank in sorted(held))
    return None, ()


def _first(
    files: Sequence[tuple[Path, int]], by_rank: dict[int, RecordColumns]
) -> tuple[RecordColumns | None, int]:
    """The first file's records into ``by_rank``: rank 0's columns (or the lowest rank's a
    foreign file holds; None: no records), and the file's garbage lines."""
    garbage = _read(files[0][0], files[0][1], by_rank)
    ranks = sorted(by_rank)  # rank 0, or the lowest rank a foreign file holds
    cols = by_rank[0] if 0 in by_rank else by_rank[ranks[0]] if ranks else None
    return (cols if cols is not None and len(cols) else None), garbage


def _records_memory(cols: RecordColumns) -> bool:
    """Whether rank 0's records hold a memory metric: only then are the other ranks read."""
    return any(name in cols.metrics for name in MEMORY_METRICS)


def every_rank_memory(run_dir: str | os.PathLike[str]) -> tuple[RankPeaks, int] | None:
    """What :func:`read_numbers` reads every rank's file for, read once for a finished run's
    digest: each memory metric's peak on each rank, as recorded, and the garbage lines of the
    metrics files after the first; None where rank 0 records no memory metric (no reader
    reads the other ranks then)."""
    files = metric_files(run_dir)
    by_rank: dict[int, RecordColumns] = {}
    cols = _first(files, by_rank)[0] if files else None
    if cols is None or not _records_memory(cols):
        return None
    garbage = sum(_read(path, rank, by_rank) for path, rank in files[1:])
    return _rank_peaks(by_rank), garbage


def _digest_memory(digest: RunDigest) -> tuple[RankPeaks, int] | None:
    """:func:`every_rank_memory` as the run's digest holds it; None: it holds none."""
    columns, garbage = digest.peaks(), digest.others_garbage()
    if columns is None or garbage is None:
        return None
    found: RankPeaks = {}
    for name, column in columns.items():
        for rank, value in enumerate(column):
            peak = number(value)
            if peak is not None and math.isfinite(peak):
                found.setdefault(name, {})[rank] = peak
    return found, garbage


def read_numbers(run_dir: str | os.PathLike[str], ended: RunState | None = None) -> RunNumbers:
    """The figures of the run in ``run_dir`` (see the module docstring); never raises.
    ``ended``: the run's state, whose digest (when it has ended: :func:`ended_digest`) stands
    for the other ranks' files."""
    first = first_metric_file(run_dir)  # the others listed only where they are read
    if first is None:
        return NO_NUMBERS
    by_rank: dict[int, RecordColumns] = {}
    cols, garbage = _first([first], by_rank)
    if cols is None:
        return replace(NO_NUMBERS, garbage=garbage)
    # ezpz's records carry no step: number them in file order, as runtime.records does
    steps = [i if step is None else step for i, step in enumerate(cols.steps)]
    cols.steps = list[int | None](steps)
    held: tuple[RankPeaks, int] | None = None
    if _records_memory(cols):
        digest = ended_digest(Path(run_dir), ended) if ended is not None else None
        held = _digest_memory(digest) if digest is not None else None
        if held is None:
            for path, rank in metric_files(run_dir)[1:]:
                garbage += _read(path, rank, by_rank)
        else:
            garbage += held[1]
    memory_metric, peaks = _memory(_rank_peaks(by_rank) if held is None else held[0])
    skip = min(warmup(len(cols)), len(cols) - 1)  # a run with 1-2 records keeps its last
    times, source = _step_times(cols, skip)
    final, best, by_step = _losses(steps, cols.metrics.get(LOSS))
    return RunNumbers(
        records=len(cols),
        last_step=max(steps),
        first_timestamp=next((t for t in cols.timestamps if t is not None), None),
        step_time_s=_median(times),
        step_time_from=source,
        samples_per_s=_median(_values(cols.metrics.get(SAMPLES), skip)),
        tokens_per_s=_median(_values(cols.metrics.get(TOKENS), skip)),
        steady=len(cols) - skip,
        peak_mem_gb=peaks,
        memory_metric=memory_metric,
        final_loss=final,
        best_loss=best,
        garbage=garbage,
        loss_by_step=MappingProxyType(by_step),
        restore_s=next(iter(_values(cols.metrics.get(RESTORE))), None),
        flops_per_token=next(iter(_values(cols.metrics.get(FLOPS_PER_TOKEN))), None),
        hardware_flops_per_token=next(
            iter(_values(cols.metrics.get(HARDWARE_FLOPS_PER_TOKEN))), None
        ),
    )
