"""Per-rank metric history: one JSONL file per rank, written as training goes, plus the
trackers asked for (:mod:`runtime.trackers`).

``record()`` encodes the record and appends it to a buffer; a flusher thread writes the buffer
with one ``write`` every :data:`FLUSH_S` seconds (sooner past :data:`BUFFER_BYTES`), and
``close()``, leaving the ``with`` block and interpreter exit write what is left. So a follower
sees a record within :data:`FLUSH_S` of it being recorded and a rank that dies (a signal, the
OOM killer) loses at most the last :data:`FLUSH_S` seconds of records, never half of one: a
write holds whole lines. One ``write`` per record cost about as much as everything else a
record does, on every step of the training loop. The running statistics and the trackers are fed
from the same thread, so the step pays only for encoding its record, and a slow tracker
(MLflow's file store, a TensorBoard flush) never stalls it.

Running statistics are kept in O(1) memory per metric so a week-long run does not grow the
rank's RSS.
"""

from __future__ import annotations

import atexit
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from runtime import node_digest, preflight, profiling, records
from runtime.efficiency.flops import FLOPS_PER_TOKEN, HARDWARE_FLOPS_PER_TOKEN
from runtime.env import RUN_DIR_VAR, rank_info_or_single
from runtime.metric_files import metric_files
from runtime.rundir import RunDir
from runtime.trackers import Tracker, failed, open_trackers, requested, say

FLUSH_S = 0.5  # the most a record waits in memory: what a dying rank can lose
BUFFER_BYTES = 1 << 20  # written at once past this much, whatever the time
DIGEST_DTS = 8  # the step times whose median the digest gives
DIGEST_METRICS = 24  # a step's metrics put in the node digest, at most: it stays small


class _Stats:
    """Welford running statistics over the finite values; non-finite ones are counted."""

    __slots__ = ("count", "last", "m2", "max", "mean", "min", "nonfinite")

    def __init__(self) -> None:
        self.count = self.nonfinite = 0
        self.mean = self.m2 = 0.0
        self.min, self.max, self.last = math.inf, -math.inf, math.nan

    def add(self, x: float) -> None:
        self.last = x
        if x - x != 0.0:  # NaN or an infinity, without a call to math.isfinite
            self.nonfinite += 1
            return
        self.count += 1
        delta = x - self.mean
        self.mean += delta / self.count
        self.m2 += delta * (x - self.mean)
        if x < self.min:
            self.min = x
        if x > self.max:
            self.max = x

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

    ``flops_per_token`` (the model's FLOPs per token for a forward and backward pass, e.g.
    :func:`runtime.efficiency.flops.transformer_flops_per_token`) goes into the first record as
    the metric ``flops_per_token``: with the run's tokens/s and the device's peak, the readers
    work out TFLOPS and MFU, so a script says it once and the run directory keeps it.
    ``hardware_flops_per_token`` (what torch's flop counter saw one step execute, per token:
    :func:`runtime.efficiency.hardware.hardware_flops_per_token`) goes there too, for HFU.

    ``trackers`` (default: ``EZPZ_TRACKERS``) names the trackers to feed too: ``wandb``,
    ``tensorboard``, ``mlflow``, ``csv``; rank 0 feeds them, every rank with ``all_ranks``.
    Records reach the file within :data:`FLUSH_S` seconds, all of them at ``close()``.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str] | None = None,
        rank: int | None = None,
        memory: bool = False,
        trackers: Iterable[str] | str | None = None,
        all_ranks: bool = False,
        flops_per_token: float | None = None,
        hardware_flops_per_token: float | None = None,
    ):
        self.rank = rank_info_or_single().rank if rank is None else rank
        self.run_dir = Path(run_dir) if run_dir is not None else _default_run_dir()
        self.path = RunDir(self.run_dir, fresh=True).metrics(self.rank)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        try:  # the supervisor made metrics/'s blocks before the ranks started: no mkdir per rank
            self._fd: int | None = os.open(self.path, flags, 0o644)
        except FileNotFoundError:  # a run directory nobody prepared (a script run by hand)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, flags, 0o644)
        self._stats: dict[str, _Stats] = {}
        self._lines: list[bytes] = []  # encoded records not written yet
        self._size = 0  # their bytes
        # The same records as values, for the statistics and the trackers.
        self._done: list[tuple[int, dict[str, Any], float]] = []
        self._lock = threading.Lock()  # the two buffers
        self._write_lock = threading.Lock()  # one flush at a time, so lines keep their order
        self._reported = False  # said "running" in the node digest
        self._last_step: tuple[int, Mapping[str, float], float] | None = None
        self._dts: deque[float] = deque(maxlen=DIGEST_DTS)  # the newest steps' dt, for the digest
        names = requested(trackers) if (all_ranks or self.rank == 0) else []
        self.trackers: list[Tracker] = open_trackers(names, self.run_dir, self.rank, all_ranks)
        self._closed = threading.Event()
        threading.Thread(target=self._flush_loop, name="ezpz-history", daemon=True).start()
        atexit.register(self.close)  # after the trackers' own: so it runs before theirs
        self._last_time: float | None = None  # when the previous record was written
        self._memory = memory
        self._peak: Callable[[], int] | None = None  # torch's reader, when there is one
        self._peak_looked = False  # looked up at the first record: torch is imported by then
        said = {
            FLOPS_PER_TOKEN: flops_per_token,
            HARDWARE_FLOPS_PER_TOKEN: hardware_flops_per_token,
        }
        for name, value in said.items():
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, not {value}")
        first = {name: float(value) for name, value in said.items() if value is not None}
        self._first: dict[str, float] | None = first or None
        self._preflight = preflight.requested() is not None  # ends at its first record

    def record(
        self,
        step: int,
        metrics: Mapping[str, Any],
        *,
        tokens: float | None = None,
        samples: float | None = None,
        dt: float | None = None,
    ) -> None:
        """Record one step (on disk within FLUSH_S); tensors and numpy scalars become numbers.

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
        to_plain = records.to_plain
        # A finite float is already plain (x - x is 0 only for those): the common case, inline.
        plain = {
            k if type(k) is str else str(k): v if type(v) is float and v - v == 0.0 else to_plain(v)
            for k, v in metrics.items()
        }
        if self._first is not None:  # what the first record says once for the whole run
            plain.update(self._first)
            self._first = None
        if self._memory:
            if not self._peak_looked:
                self._peak, self._peak_looked = peak_memory_reader(), True
            if self._peak is not None:
                plain.setdefault("mem_peak_gb", self._peak() / 2**30)
        line = records.encode(self.rank, int(step), plain, now)
        with self._lock:
            self._lines.append(line)
            self._size += len(line)
            self._done.append((int(step), plain, now))
            full = self._size >= BUFFER_BYTES
        if full:
            self.flush()
        if self._preflight:  # a preflight's one step is done: what it came to see
            self.close()
            preflight.step_recorded(int(step))
        profiling.step()  # a profile asked for starts or ends at a step's end

    def flush(self) -> None:
        """Write the buffered records now, fold them into the statistics and hand the trackers
        theirs; never raises for a tracker (one that fails is named in the log and dropped)."""
        with self._write_lock:
            with self._lock:
                lines, self._lines, self._size = self._lines, [], 0
                done, self._done = self._done, []
            if lines and self._fd is not None:
                os.write(self._fd, b"".join(lines))
            sends = [(step, self._tally(plain), when) for step, plain, when in done]
            if sends:
                self._report(*sends[-1])
            for tracker in list(self.trackers):
                try:
                    for step, numbers, when in sends:
                        tracker.log(step, numbers, when)
                    tracker.flush()
                except Exception as exc:  # a tracker's failure must not end the run
                    self.trackers.remove(tracker)
                    failed(tracker, exc)

    def _report(
        self, step: int, numbers: Mapping[str, float], when: float, now: bool = False
    ) -> None:
        """This rank's newest step in its node's digest (:mod:`runtime.node_digest`), from the
        flusher: the step pays nothing for it, and a reader of a live run learns it within a
        flush and a digest's interval."""
        if not self._reported:
            self._reported = True
            node_digest.report("state", {"state": "running"}, now=True)
        shown = dict(list(numbers.items())[:DIGEST_METRICS])
        dts = sorted(self._dts)
        value = {
            "step": step,
            "time": when,
            "dt": numbers.get("dt"),
            "dt_median": dts[len(dts) // 2] if dts else None,  # of the last few: a straggler's
            "metrics": shown,
        }
        node_digest.report("step", value, now=now)
        self._last_step = (step, numbers, when)

    def _tally(self, plain: Mapping[str, Any]) -> dict[str, float]:
        """Add one record to the running statistics; its numbers, for the trackers. Done here,
        off the training thread, it is a third of what a record would cost the step."""
        numbers: dict[str, float] = {}
        stats = self._stats
        for key, value in plain.items():
            number = value if type(value) is float else records.as_number(value)
            if number is not None:
                numbers[key] = number
                if key == "dt" and number - number == 0.0:
                    self._dts.append(number)
                found = stats.get(key)
                if found is None:
                    found = stats[key] = _Stats()
                found.add(number)
        return numbers

    def _flush_loop(self) -> None:
        while not self._closed.wait(FLUSH_S):
            try:
                self.flush()
            except OSError as exc:  # a full disk: say so once a flush, keep the records
                say(f"cannot write {self.path}: {exc.strerror or exc}")

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
        if self._fd is not None:
            self.flush()  # the statistics are folded in as records are written
        return {key: stats.as_dict() for key, stats in self._stats.items()}

    def to_xarray(self) -> Any:
        """All ranks' records of this run as an xarray Dataset (rank x step)."""
        return load_run_metrics(self.run_dir)

    def close(self) -> None:
        """Write what is buffered, close the trackers, then the file; a second call does
        nothing. Called at interpreter exit too."""
        if self._fd is None:
            return
        self._closed.set()
        atexit.unregister(self.close)
        self.flush()
        with self._write_lock:  # the flusher thread's last flush is done, and there is no next
            if self._last_step is not None:  # the last step, past the rate limit, and the end
                self._report(*self._last_step, now=True)
                node_digest.report("state", {"state": "closed"}, now=True)
                node_digest.flush()
            closing, self.trackers = self.trackers, []
            for tracker in closing:
                try:
                    tracker.close()
                except Exception as exc:  # a tracker's failure must not end the run
                    failed(tracker, exc)
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
