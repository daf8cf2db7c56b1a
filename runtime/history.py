"""Per-rank metric history: one JSONL file per rank, written as training goes.

Each ``record()`` is one ``write`` on an unbuffered file opened for appending, so a record is on
disk (in the page cache, visible to a follower on this node) as soon as the call returns and a
crash loses at most the record being written. Running statistics are kept in O(1) memory per
metric so a week-long run does not grow the rank's RSS.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime import records
from runtime.env import RUN_DIR_VAR, rank_info_or_single
from runtime.rundir import RunDir, metric_files


@dataclass
class _Stats:
    """Welford running statistics over the finite values; non-finite ones are counted."""

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0
    min: float = math.inf
    max: float = -math.inf
    nonfinite: int = 0
    last: float = math.nan

    def add(self, x: float) -> None:
        self.last = x
        if not math.isfinite(x):
            self.nonfinite += 1
            return
        self.count += 1
        delta = x - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (x - self.mean)
        self.min = min(self.min, x)
        self.max = max(self.max, x)

    def as_dict(self) -> dict[str, float]:
        std = math.sqrt(self.m2 / self.count) if self.count else math.nan
        empty = self.count == 0
        return {
            "mean": math.nan if empty else self.mean,
            "min": math.nan if empty else self.min,
            "max": math.nan if empty else self.max,
            "std": std,
            "last": self.last,
            "count": float(self.count),
            "nonfinite": float(self.nonfinite),
        }


class History:
    """Append this rank's metrics to its JSONL file in the run directory.

    The run directory comes from the argument, else from ``EZPZ_RUN_DIR`` (set by the capture
    wrapper the launcher puts in front of every rank), else a fresh ``outputs/<timestamp>``
    agreed on by all ranks through the process group when one is up.

    With ``memory=True`` every record also gets ``mem_peak_gb``, the accelerator memory torch
    has allocated at most so far (GiB), read where the training loop already is: the sampler
    in the capture wrapper sees the device's memory, but not how much of it the rank's tensors
    needed at their peak. Nothing is added on the CPU, or when torch was not imported.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str] | None = None,
        rank: int | None = None,
        memory: bool = False,
    ):
        self.rank = rank_info_or_single().rank if rank is None else rank
        self.run_dir = Path(run_dir) if run_dir is not None else _default_run_dir()
        self.path = RunDir(self.run_dir).metrics(self.rank)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        try:  # the supervisor made metrics/ before the ranks started: no mkdir per rank
            self._fd: int | None = os.open(self.path, flags, 0o644)
        except FileNotFoundError:  # a run directory nobody prepared (a script run by hand)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, flags, 0o644)
        self._stats: dict[str, _Stats] = {}
        self._last_time: float | None = None  # when the previous record was written
        self._memory = memory
        self._peak: Callable[[], int] | None = None  # torch's reader, when there is one
        self._peak_looked = False  # looked up at the first record: torch is imported by then

    def record(
        self,
        step: int,
        metrics: Mapping[str, Any],
        *,
        tokens: float | None = None,
        samples: float | None = None,
        dt: float | None = None,
    ) -> None:
        """Write one record now; tensors and numpy scalars are converted to Python numbers.

        ``tokens`` and ``samples`` are what this step processed (over all replicas, for a
        global rate); they add ``tokens_per_s`` and ``samples_per_s`` over ``dt`` seconds: the
        argument, else ``metrics["dt"]``, else the time since the previous record. ``dt`` is
        added to the record when it is not there. The first record with neither has no rates:
        there is nothing to measure from.
        """
        if self._fd is None:
            raise ValueError(f"History for {self.path} is closed")
        now = time.time()
        if tokens is not None or samples is not None or dt is not None:
            metrics = self._with_rates(metrics, now, tokens, samples, dt)
        self._last_time = now
        plain = {str(k): records.to_plain(v) for k, v in metrics.items()}
        if self._memory:
            if not self._peak_looked:
                self._peak, self._peak_looked = peak_memory_reader(), True
            if self._peak is not None:
                plain.setdefault("mem_peak_gb", self._peak() / 2**30)
        os.write(self._fd, records.encode(self.rank, int(step), plain, now))
        for key, value in plain.items():
            number = records.as_number(value)
            if number is not None:
                self._stats.setdefault(key, _Stats()).add(number)

    def _with_rates(
        self,
        metrics: Mapping[str, Any],
        now: float,
        tokens: float | None,
        samples: float | None,
        dt: float | None,
    ) -> Mapping[str, Any]:
        if dt is None and "dt" in metrics:
            dt = records.as_number(records.to_plain(metrics["dt"]))
        if dt is None and self._last_time is not None:
            dt = now - self._last_time
        if dt is None:
            return metrics
        out = dict(metrics)
        out.setdefault("dt", dt)
        if dt > 0:
            if tokens is not None:
                out["tokens_per_s"] = tokens / dt
            if samples is not None:
                out["samples_per_s"] = samples / dt
        return out

    def summary(self) -> dict[str, dict[str, float]]:
        """Mean/min/max/std/last of each metric over this rank's records so far."""
        return {key: stats.as_dict() for key, stats in self._stats.items()}

    def to_xarray(self) -> Any:
        """All ranks' records of this run as an xarray Dataset (rank x step)."""
        return load_run_metrics(self.run_dir)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def peak_memory_reader() -> Callable[[], int] | None:
    """torch's peak allocated bytes on this rank's accelerator (xpu, else cuda), or None on
    the CPU. torch is looked up, never imported: a History in a script without torch must not
    pay for it."""
    torch = sys.modules.get("torch")
    for name in ("xpu", "cuda"):
        backend = getattr(torch, name, None)
        if backend is not None and backend.is_available():
            return backend.max_memory_allocated
    return None


def _default_run_dir() -> Path:
    env_dir = os.environ.get(RUN_DIR_VAR)
    if env_dir:
        return Path(env_dir)
    name = [time.strftime("%Y%m%d-%H%M%S")]
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.broadcast_object_list(name, src=0)
    except ImportError:
        pass
    return Path("outputs") / name[0]


def read_records(path: Path, default_rank: int = 0) -> records.ParseResult:
    """Every complete record of one file; missing or unreadable files give an empty result."""
    try:
        data = path.read_bytes()
    except OSError:
        return records.ParseResult()
    return records.parse_chunk(data, default_rank)


def load_run_metrics(run_dir: str | os.PathLike[str]) -> Any:
    """A Dataset with one variable per metric over (rank, step); gaps are NaN.

    ``attrs["garbage_lines"]`` counts the lines that were skipped as unreadable. A metric named
    like a coordinate or the timestamp variable (``step``, ``rank``, ``timestamp``) would clash
    with it (xarray refuses a variable named as a dimension), so it is kept as
    ``metrics/<name>`` with the name it was written under in its ``attrs["written_as"]``.
    """
    import numpy as np
    import xarray as xr

    all_records: list[records.Record] = []
    garbage = 0
    for path, rank in metric_files(run_dir):
        result = read_records(path, rank)
        garbage += result.garbage
        all_records.extend(result.records)
    all_records = records.number_steps(all_records)
    ranks = sorted({r.rank for r in all_records})
    steps = sorted({r.step for r in all_records if r.step is not None})
    names = sorted({name for r in all_records for name in r.metrics})
    rank_index = {r: i for i, r in enumerate(ranks)}
    step_index = {s: i for i, s in enumerate(steps)}
    arrays = {name: np.full((len(ranks), len(steps)), np.nan) for name in names}
    times = np.full((len(ranks), len(steps)), np.nan)
    for rec in all_records:
        i, j = rank_index[rec.rank], step_index[rec.step]
        for name, value in rec.metrics.items():
            arrays[name][i, j] = value
        if rec.timestamp is not None:
            times[i, j] = rec.timestamp
    data_vars: dict[str, Any] = {}
    for name, arr in arrays.items():
        if name in _TAKEN:
            data_vars[f"metrics/{name}"] = (("rank", "step"), arr, {"written_as": name})
        else:
            data_vars[name] = (("rank", "step"), arr)
    data_vars["timestamp"] = (("rank", "step"), times)
    return xr.Dataset(
        data_vars,
        coords={"rank": ranks, "step": steps},
        attrs={"garbage_lines": garbage, "run_dir": str(run_dir)},
    )


_TAKEN = frozenset({"rank", "step", "timestamp"})


def summarize(ds: Any, dim: str = "rank") -> Any:
    """Mean/min/max/std across ``dim`` for every metric, as variables named ``<metric>_<stat>``."""
    import xarray as xr

    out = {}
    for name, var in ds.data_vars.items():
        if name == "timestamp":
            continue
        out[f"{name}_mean"] = var.mean(dim, skipna=True)
        out[f"{name}_min"] = var.min(dim, skipna=True)
        out[f"{name}_max"] = var.max(dim, skipna=True)
        out[f"{name}_std"] = var.std(dim, skipna=True)
    return xr.Dataset(out)
