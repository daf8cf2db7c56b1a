"""How much training a crash would cost a run now: its newest complete checkpoint's step and
age, the steps and minutes a restart would redo, and how long the restore would take.

Read cheaply, at any number of ranks: the run's completion marks (``checkpoints/step-N/COMPLETE``,
the newest ``keep`` of them, each a few hundred bytes: :mod:`runtime.checkpoint` writes the
step, size, when it was asked for, how long it waited for the save before it and took to write,
and its interval), rank 0's first record (``ckpt_load_s`` when the run resumed) and, once per
run, a sample of rank 0's shard read with the page cache dropped first (the read rate a restore
would see). Never a file per rank.

What a restart redoes is counted from the run's newest recorded step and its median step time;
a run that resumed and has saved nothing of its own yet is covered by the checkpoint it resumed
from. The warnings: no complete checkpoint within ``[checkpoint] max_age`` of training, and a
save that took longer to write than the interval it was asked at (an asynchronous save the next
one must wait for, holding the training up).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.record import read_record
from runtime.checkpoint_dirs import COMPLETE, RESUME_VAR, CheckpointError, complete, resolve
from runtime.rundir import RunDir

MAX_AGE_S = 1800.0  # [checkpoint] max_age: 30 minutes of training
READ_SAMPLE = 16 << 20  # bytes of rank 0's shard read to measure the read rate
SHARD = "__0_0.distcp"  # rank 0's file of a torch.distributed.checkpoint save
FIRST_LINE = 16 << 10  # bytes of rank 0's metrics read for its first record
MARK_BYTES = 64 << 10  # a completion mark is a few hundred bytes; more is not one
LAST_LOAD = "last load"
READ_RATE = "size / read rate"


@dataclass(frozen=True)
class Mark:
    """One complete checkpoint, as its completion mark says (fields a mark written before
    this version lacks are None)."""

    path: Path
    step: int
    saved_at: float | None = None
    size: int | None = None
    write_s: float | None = None
    asked_at: float | None = None
    waited_s: float | None = None
    every: int | None = None


@dataclass(frozen=True)
class OnDisk:
    """What the gauge reads from the run directory; :func:`gauge` adds the clock and steps."""

    marks: tuple[Mark, ...] = ()  # the run's own complete checkpoints, oldest first
    resumed_from: Mark | None = None  # the checkpoint the run started from
    load_s: float | None = None  # rank 0's restore of it
    read_mb_s: float | None = None  # measured on the newest checkpoint's rank 0 shard

    @property
    def newest(self) -> Mark | None:
        return self.marks[-1] if self.marks else self.resumed_from


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok else None


def read_mark(path: Path, step: int) -> Mark:
    """The completion mark of the checkpoint folder ``path``; a mark that says nothing usable
    (written by hand, torn by a copy) still makes the checkpoint complete, with no figures."""
    try:
        with open(path / COMPLETE, "rb") as f:
            data = json.loads(f.read(MARK_BYTES))
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict):
        data = {}
    saved_at = _number(data.get("saved_at"))
    if saved_at is None:
        with contextlib.suppress(OSError):
            saved_at = (path / COMPLETE).stat().st_mtime
    size, every = _number(data.get("bytes")), _number(data.get("every"))
    return Mark(
        path,
        step,
        saved_at=saved_at,
        size=None if size is None else int(size),
        write_s=_number(data.get("write_s")),
        asked_at=_number(data.get("asked_at")),
        waited_s=_number(data.get("waited_s")),
        every=None if not every else int(every),
    )


def resumed_from(run_dir: Path) -> Mark | None:
    """The checkpoint the run's launch named in ``EZPZ_RESUME_FROM``, None when it named none
    or it is gone (pruned, moved)."""
    record, _ = read_record(run_dir)
    plan = record.get("plan")
    env = plan.get("env") if isinstance(plan, dict) else None
    target = env.get(RESUME_VAR) if isinstance(env, dict) else None
    if not isinstance(target, str) or not target:
        return None
    path = Path(target) if Path(target).is_absolute() else run_dir.parent / target
    try:
        found = resolve(path)
    except CheckpointError:
        return None
    return read_mark(found.path, found.step)


def first_load_s(run_dir: Path) -> float | None:
    """``ckpt_load_s`` of rank 0's first record: a resumed run's restore, recorded once, in the
    first step's record (``Checkpointer.metrics``)."""
    try:
        with open(RunDir(run_dir).metrics(0), "rb") as f:
            head = f.read(FIRST_LINE)
    except OSError:
        return None
    try:
        first = json.loads(head[: head.find(b"\n")])
    except ValueError:
        return None
    metrics = first.get("metrics") if isinstance(first, dict) else None
    return _number(metrics.get("ckpt_load_s")) if isinstance(metrics, dict) else None


def read_rate(folder: Path, sample: int = READ_SAMPLE) -> float | None:
    """MB/s reading rank 0's shard of the checkpoint ``folder`` (up to ``sample`` bytes) with
    its cached pages dropped first, so the figure is the storage's, not memory's; None when
    there is no shard to read."""
    try:
        fd = os.open(folder / SHARD, os.O_RDONLY)
    except OSError:
        return None
    try:
        with contextlib.suppress(OSError, AttributeError):  # not every system has fadvise
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        got, start = 0, time.perf_counter()
        while got < sample:
            chunk = os.read(fd, min(1 << 20, sample - got))
            if not chunk:
                break
            got += len(chunk)
        took = time.perf_counter() - start
    except OSError:
        return None
    finally:
        os.close(fd)
    return got / 1e6 / took if got and took > 0 else None


def read_on_disk(run_dir: Path, read_mb_s: float | None = None) -> OnDisk:
    """The run's checkpoints, its restore and the read rate (``read_mb_s`` when it was
    measured already: once a run is enough, the storage is the same for its next ones)."""
    marks = tuple(read_mark(found.path, found.step) for found in complete(run_dir))
    started = resumed_from(run_dir)
    newest = marks[-1] if marks else started
    if read_mb_s is None and newest is not None:
        read_mb_s = read_rate(newest.path)
    return OnDisk(marks, started, first_load_s(run_dir), read_mb_s)


@dataclass(frozen=True)
class Gauge:
    """The run's exposure to a crash, as of ``as_of`` (now for a live run, its end else)."""

    step: int | None  # the newest complete checkpoint's, None: there is none
    path: Path | None
    age_s: float | None
    redo_steps: int | None
    redo_s: float | None
    restore_s: float | None
    restore_from: str | None  # LAST_LOAD or READ_RATE
    size: int | None
    read_mb_s: float | None
    resumed: bool  # the newest is the checkpoint the run resumed from, not its own
    max_age_s: float
    warnings: tuple[str, ...] = ()

    def words(self) -> str:
        """The summary bar's few words: ``ckpt 40 (2m ago) · redo 12 steps 36s · restore
        1.2s (last load)``, or ``no checkpoints``."""
        if self.step is None:
            said = "no checkpoints"
            if self.redo_steps is not None:
                said += f" · redo {_steps(self.redo_steps)}{_took(self.redo_s)}"
            return said
        said = f"ckpt {self.step}"
        if self.age_s is not None:
            said += f" ({short_duration(self.age_s)} ago)"
        if self.redo_steps is not None:
            said += f" · redo {_steps(self.redo_steps)}{_took(self.redo_s)}"
        if self.restore_s is not None:
            said += f" · restore {short_duration(self.restore_s)} ({self.restore_from})"
        return said

    def lines(self) -> list[str]:
        """``top``'s lines: the gauge in a sentence, then each warning."""
        if self.step is None:
            head = "checkpoint: no checkpoints"
            if self.redo_steps is not None:
                head += f"; a crash now would redo all {_steps(self.redo_steps)}"
                head += _took(self.redo_s, "(", ")")
        else:
            whose = " (resumed from)" if self.resumed else ""
            head = f"checkpoint: step {self.step}{whose}"
            if self.age_s is not None:
                head += f", {short_duration(self.age_s)} ago"
            if self.redo_steps is not None:
                head += f"; a crash now would redo {_steps(self.redo_steps)}"
                head += _took(self.redo_s, "(", ")")
            if self.restore_s is not None:
                head += f"; restore {short_duration(self.restore_s)} ({self._how()})"
        return [head] + [f"checkpoint warning: {w}" for w in self.warnings]

    def _how(self) -> str:
        if self.restore_from == READ_RATE and self.size is not None and self.read_mb_s:
            return f"{self.size / 1e6:.3g} MB at a measured {self.read_mb_s:.3g} MB/s"
        return str(self.restore_from)

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "path": None if self.path is None else str(self.path),
            "resumed_from": self.resumed,
            "age_s": _round(self.age_s),
            "redo_steps": self.redo_steps,
            "redo_s": _round(self.redo_s),
            "restore_s": _round(self.restore_s),
            "restore_from": self.restore_from,
            "bytes": self.size,
            "read_mb_s": _round(self.read_mb_s),
            "max_age_s": self.max_age_s,
            "warnings": list(self.warnings),
        }


def gauge(
    disk: OnDisk,
    *,
    step: int | None,
    step_s: float | None,
    as_of: float,
    max_age_s: float = MAX_AGE_S,
) -> Gauge:
    """The gauge of ``disk`` for a run whose newest recorded step is ``step`` (0-based: the
    record after ``step + 1`` optimizer steps, as a checkpoint's step counts them), at a median
    ``step_s``; ``max_age_s`` 0 warns never."""
    newest = disk.newest
    done = None if step is None else step + 1
    since = None if newest is None else newest.step
    redo = None if done is None else max(0, done - (since or 0))
    redo_s = None if redo is None or step_s is None else redo * step_s
    warnings = []
    if max_age_s > 0 and redo_s is not None and redo_s > max_age_s:
        warnings.append(
            f"no checkpoint in the last {short_duration(redo_s)} of training "
            f"(max_age {short_duration(max_age_s)})"
        )
    slow = slow_save(disk.marks, step_s)
    if slow:
        warnings.append(slow)
    restore_s, restore_from = None, None
    if disk.load_s is not None:
        restore_s, restore_from = disk.load_s, LAST_LOAD
    elif newest is not None and newest.size is not None and disk.read_mb_s:
        restore_s, restore_from = newest.size / 1e6 / disk.read_mb_s, READ_RATE
    age = None
    if newest is not None and newest.saved_at is not None:
        age = max(0.0, as_of - newest.saved_at)
    return Gauge(
        step=since,
        path=None if newest is None else newest.path,
        age_s=age,
        redo_steps=redo,
        redo_s=redo_s,
        restore_s=restore_s,
        restore_from=restore_from,
        size=None if newest is None else newest.size,
        read_mb_s=disk.read_mb_s,
        resumed=newest is not None and not disk.marks,
        max_age_s=max_age_s,
        warnings=tuple(warnings),
    )


def slow_save(marks: tuple[Mark, ...], step_s: float | None) -> str | None:
    """A sentence when one of the newest two saves took longer to write than the interval
    between them; None when neither did or the marks cannot say.

    The interval is the training between the two saves' requests, less what the older one
    waited for the save before it: a save slower than its interval makes the next one wait
    (after its request), and that wait must not count as training. One save alone is compared
    with its ``every`` steps at the median step time."""
    if not marks:
        return None
    newer = marks[-1]
    older = marks[-2] if len(marks) > 1 else None
    interval = None
    if older is not None and newer.asked_at is not None and older.asked_at is not None:
        interval = newer.asked_at - older.asked_at - (older.waited_s or 0.0)
    elif newer.every and step_s is not None:
        interval = newer.every * step_s
    writes = [m for m in (older, newer) if m is not None and m.write_s is not None]
    if interval is None or interval <= 0 or not writes:
        return None
    slowest = max(writes, key=lambda m: m.write_s or 0.0)
    if (slowest.write_s or 0.0) <= interval:
        return None
    return (
        f"the save of step {slowest.step} took {short_duration(slowest.write_s or 0.0)} to "
        f"write, longer than its {short_duration(interval)} interval: the next save waits "
        "for it"
    )


def short_duration(seconds: float) -> str:
    """``8ms``, ``0.42s``, ``12s``, ``3m05s``, ``2h10m``: a figure for one line."""
    if seconds < 0.1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 10:
        return f"{seconds:.2g}s" if seconds < 1 else f"{seconds:.1f}s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def _steps(count: int) -> str:
    return f"{count} step{'s' * (count != 1)}"


def _took(seconds: float | None, before: str = "", after: str = "") -> str:
    return "" if seconds is None else f" {before}{short_duration(seconds)}{after}"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
