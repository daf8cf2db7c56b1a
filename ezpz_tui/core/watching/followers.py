"""UI-free followers of a live run directory: rank logs, metric JSONL, rank status files and the
ranks' telemetry samples.

Everything here is polled by ``os.stat``: on Lustre/GPFS/NFS change notification does not see
writes made on other nodes (docs/pitfalls.md), so notification is only ever a wake-up hint.
Each file is read by a tail (:mod:`ezpz_tui.core.watching.tails`) that keeps only its offset and
a capped partial line; the follower finds the files, decides which to read, and hands back what
is new as one :class:`Batch`.
"""

from __future__ import annotations

import heapq
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import watchfiles

from ezpz_tui.core.runs.unreadable import named, unusable_status
from ezpz_tui.core.watching import fscalls
from ezpz_tui.core.watching.budget import PollSchedule
from ezpz_tui.core.watching.listing import LAUNCHER, LOG, METRICS, TELEMETRY, Found, RunListing
from ezpz_tui.core.watching.tails import (
    DEFAULT_MAX_LINE,
    DEFAULT_READ,
    MAX_RECORD,
    Lines,
    LineTail,
    RecordTail,
)
from runtime.record_columns import RecordColumns, merge_columns
from runtime.rundir import FINAL, RANK_ENDED, RankState, RankStatus, RunDir, RunState
from runtime.telemetry.record import Sample, parse_line

TELEMETRY_BACKLOG = 16 << 10  # a telemetry file found by the first scan starts this near its end
TELEMETRY_LINE = 4096  # longer lines are not samples
SLOWEST_S = 60.0  # every followed file is looked at least this often (``[follow] slowest``)
SLOWER = 4.0  # telemetry and status files are looked at within SLOWER * slowest seconds

__all__ = ["LAUNCHER", "Batch", "RankLines", "RunFollower"]


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
    # Files whose use changed, by rank: the line saying why one cannot be used, None once it
    # can again (:mod:`ezpz_tui.core.runs.unreadable`).
    problems: dict[int, dict[str, str | None]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(
            self.problems
            or self.logs
            or self.records
            or self.garbage
            or self.status
            or self.log_restarts
            or self.metric_restarts
            or self.telemetry
            or self.launcher
        )


class _Followed:
    """One followed file: what it holds, its rank, its tail, and how near its end its first
    read starts (None: at its start)."""

    __slots__ = ("backlog", "kind", "rank", "tail")

    def __init__(
        self, kind: str, rank: int, tail: LineTail | RecordTail, backlog: int | None
    ) -> None:
        self.kind, self.rank, self.tail, self.backlog = kind, rank, tail, backlog


class RunFollower:
    """Follows a run's rank logs, metric JSONL (ours and ezpz's), rank status files and
    telemetry (only the last minute of a file found at the first scan: it feeds sparklines).

    Files are found by listing the run's folders (:mod:`~ezpz_tui.core.watching.listing`) at
    most every ``rescan_s`` seconds, or at once when :meth:`watch` hears of a new file. Each file
    is read once when found (``first_reads`` files a poll at most, the ranks on screen first, so
    a 16,384-rank run shows its rows before its last log is read), then looked at as the
    :class:`~ezpz_tui.core.watching.budget.PollSchedule` says: within ``stats_per_second``
    filesystem calls a second (None: every file every poll), every file within ``slowest``
    seconds. A rank whose status says it ended is read to its end once and never looked at
    again; so is every file of a run whose ``state.json`` says it ended, after which the
    follower is :attr:`finished` and makes no call at all.
    """

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        max_line: int = DEFAULT_MAX_LINE,
        read_bytes: int = DEFAULT_READ,
        rescan_s: float = 1.0,
        log_backlog: int | None = None,
        stats_per_second: float | None = None,
        slowest: float = SLOWEST_S,
        first_reads: int | None = None,
        focus: Callable[[], Iterable[int]] | None = None,
        resume: Mapping[str, tuple[int, int]] | None = None,
    ) -> None:
        """``log_backlog``: start each log found by the first scan at its last lines (within
        that many bytes) rather than at its beginning; logs that appear later start at 0.
        ``focus`` says, at each poll, which ranks are on screen (from any thread).
        ``resume``: where another follower of this run left each file (:meth:`resume_points`):
        those are read on from there, not again."""
        self.run_dir = Path(run_dir)
        self.max_line = max_line
        self.read_bytes = read_bytes
        self.rescan_s = rescan_s
        self.log_backlog = log_backlog
        self.first_reads = first_reads
        self.listing = RunListing(self.run_dir, stats_per_second)
        self.schedule: PollSchedule[Path] = PollSchedule(stats_per_second, slowest)
        self.run_ended = False  # state.json says the run ended
        self.finished = False  # ended and read to the end: nothing here will change again
        self._files: dict[Path, _Followed] = {}
        self._by_rank: dict[int, list[Path]] = {}
        self._unread: dict[Path, None] = {}
        # a heap: telemetry last, by rank (Paths order by their parts, parsed once)
        self._unread_order: list[tuple[bool, int, Path]] = []
        self._draining: set[Path] = set()
        self._ended: set[int] = set()
        self._failed: set[int] = set()  # failed ranks whose files are read next, first
        self._status_sig: dict[Path, tuple[int, tuple[int, int, int] | None]] = {}
        self._status_of: dict[int, Path] = {}  # each rank's status file, once listed
        self._state_sig: tuple[int, int, int] | None = None
        self._focus_of = focus
        self._focus: frozenset[int] = frozenset()
        self._hot_for: tuple[frozenset[int], int] | None = None
        self._seq = 0
        self._scanned_at = -math.inf
        self._first_scan = True
        self._polled = False  # the first poll with ``first_reads`` has been made
        self._launcher_found = False  # found since the last poll
        self._problems: dict[Path, str | None] = {}  # why a file cannot be used, as last said
        self._garbage: dict[Path, int] = {}  # unreadable lines skipped, by metrics/telemetry file
        self._resume = dict(resume or {})

    def rescan(self, force: bool = False) -> None:
        """Start following files that appeared since the last scan; read the run's state."""
        self._scanned_at = time.monotonic()
        for found in self.listing.new_files(force):
            self._add(found)
        self._first_scan = False
        self._read_state()

    def _add(self, found: Found) -> None:
        path, kind, rank = found
        backlog = None
        if kind == METRICS:
            tail: LineTail | RecordTail = RecordTail(path, rank)
        elif kind == LOG:
            tail = LineTail(path, self.max_line)
            backlog = self.log_backlog if self._first_scan else None
            self._launcher_found |= rank == LAUNCHER
        else:
            tail = LineTail(path, TELEMETRY_LINE)
            backlog = TELEMETRY_BACKLOG if self._first_scan else None
        resumed = self._resume.pop(str(path), None) if self._resume else None
        if resumed is not None:
            tail.resume_at(*resumed)
            backlog = None
        self._files[path] = _Followed(kind, rank, tail, backlog)
        self._by_rank.setdefault(rank, []).append(path)
        self._unread[path] = None
        heapq.heappush(self._unread_order, (kind == TELEMETRY, rank, path))

    def _read_state(self) -> None:
        if self.run_ended:
            return
        path = RunDir(self.run_dir).state_json
        st = fscalls.stat(path)
        sig = (st.st_ino, st.st_size, st.st_mtime_ns) if st else None
        if sig is None or sig == self._state_sig:
            return
        data, _ = read_json(path)
        if data is None:
            return
        self._state_sig = sig
        if RunState.from_json(data).state in FINAL:
            self.run_ended = True
            for rank in {*self._by_rank, *self._status_of}:
                self._end_rank(rank)

    def _end_rank(self, rank: int) -> None:
        """``rank`` will write no more: read its files to their end, then never again."""
        self._ended.add(rank)
        status = self._status_of.get(rank)
        if status is not None:
            self.schedule.remove(status)
        for path in self._by_rank.get(rank, ()):
            if path in self.schedule:
                self.schedule.remove(path)
                self._draining.add(path)

    def poll(self) -> Batch:
        """What is new since the last poll, within the budget."""
        batch = Batch()
        if self.finished:
            return batch
        before = fscalls.total()
        now = time.monotonic()
        if now - self._scanned_at >= self.rescan_s:
            self.rescan()
        self._read_statuses(batch, now)
        if self._focus_of is not None:
            self._focus = frozenset(self._focus_of())
        if (self._focus, len(self._files)) != self._hot_for:
            self._hot_for = (self._focus, len(self._files))
            hot = (self._by_rank.get(rank, ()) for rank in self._focus)
            self.schedule.set_hot(p for paths in hot for p in paths)
        logs: list[tuple[int, int, Lines]] = []
        due = self.schedule.due(now)
        for path in due:
            if path in self._status_sig:
                changed = self._check_status(path, batch, now)
            else:
                changed = self._read(path, batch, logs)
            self.schedule.checked(path, now, changed)
        for path in list(self._draining):
            self._read(path, batch, logs)
            if not self._files[path].tail.more:
                self._draining.discard(path)
        first = fscalls.total()
        for path in self._take_unread():
            followed = self._files[path]
            if followed.backlog is not None:
                assert isinstance(followed.tail, LineTail)
                followed.tail.skip_to_tail(followed.backlog)
            self._read(path, batch, logs)
            if self.run_ended or followed.rank in self._ended:
                if followed.tail.more:
                    self._draining.add(path)
            else:
                self.schedule.add(path, now, SLOWER if followed.kind == TELEMETRY else 1.0)
        self.schedule.spend(first - before - len(due))
        logs.sort(key=lambda item: (item[0], item[1]))
        for _, rank, lines in logs:
            batch.logs.append(RankLines(rank, self._seq, lines))
            self._seq += len(lines)
        batch.launcher, self._launcher_found = self._launcher_found, False
        if self.run_ended and not (self._unread or self._draining or len(self.schedule)):
            self.finished = True
        return batch

    @property
    def read_once(self) -> bool:
        """Every file listed so far was read once, and those of ended ranks to their end."""
        return not (self._unread or self._draining)

    def resume_points(self) -> dict[str, tuple[int, int]]:
        """Where each file read so far was left, by its path: what another follower of the
        run (in another process, given the same ``run_dir``) goes on from (``resume``)."""
        points = {}
        for path, followed in self._files.items():
            point = followed.tail.resume_point()
            if point is not None:
                points[str(path)] = point
        return points

    def _take_unread(self) -> list[Path]:
        """The files to read for the first time in this poll: the focused ranks' first. With
        ``first_reads`` set, the first poll reads only theirs: the rows (statuses) come first."""
        if self.first_reads is None:
            limit = len(self._unread)
        else:
            limit = self.first_reads if self._polled else 0
            self._polled = True
        taken: dict[Path, None] = {}
        # The ranks on screen, then those that failed (their last lines come before the
        # all-ranks view marks their death; a few hundred at most in one poll).
        failed = sorted(self._failed)[: self.first_reads]
        self._failed.difference_update(failed)
        for rank in (*self._focus, *failed):
            taken.update((p, None) for p in self._by_rank.get(rank, ()) if p in self._unread)
        order = self._unread_order
        while order and len(taken) < limit:
            path = heapq.heappop(order)[2]
            if path in self._unread:
                taken[path] = None
        for path in taken:
            del self._unread[path]
        return list(taken)

    def _problem(self, batch: Batch, rank: int, path: Path, line: str | None) -> None:
        """Say in ``batch`` that ``path`` cannot be used (``line``) or can again (None), once
        each time that changes."""
        if self._problems.get(path) != line:
            self._problems[path] = line
            batch.problems.setdefault(rank, {})[named(self.run_dir, path)] = line

    def _read(self, path: Path, batch: Batch, logs: list[tuple[int, int, Lines]]) -> bool:
        """Read what is new in one file into ``batch``; whether anything was."""
        followed = self._files[path]
        rank, tail = followed.rank, followed.tail
        changed = self._read_new(followed, path, batch, logs)
        skipped = self._garbage.get(path, 0)
        if tail.error is not None or skipped or path in self._problems:  # rare: one test else
            name, why = named(self.run_dir, path), None
            if tail.error is not None:
                why = f"{name} cannot be read: {tail.error}"
            elif skipped:
                why = f"{name}: {skipped} unreadable line{'s' * (skipped != 1)} skipped"
            self._problem(batch, rank, path, why)
        return changed

    def _read_new(
        self, followed: _Followed, path: Path, batch: Batch, logs: list[tuple[int, int, Lines]]
    ) -> bool:
        rank, tail = followed.rank, followed.tail
        offset = tail.offset
        if followed.kind == LOG:
            assert isinstance(tail, LineTail)
            st = fscalls.stat(path)  # None: the tail notices the deletion itself
            lines = tail.read(self.read_bytes, st)
            if lines.restarted:
                batch.log_restarts.add(rank)
            if lines:
                logs.append((st.st_mtime_ns if st else 0, rank, lines))
        elif followed.kind == METRICS:
            assert isinstance(tail, RecordTail)
            new, garbage, restarted = tail.read(self.read_bytes)
            if restarted:
                batch.metric_restarts.add(rank)
            if garbage:
                batch.garbage[rank] = batch.garbage.get(rank, 0) + garbage
                self._garbage[path] = self._garbage.get(path, 0) + garbage
            merge_columns(batch.records, new)
        else:
            assert isinstance(tail, LineTail)
            texts = tail.read(self.read_bytes).texts
            samples = [s for s in map(parse_line, texts) if s]
            bad = len(samples) < len(texts) and sum(1 for t in texts if t.strip()) - len(samples)
            if bad:
                self._garbage[path] = self._garbage.get(path, 0) + bad
            if samples:
                batch.telemetry.setdefault(rank, []).extend(samples)
        return tail.offset != offset

    def _read_statuses(self, batch: Batch, now: float) -> None:
        """Status files that the listing shows new or rewritten (a new inode)."""
        changed = self.listing.changed_statuses()
        for path, rank in sorted(changed, key=lambda item: item[1]):
            self._status_sig.setdefault(path, (rank, None))
            self._status_of[rank] = path
            self._read_status(path, batch, now)

    def _check_status(self, path: Path, batch: Batch, now: float) -> bool:
        """A scheduled look at a status file: read it when its ``stat`` changed (a writer that
        rewrites in place keeps the inode, so the listing cannot tell)."""
        st = fscalls.stat(path)
        if st is None or (st.st_ino, st.st_size, st.st_mtime_ns) == self._status_sig[path][1]:
            return False
        return self._read_status(path, batch, now)

    def _read_status(self, path: Path, batch: Batch, now: float) -> bool:
        rank = self._status_sig[path][0]
        data, st = read_json(path)
        if data is None or st is None:  # a torn or odd file is read again later
            self.listing.forget_status(path)
            self._problem(batch, rank, path, unusable_status(self.run_dir, path))
            return False
        self._problem(batch, rank, path, None)
        status = RankStatus.from_json(data, rank)
        batch.status[rank] = status
        if status.world_size:
            self.listing.world_size = status.world_size
        self._status_sig[path] = (rank, (st.st_ino, st.st_size, st.st_mtime_ns))
        if status.state == RankState.FAILED:
            self._failed.add(rank)
        if status.state in RANK_ENDED:
            self._end_rank(rank)
        elif not self.run_ended:
            self.schedule.add(path, now, SLOWER)
        return True

    def watch(self, stop_event: threading.Event, interval_s: float = 0.25) -> Iterator[Batch]:
        """Non-empty batches until ``stop_event`` is set, each within about ``interval_s`` of
        the write on this node or another; once the run has ended and been read, none.

        ``watchfiles`` wakes the loop early for local writes (on the run's folders, not
        recursively: a recursive watch would walk every file); its timeout wakes it every
        ``interval_s`` regardless, so polling sees writes that inotify never reports.
        """
        ms = max(1, int(interval_s * 1000))
        batch = self.poll()
        if batch:
            yield batch
        while not stop_event.is_set() and not self.finished:
            watched = self.listing.folders()
            if not watched:  # no run directory yet
                if stop_event.wait(interval_s):
                    break
                batch = self.poll()
                if batch:
                    yield batch
                continue
            try:
                for changes in watchfiles.watch(
                    *watched,
                    watch_filter=None,
                    debounce=ms,
                    step=min(50, ms),
                    stop_event=stop_event,
                    rust_timeout=ms,
                    yield_on_timeout=True,
                    raise_interrupt=False,
                    recursive=False,
                ):
                    self.listing.wake(Path(path).parent for _, path in changes)
                    if any(change == watchfiles.Change.added for change, _ in changes):
                        self.rescan()
                    batch = self.poll()
                    if batch:
                        yield batch
                    if self.finished or self.listing.folders() != watched:
                        break
            except (OSError, RuntimeError):
                # No notification (run dir not there yet, watch limit reached): poll this
                # interval and try to set it up again.
                if stop_event.wait(interval_s):
                    break
                batch = self.poll()
                if batch:
                    yield batch


def read_json(path: Path) -> tuple[dict[str, Any] | None, os.stat_result | None]:
    """A small JSON object (a state or a status) read through the counted calls, with the
    ``fstat`` of the file read; None while it cannot be read (missing, torn, not an object)."""
    try:
        with fscalls.open_read(path) as fh:
            st = fscalls.fstat(fh.fileno())
            raw = fh.read(min(st.st_size, MAX_RECORD) + 1)  # what is there: no 1 MB buffer
        data = json.loads(raw) if len(raw) <= MAX_RECORD else None
    except (OSError, ValueError, RecursionError):
        return None, None
    return (data, st) if isinstance(data, dict) else (None, None)
