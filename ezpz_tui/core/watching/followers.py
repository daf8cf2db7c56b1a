"""UI-free followers of a live run directory: rank logs, metric JSONL, rank status files and the
ranks' telemetry samples.

Everything here is polled by ``os.stat``: on Lustre/GPFS/NFS change notification does not see
writes made on other nodes (DESIGN.md section 6), so notification is only ever a wake-up hint.
Each file is read by a tail (:mod:`ezpz_tui.core.watching.tails`) that keeps only its offset and
a capped partial line; the follower finds the files, decides which to read, and hands back what
is new as one :class:`Batch`.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import watchfiles

from ezpz_tui.core.watching.ezpz_layout import ezpz_logs
from ezpz_tui.core.watching.tails import (
    DEFAULT_MAX_LINE,
    DEFAULT_READ,
    Lines,
    LineTail,
    RecordTail,
)
from runtime.record_columns import RecordColumns, is_missing, merge_columns
from runtime.records import Record
from runtime.rundir import RankStatus, RunDir, metric_files, read_status
from runtime.telemetry.record import Sample, parse_line

TELEMETRY_BACKLOG = 16 << 10  # a telemetry file found by the first scan starts this near its end
TELEMETRY_LINE = 4096  # longer lines are not samples

LAUNCHER = -1
"""The pseudo-rank that the launcher's log is followed as: its lines travel with the ranks' logs
(one tail machinery, one log view), and readers that count ranks or plot metrics skip it."""


@dataclass
class Progress:
    """The latest step and loss of a run, with a rate measured from the records' timestamps."""

    step: int | None = None
    loss: float | None = None
    steps_per_s: float | None = None
    _first: tuple[int, float] | None = None

    def update(self, new: RecordColumns | Sequence[Record]) -> None:
        """Take in the next records of one rank, in file order: the latest step, the loss of the
        latest record with a step that has one, and the rate from the first record with a step
        and a timestamp to the latest later one. Records without a step are passed over.

        Columns are read from the end and the scan stops once everything is found, so a batch
        of 100k records costs a few lookups, not a loop over them all."""
        if not isinstance(new, RecordColumns):
            new = RecordColumns.from_records(new)
        steps, stamps = new.steps, new.timestamps
        begin = 0  # records from here on may give the rate
        if self._first is None:
            for i, (step, stamp) in enumerate(zip(steps, stamps, strict=True)):
                if step is not None and stamp is not None:
                    self._first, begin = (step, stamp), i + 1
                    break
        losses = new.metrics.get("loss", [])
        step0, time0 = self._first or (0, math.inf)
        want_step, want_loss, want_rate = True, bool(losses), self._first is not None
        for i in range(len(steps) - 1, -1, -1):
            step = steps[i]
            if step is None:
                continue
            if want_step:
                self.step, want_step = step, False
            if want_loss and not is_missing(losses[i]):
                self.loss, want_loss = losses[i], False
            if want_rate:
                stamp = stamps[i]
                if i < begin:
                    want_rate = False
                elif stamp is not None and stamp > time0:
                    self.steps_per_s = (step - step0) / (stamp - time0)
                    want_rate = False
            if not (want_loss or want_rate):
                break


class RankLines(NamedTuple):
    """Lines of one rank's log; line ``i`` has global arrival number ``seq + i``."""

    rank: int
    seq: int
    lines: Lines


@dataclass
class Batch:
    """Everything new in a run directory since the previous poll.

    ``logs`` is in arrival order and its sequence numbers increase across ranks and polls.
    Within one poll the true interleaving of ranks is unknowable by polling; files whose last
    write is older come first, which matches arrival order when polls are frequent.
    """

    logs: list[RankLines] = field(default_factory=list)
    records: dict[int, RecordColumns] = field(default_factory=dict)  # by record rank
    garbage: dict[int, int] = field(default_factory=dict)  # by the file's rank
    status: dict[int, RankStatus] = field(default_factory=dict)  # re-read status files
    log_restarts: set[int] = field(default_factory=set)  # drop what was shown for these ranks
    metric_restarts: set[int] = field(default_factory=set)
    telemetry: dict[int, list[Sample]] = field(default_factory=dict)  # new samples by rank
    launcher: bool = False  # the launcher's log was found (and is followed as rank ``LAUNCHER``)

    def __bool__(self) -> bool:
        return bool(
            self.logs
            or self.records
            or self.garbage
            or self.status
            or self.log_restarts
            or self.metric_restarts
            or self.telemetry
            or self.launcher
        )


class RunFollower:
    """Follows a run's rank logs, metric JSONL (ours and ezpz's), rank status files and
    telemetry (only the last minute of a file found at the first scan: it feeds sparklines).

    Files that appear later are found by a rescan at most every ``rescan_s`` seconds (a scan
    of the run directory is the costly part of a poll); :meth:`watch` also rescans at once when
    change notification reports a new file.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        max_line: int = DEFAULT_MAX_LINE,
        read_bytes: int = DEFAULT_READ,
        rescan_s: float = 1.0,
        log_backlog: int | None = None,
    ) -> None:
        """``log_backlog``: start each log found by the first scan at its last lines (within
        that many bytes) rather than at its beginning; logs that appear later start at 0."""
        self.run_dir = Path(run_dir)
        self.max_line = max_line
        self.read_bytes = read_bytes
        self.rescan_s = rescan_s
        self.log_backlog = log_backlog
        self._logs: dict[Path, tuple[int, LineTail]] = {}
        self._metrics: dict[Path, RecordTail] = {}
        self._status: dict[Path, tuple[int, tuple[int, int, int] | None]] = {}
        self._telemetry: dict[Path, tuple[int, LineTail]] = {}
        self._seq = 0
        self._scanned_at = -float("inf")
        self._launcher_found = False  # found since the last poll

    def rescan(self) -> None:
        """Start following files that appeared since the last scan."""
        first = self._scanned_at == -float("inf")
        self._scanned_at = time.monotonic()
        run = RunDir(self.run_dir)
        logs = run.logs() or ezpz_logs(self.run_dir)
        launcher = run.launcher_log
        if launcher not in self._logs and launcher.is_file():
            logs.append((launcher, LAUNCHER))
            self._launcher_found = True
        for path, rank in logs:
            if path not in self._logs:
                tail = LineTail(path, self.max_line)
                if first and self.log_backlog is not None:
                    tail.skip_to_tail(self.log_backlog)
                self._logs[path] = (rank, tail)
        for path, rank in metric_files(self.run_dir):
            if path not in self._metrics:
                self._metrics[path] = RecordTail(path, rank)
        for path, rank in run.statuses():
            self._status.setdefault(path, (rank, None))
        for path, rank in run.telemetries():
            if path not in self._telemetry:
                tail = LineTail(path, TELEMETRY_LINE)
                if first:
                    tail.skip_to_tail(TELEMETRY_BACKLOG)
                self._telemetry[path] = (rank, tail)

    def poll(self) -> Batch:
        """What is new since the last poll: one ``stat`` per known file, reads only if grown."""
        if time.monotonic() - self._scanned_at >= self.rescan_s:
            self.rescan()
        batch = Batch(launcher=self._launcher_found)
        self._launcher_found = False
        by_age: list[tuple[int, int, Path, os.stat_result | None]] = []
        for path, (rank, _) in self._logs.items():
            st = _stat(path)  # None: the tail notices the deletion itself
            by_age.append((st.st_mtime_ns if st else 0, rank, path, st))
        by_age.sort(key=lambda item: (item[0], item[1]))
        for _, rank, path, st in by_age:
            lines = self._logs[path][1].read(self.read_bytes, st)
            if lines.restarted:
                batch.log_restarts.add(rank)
            if lines:
                batch.logs.append(RankLines(rank, self._seq, lines))
                self._seq += len(lines)
        for tail in self._metrics.values():
            new, garbage, restarted = tail.read(self.read_bytes)
            if restarted:
                batch.metric_restarts.add(tail.rank)
            if garbage:
                batch.garbage[tail.rank] = batch.garbage.get(tail.rank, 0) + garbage
            merge_columns(batch.records, new)
        for path, (rank, tail) in self._telemetry.items():
            lines = tail.read(self.read_bytes, _stat(path))
            samples = [s for s in map(parse_line, lines.texts) if s is not None]
            if samples:
                batch.telemetry.setdefault(rank, []).extend(samples)
        for path, (rank, seen) in self._status.items():
            st = _stat(path)
            sig = (st.st_ino, st.st_size, st.st_mtime_ns) if st else None
            if sig is None or sig == seen:
                continue
            info = read_status(path, rank)
            if info is not None:  # a torn or odd file is retried next poll
                batch.status[rank] = info
                self._status[path] = (rank, sig)
        return batch

    def watch(self, stop_event: threading.Event, interval_s: float = 0.25) -> Iterator[Batch]:
        """Non-empty batches until ``stop_event`` is set, each within about ``interval_s`` of
        the write on this node or another.

        ``watchfiles`` wakes the loop early for local writes; its timeout wakes it every
        ``interval_s`` regardless, so size polling sees writes that inotify never reports.
        """
        ms = max(1, int(interval_s * 1000))
        batch = self.poll()
        if batch:
            yield batch
        while not stop_event.is_set():
            try:
                for changes in watchfiles.watch(
                    self.run_dir,
                    watch_filter=None,
                    debounce=ms,
                    step=min(50, ms),
                    stop_event=stop_event,
                    rust_timeout=ms,
                    yield_on_timeout=True,
                    raise_interrupt=False,
                ):
                    if any(change == watchfiles.Change.added for change, _ in changes):
                        self.rescan()
                    batch = self.poll()
                    if batch:
                        yield batch
            except (OSError, RuntimeError):
                # No notification (run dir not there yet, watch limit reached): poll this
                # interval and try to set it up again.
                if stop_event.wait(interval_s):
                    break
                batch = self.poll()
                if batch:
                    yield batch


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None
