"""What the monitoring views show of a live or finished run, kept up to date from follower batches.

UI-free: :class:`RunMonitor` takes the :class:`~ezpz_tui.core.watching.followers.Batch` objects a
:class:`~ezpz_tui.core.watching.followers.RunFollower` delivers and keeps, per rank, its state (from
its status file), when it last showed a sign of life, and the newest lines of its log; plus every
rank's lines interleaved in arrival order for the all-ranks view. Buffers are bounded: older
lines stay on disk and :func:`read_lines_before` reads them back when the user scrolls up (as
toolong does), so a long run costs the same memory as a short one.
"""

from __future__ import annotations

import heapq
import re
from collections import deque
from dataclasses import dataclass
from itertools import accumulate, count, repeat
from operator import add
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ezpz_tui.core.runs.ending import derived_state
from ezpz_tui.core.watching.collectives import Reading
from ezpz_tui.core.watching.efficiency import LiveEfficiency, PeakSettings
from ezpz_tui.core.watching.followers import LAUNCHER, Batch
from ezpz_tui.core.watching.raised import raised_exception
from ezpz_tui.core.watching.stragglers import SLOW_FACTOR, StepTimes
from ezpz_tui.core.watching.tails import DEFAULT_MAX_LINE, LineSegment, collapse_cr, strip_ansi
from ezpz_tui.core.watching.telemetry import RankTelemetry
from runtime.rundir import RANK_ENDED, STATUS, RankState, RankStatus, RunDir, RunState, State
from runtime.telemetry.record import Sample

if TYPE_CHECKING:
    from ezpz_tui.core.watching.digested import Digested

KEEP_PER_RANK = 2000
KEEP_TOTAL = 128_000  # lines held over all ranks: 2000 each up to 64 ranks, fewer beyond
KEEP_AT_LEAST = 8  # the rank list needs a last line; the rank on screen keeps KEEP_PER_RANK
KEEP_ALL = 20000
KEEP_LAUNCHER = 2000  # lines of the launcher's log held: a launcher says little, and it matters
STALL_AFTER_S = 60.0
# A traceback may be the last thing a dying rank prints: give it a moment to exit on its own.
RAISED_AFTER_S = 2.0

# What marks a line worth jumping to with ]/[: the start of a traceback, an error, a crash.
_ERROR = re.compile(
    r"Traceback \(most recent call last\)|\b\w*(Error|Exception)\b|\bFATAL\b|\bfatal error\b"
    r"|Segmentation fault|\bSIG(SEGV|ABRT|BUS|KILL|FPE|ILL)\b|core dumped|terminate called"
    r"|\bAborted\b|\bKilled\b|CUDA error|NCCL (error|WARN)|\berror:",
)


def is_error_line(text: str) -> bool:
    """Whether ``text`` (ANSI allowed) starts a traceback or reports an error or a crash."""
    return _ERROR.search(strip_ansi(text)) is not None


LogLine = tuple[int, str, int, int, int]
"""One shown line: ``(rank, text, offset, length, cut)``; ``offset``/``length`` locate its bytes
in the rank's log (a negative offset marks a line the monitor made), ``cut`` says how many bytes
the display dropped (0 when whole).

A plain tuple on purpose, indexed with the constants below: CPython's garbage collector stops
tracking an exact tuple of strings and ints, but keeps scanning tuple subclasses (NamedTuple).
With 256 ranks' buffers (~600k lines) every full collection of NamedTuples stopped the UI for
~340 ms (bench/monitor_bench.py).
"""
RANK, TEXT, OFFSET, LENGTH, CUT = range(5)


@dataclass(slots=True)
class RankInfo:
    """One rank as the rank list shows it. ``status`` is its status file's state, or
    ``waiting`` before the file exists; ``stalled`` is decided by :meth:`RunMonitor.state_of`."""

    rank: int
    host: str = ""
    local_rank: int | None = None
    status: RankState = RankState.WAITING
    exit_code: int | None = None
    signal_name: str | None = None
    cause: str | None = None  # why the supervisor gave it its end: "after rank 1 failed"
    raised: str | None = None  # the exception its log ends with, while it may still live
    ended: float | None = None
    last_activity: float | None = None
    lines: int = 0
    last_line: str = ""

    @property
    def outcome(self) -> str:
        """How the rank ended, in the words of the rank list: ``exited 0``, ``failed 3``,
        ``SIGSEGV``; empty while it runs."""
        if self.signal_name and self.status == RankState.FAILED:
            return self.signal_name
        if self.status == RankState.SUCCEEDED:
            return "exited 0"
        if self.status == RankState.FAILED:
            return f"failed {self.exit_code}" if self.exit_code is not None else "failed"
        if self.status in RANK_ENDED:
            return str(self.status)
        return ""


@dataclass
class Prepared:
    """A batch turned into display lines, off the UI thread: only the newest ``keep`` lines of
    each rank become objects, since older ones would drop out of the buffers at once."""

    by_rank: dict[int, list[LogLine]]
    arrived: list[LogLine]  # every rank's new lines, in arrival order
    counts: dict[int, int]  # lines read per rank, kept or not
    last: dict[int, str]
    batch: Batch


@dataclass
class Changes:
    """What one :meth:`RunMonitor.apply` changed, so views redraw only what they must."""

    by_rank: dict[int, list[LogLine]]
    arrived: list[LogLine]
    restarted: set[int]  # ranks whose log was truncated or replaced: reload their view
    problems: bool = False  # a file came to be unusable, or usable again


class Settled(NamedTuple):
    """A finished run's ranks as its digest has them, made off the UI thread
    (:func:`settled`) and installed at once (:meth:`RunMonitor.settle`)."""

    ranks: dict[int, RankInfo]
    telemetry: dict[int, RankTelemetry]
    digested: Digested
    run: RunState


def settled(digested: Digested, run: RunState) -> Settled:
    """The rank list's rows of a finished run from its digest: each rank's end, host, last line
    and last telemetry sample (the per-rank objects the views read; a rank's log lines, its
    series and its minute of samples are read from its files when it is shown)."""
    status, hosts = digested.status, digested.hosts
    ranks: dict[int, RankInfo] = {}
    for rank in range(digested.world):
        word, host = status["state"][rank], digested.host[rank]
        try:
            state = RankState(word) if word is not None else RankState.WAITING
        except ValueError:
            state = RankState.UNKNOWN
        end = status["end"][rank]
        ranks[rank] = RankInfo(
            rank,
            host=hosts[host] if isinstance(host, int) and 0 <= host < len(hosts) else "",
            local_rank=status["local_rank"][rank],
            status=state,
            exit_code=status["exit_code"][rank],
            signal_name=status["signal_name"][rank],
            cause=status["cause"][rank],
            ended=float(end) if isinstance(end, int | float) else None,
            last_line=digested.last_line[rank] or "",
        )
    telemetry: dict[int, RankTelemetry] = {}
    for rank, row in enumerate(zip(*digested.telemetry.values(), strict=True)):
        if isinstance(row[0], int | float):  # its time: a sample at all
            telemetry[rank] = RankTelemetry()
            telemetry[rank].samples.append(Sample(*row))  # by position: its fields' order
    return Settled(ranks, telemetry, digested, run)


class RunMonitor:
    """Per-rank state and bounded line buffers of one run, fed batch by batch."""

    def __init__(
        self,
        run_dir: Path,
        stall_after: float = STALL_AFTER_S,
        keep_per_rank: int = KEEP_PER_RANK,
        keep_all: int = KEEP_ALL,
        slow_factor: float = SLOW_FACTOR,
        peaks: PeakSettings | None = None,
    ) -> None:
        self.run_dir = Path(run_dir)
        # TFLOPS and MFU for the header and the heatmap; never the probe (the UI thread asks)
        self.efficiency = LiveEfficiency(self.run_dir, peaks or PeakSettings(probe=False))
        self.stall_after = stall_after
        self.steps = StepTimes(slow_factor)  # who is a straggler
        # The ranks' Flight Recorder as last read (by the opened run's collectives thread):
        # who arrives last at the collectives, who never entered the one the others wait in.
        self.collectives: Reading | None = None
        self.telemetry: dict[int, RankTelemetry] = {}  # each rank's last minute of samples
        self.keep_per_rank = keep_per_rank
        self.keep_all = keep_all
        self.ranks: dict[int, RankInfo] = {}
        self._newest: list[tuple[float, int]] = []  # see _newest_activity
        self._newest_of: tuple[int, int, int] | None = None
        self._activity = 0  # counts changes of the ranks' last activity
        self._lines: dict[int, deque[LogLine]] = {}
        self.all_lines: deque[LogLine] = deque(maxlen=keep_all)
        self.total_lines = 0
        self._marks = 0
        # The run's state as last read: once it has ended (or is lost), a rank whose record
        # still says running is shown as its supervisor would have ended it.
        self.run_state: RunState | None = None
        # the launcher's log, followed as pseudo-rank LAUNCHER: never in ``ranks`` (which counts,
        # plots and stall checks read), its lines in the buffers and the all-ranks view.
        self.launcher = RankInfo(LAUNCHER, status=RankState.WAITING)
        self.has_launcher = False
        self._lines[LAUNCHER] = deque(maxlen=KEEP_LAUNCHER)
        self.shown: int | None = None  # the rank whose log is on screen
        # Files that cannot be used, by rank (LAUNCHER for its log): the line saying why, by
        # the file's name in the run directory.
        self.problems: dict[int, dict[str, str]] = {}

    def show(self, rank: int | None) -> None:
        """``rank``'s log is on screen (None: the all-ranks view): its buffer grows to
        KEEP_PER_RANK lines and the one shown before shrinks back to its share, so memory
        follows what is shown, not the rank count. The follower reads ``shown`` first."""
        if rank == self.shown:
            return
        before, self.shown = self.shown, rank
        if before is not None and before != LAUNCHER and before in self._lines:
            self._lines[before] = deque(self._lines[before], maxlen=self.keep_per_rank)
        if rank is not None and rank != LAUNCHER and rank in self._lines:
            self._lines[rank] = deque(self._lines[rank], maxlen=self._keep(rank))

    def _keep(self, rank: int) -> int:
        """Lines held for ``rank``: a view's worth on screen, its share of the budget off it."""
        return max(KEEP_PER_RANK, self.keep_per_rank) if rank == self.shown else self.keep_per_rank

    def shown_ranks(self) -> tuple[int, ...]:
        """The ranks whose files the follower should read first and look at every poll."""
        shown = self.shown
        return (LAUNCHER,) if shown is None else (shown, LAUNCHER)

    def _rank(self, rank: int) -> RankInfo:
        if rank == LAUNCHER:
            return self.launcher
        info = self.ranks.get(rank)
        if info is None:
            info = self.ranks[rank] = RankInfo(rank)
        return info

    def _buffer(self, rank: int) -> deque[LogLine]:
        """``rank``'s lines, its buffer made when it first has some: an empty deque costs
        600 bytes, and 131,072 ranks of which a few are shown need none."""
        lines = self._lines.get(rank)
        if lines is None:
            lines = self._lines[rank] = deque(maxlen=self._keep(rank))
        return lines

    def expect_ranks(self, world: int) -> None:
        """List ranks ``0..world-1`` before any of them wrote (the plan says how many), and
        share the line budget among them so 1024 ranks cost what 128 do."""
        if not self.ranks:
            share = max(KEEP_AT_LEAST, KEEP_TOTAL // max(1, world))
            self.keep_per_rank = min(self.keep_per_rank, share)
        for rank in range(world):
            self._rank(rank)

    def settle(self, found: Settled) -> None:
        """Show a finished run as its digest has it (:func:`settled`): every rank's row, its
        step time and whether it was slow, without a batch of its files."""
        digested = found.digested
        if self.run_state is None:  # as the runs list will say: an ended run's rows stay still
            self.run_state = found.run
        if not self.ranks:
            share = max(KEEP_AT_LEAST, KEEP_TOTAL // max(1, digested.world))
            self.keep_per_rank = min(self.keep_per_rank, share)
        self.ranks = found.ranks
        self.telemetry = found.telemetry
        times = {r: t for r, t in enumerate(digested.step_time) if t is not None}
        tokens = {r: t for r, t in enumerate(digested.tokens_per_s) if t is not None}
        slow = frozenset(digested.slow)
        self.steps.settle(times, slow, tokens, digested.flops_per_token)

    def prepare(self, batch: Batch) -> Prepared:
        """The display lines of ``batch``; safe to call from the follower's thread."""
        by_rank: dict[int, list[LogLine]] = {}
        arrived: list[LogLine] = []
        counts: dict[int, int] = {}
        last: dict[int, str] = {}
        for rank, _seq, lines in batch.logs:
            texts, lengths, cuts = lines.texts, lines.lengths, lines.cuts
            first = max(0, len(texts) - self._keep(rank))
            # offset of line first+k = offset(first) + its k predecessors' lengths + k newlines,
            # all in C: a batch can hold a few hundred thousand lines.
            sums = accumulate(lengths[first:], initial=lines.offset(first))
            offsets = map(add, sums, count())
            new = list(zip(repeat(rank), texts[first:], offsets, lengths[first:], repeat(0)))
            for i, cut in cuts.items():  # rare: lines over the display cap
                if i >= first:
                    line = new[i - first]
                    new[i - first] = (rank, line[TEXT], line[OFFSET], line[LENGTH], cut)
            by_rank.setdefault(rank, []).extend(new)
            arrived.extend(new)
            counts[rank] = counts.get(rank, 0) + len(texts)
            last[rank] = texts[-1]
        return Prepared(by_rank, arrived[-self.keep_all :], counts, last, batch)

    def apply(self, prepared: Prepared, now: float) -> Changes:
        """Fold in a prepared batch (on the thread that reads the monitor); ``now`` is the wall
        clock at which it was read."""
        batch = prepared.batch
        changes = Changes(prepared.by_rank, list(prepared.arrived), set())
        self.has_launcher |= batch.launcher or LAUNCHER in prepared.by_rank
        for rank in batch.log_restarts:
            self._rank(rank)
            self._buffer(rank).clear()
            changes.restarted.add(rank)
        for rank, new in prepared.by_rank.items():
            info = self._rank(rank)
            self._buffer(rank).extend(new)
            info.lines += prepared.counts[rank]
            info.last_line = prepared.last[rank]
            self.mark_active(info, now)
            info.raised = raised_exception(self._tail_texts(rank))
        self.all_lines.extend(prepared.arrived)
        self.total_lines += sum(prepared.counts.values())
        for rank in batch.records:
            self.mark_active(self._rank(rank), now)
        self.steps.update(batch.records, batch.metric_restarts)
        for rank, samples in batch.telemetry.items():  # not activity: a hung rank is sampled
            self.telemetry.setdefault(rank, RankTelemetry()).add(samples)
        self._note_problems(batch.problems)
        changes.problems = bool(batch.problems)
        # In the order the ranks ended, so the all-ranks view marks the first death first.
        for rank, status in sorted(batch.status.items(), key=_end_then_rank):
            info = self._rank(rank)
            was = info.status
            self._apply_status(info, status)
            if info.status == RankState.FAILED and was != RankState.FAILED:
                # Where in the interleaved stream the rank died: the all-ranks view shows it.
                self._marks += 1
                mark = (rank, f"✗ rank {rank} {info.outcome}", -self._marks, 0, 0)
                self.all_lines.append(mark)
                changes.arrived.append(mark)
        return changes

    def _note_problems(self, changed: dict[int, dict[str, str | None]]) -> None:
        """Keep the lines about files that cannot be used; a rank whose status file says
        nothing, and has said nothing readable before, is ``unknown`` (not ``waiting``)."""
        for rank, lines in changed.items():
            held = self.problems.setdefault(rank, {})
            for name, line in lines.items():
                if line is None:
                    held.pop(name, None)
                else:
                    held[name] = line
                    status = rank != LAUNCHER and name.startswith(f"{STATUS}/")
                    if status and self._rank(rank).status == RankState.WAITING:
                        self._rank(rank).status = RankState.UNKNOWN
            if not held:
                del self.problems[rank]

    def problems_of(self, rank: int | None) -> list[str]:
        """What cannot be used of ``rank``'s files (None: of any rank), one line each."""
        if rank is None:
            # once each: the ranks of a node whose digest went stale share its sentence
            held = self.problems.values()
            return list(dict.fromkeys(line for lines in held for line in lines.values()))
        return list(self.problems.get(rank, {}).values())

    @staticmethod
    def _apply_status(info: RankInfo, status: RankStatus) -> None:
        info.status = status.state
        info.host = status.host or info.host
        info.local_rank = status.local_rank
        info.exit_code = status.exit_code
        info.signal_name = status.signal_name
        info.cause = status.cause
        info.ended = None if status.end is None else float(status.end)

    def _tail_texts(self, rank: int, count: int = 60) -> list[str]:
        lines = self._buffer(rank)
        start = max(0, len(lines) - count)
        return [strip_ansi(lines[i][TEXT]) for i in range(start, len(lines))]

    def adopt_lines(self, rank: int, lines: deque[LogLine]) -> None:
        """Hold ``lines`` as ``rank``'s newest, as another monitor of the run kept them (the
        first read's, in another process: :mod:`~ezpz_tui.core.watching.first_read`)."""
        keep = KEEP_LAUNCHER if rank == LAUNCHER else self._keep(rank)
        self._lines[rank] = lines if lines.maxlen == keep else deque(lines, maxlen=keep)

    def lines_of(self, rank: int) -> deque[LogLine]:
        """The newest lines of ``rank`` (older ones: :func:`read_lines_before`)."""
        self._rank(rank)
        return self._buffer(rank)

    def launcher_state(self) -> tuple[str, str]:
        """The launcher's state word (a run state) and how it ended in the rank list's words:
        it runs while the run is live and ends with the run's end."""
        run = self.run_state
        if run is None or run.live:
            return ("running" if self.launcher.last_activity is not None else "waiting"), ""
        state = str(run.state)
        if run.state == State.SUCCEEDED:
            return state, "exited 0"
        if run.state == State.FAILED:
            if run.signal_name:
                return state, run.signal_name
            return state, "failed" if run.exit_code is None else f"failed {run.exit_code}"
        return state, state

    def state_of(self, rank: int, now: float) -> RankState:
        """``waiting``, ``running``, ``slow``, ``raised``, ``stalled``, ``idle``, or how the
        rank ended.

        Raised: its log ends in an uncaught traceback and nothing followed for
        :data:`RAISED_AFTER_S` seconds, yet its status says it runs.

        Slow: running, but its recent step time is over ``slow_factor`` times the other ranks'
        median (:mod:`~ezpz_tui.core.watching.stragglers`), or it arrives last at the
        collectives (:func:`~ezpz_tui.core.watching.collectives.arrival_lags`).

        Stalled: a running rank silent (no line, no metric) for ``stall_after`` seconds while
        some other rank showed life within that time. When every rank is silent together the
        run is waiting on something shared (a checkpoint, a collective), not one rank. A rank
        with output but no status file (a run ezpz made, without our wrapper) is running
        while it writes and ``idle`` once it has been silent for ``stall_after``; it shares its
        run's end when the run's files say it finished (``succeeded``), and is ``idle`` when they
        say nothing changes any more (``unknown``).
        """
        info = self._rank(rank)
        run = self.run_state
        if info.status == RankState.UNKNOWN:  # its status says nothing readable
            return info.status
        if info.status == RankState.RUNNING and run is not None and not run.live:
            return derived_state(rank, info.status, run)
        if info.status == RankState.WAITING and info.last_activity is not None and run:
            # No status file, yet output: a run ezpz wrote, whose state its files gave.
            if run.state == State.SUCCEEDED:
                return RankState.SUCCEEDED
            if run.state == State.UNKNOWN:
                return RankState.IDLE
        if info.status in RANK_ENDED or info.last_activity is None:
            if info.status == RankState.RUNNING and rank in self.slow_ranks:
                return RankState.SLOW  # last at the collectives, though it has said nothing
            return info.status
        if info.raised and now - info.last_activity >= RAISED_AFTER_S:
            return RankState.RAISED
        if now - info.last_activity < self.stall_after:
            return RankState.SLOW if rank in self.slow_ranks else RankState.RUNNING
        other = next((seen for seen, r in self._newest_activity() if r != rank), None)
        if other is not None and now - other < self.stall_after:
            return RankState.STALLED
        return RankState.RUNNING if info.status == RankState.RUNNING else RankState.IDLE

    def mark_active(self, info: RankInfo, when: float) -> None:
        """Say ``info``'s rank was last active ``when``: every writer of ``last_activity`` goes
        through here (or :meth:`activity_changed`), so :meth:`state_of` knows its answer moved."""
        info.last_activity = when
        self._activity += 1

    def activity_changed(self) -> None:
        """Ranks were replaced wholesale (a worker's part): the newest activity is found again."""
        self._activity += 1

    def _newest_activity(self) -> list[tuple[float, int]]:
        """The two ranks last active most recently, newest first, found again only when some
        rank's activity changed: the rank list asks :meth:`state_of` of every rank, and scanning
        every other rank for each silent one made a hung 4,096-rank run's repaint quadratic."""
        key = (self._activity, id(self.ranks), len(self.ranks))
        if self._newest_of != key:
            active = list(self.ranks.values())  # a copy: the rank list reads it in a thread
            seen = ((i.last_activity, i.rank) for i in active if i.last_activity is not None)
            self._newest = heapq.nlargest(2, seen)
            self._newest_of = key
        return self._newest

    @property
    def slow_ranks(self) -> frozenset[int]:
        """Slow by their own step time, or by arriving last at the collectives."""
        reading = self.collectives
        return self.steps.slow | reading.lags.slow if reading else self.steps.slow

    @property
    def missing(self) -> frozenset[int]:
        """The ranks the Flight Recorder says never entered the collective the others wait in."""
        reading = self.collectives
        return reading.missing if reading else frozenset()

    def hung(self, now: float) -> int | None:
        """The rank that went silent first, when every running rank has been silent for
        ``stall_after``: the whole job waits on something (a collective a dead or slow rank
        never joined), which no single ``stalled`` rank shows. ``None`` while any rank lives."""
        seen = [
            (i.last_activity, i.rank)
            for i in list(self.ranks.values())  # a copy: the rank list reads it in a thread
            if i.status == RankState.RUNNING and i.last_activity is not None
        ]
        if not seen or any(now - last < self.stall_after for last, _ in seen):
            return None
        return min(seen)[1]

    @property
    def first_failure(self) -> int | None:
        """The rank that failed first: its peers' failures usually follow from it.

        The one the run's state names once its supervisor has decided (by the ranks' own
        records of what they raised: :mod:`ezpz_tui.core.runs.culprit`, since a rank that
        raised may end after the peers that lost it), when its status says failed; else the
        earliest to end failed, ties (same end time, or no time recorded) to the lowest rank.
        """
        failed = [i for i in list(self.ranks.values()) if i.status == RankState.FAILED]
        named = self.run_state.failed_rank if self.run_state is not None else None
        if any(i.rank == named for i in failed):
            return named
        if not failed:
            return None
        return min(failed, key=lambda i: (i.ended is None, i.ended or 0.0, i.rank)).rank

    def log_path(self, rank: int) -> Path:
        run = RunDir(self.run_dir)
        return run.launcher_log if rank == LAUNCHER else run.log(rank)


def _end_then_rank(item: tuple[int, RankStatus]) -> tuple[float, int]:
    end = item[1].end
    return (float("inf") if end is None else float(end), item[0])


def read_lines_before(
    path: Path,
    rank: int,
    offset: int,
    count: int,
    max_line: int = DEFAULT_MAX_LINE,
    chunk: int = 1 << 20,
) -> list[LogLine]:
    """Up to ``count`` complete lines that end before byte ``offset`` of ``path``, oldest first.

    Reads backwards a chunk at a time so scrolling up in a multi-GB log touches only what is
    shown. Lines are shaped as the follower shapes them (``\\r`` collapsed, capped). Never raises:
    an unreadable file gives no lines.
    """
    found: list[LogLine] = []
    end = offset
    try:
        with open(path, "rb") as fh:
            while end > 0 and len(found) < count:
                start = max(0, end - chunk)
                fh.seek(start)
                data = fh.read(end - start)
                if start > 0:
                    cut = data.find(b"\n")
                    if cut < 0 or cut == len(data) - 1:  # a line longer than the window
                        chunk *= 2
                        continue
                    start += cut + 1
                    data = data[cut + 1 :]
                # data ends just before ``end``, a line start: drop the newline it ends with
                body = data[:-1] if data.endswith(b"\n") else data
                lines = []
                pos = start
                for piece in body.split(b"\n"):
                    lines.append(_shape(rank, piece, pos, max_line))
                    pos += len(piece) + 1
                found[:0] = lines
                end = start
    except OSError:
        return []
    return found[-count:]


def _shape(rank: int, raw: bytes, offset: int, max_line: int) -> LogLine:
    if len(raw) <= max_line:
        return (rank, collapse_cr(raw.decode("utf-8", "replace")), offset, len(raw), 0)
    segment = LineSegment(offset, max_line)
    segment.feed(raw)
    text, cut = segment.render()
    return (rank, text, offset, len(raw), cut)


def read_whole_line(path: Path, line: LogLine, limit: int = 4 << 20) -> str:
    """The full text of a line the view shows cut, up to ``limit`` bytes (a 100 MB line of
    base64 is not worth more); the text as shown when the file can no longer be read."""
    try:
        with open(path, "rb") as fh:
            fh.seek(line[OFFSET])
            raw = fh.read(min(line[LENGTH], limit))
    except OSError:
        return line[TEXT]
    text = collapse_cr(raw.decode("utf-8", "replace"))
    if line[LENGTH] > limit:
        text += f" … [{line[LENGTH] - limit} more bytes]"
    return text


class LineFilter(NamedTuple):
    """Which lines the all-ranks view keeps: ranks (None: all) and a text (empty: any)."""

    ranks: frozenset[int] | None
    text: str

    def keeps(self, line: LogLine) -> bool:
        if self.ranks is not None and line[RANK] not in self.ranks:
            return False
        return not self.text or self.text.lower() in strip_ansi(line[TEXT]).lower()

    def describe(self) -> str:
        parts = []
        if self.ranks is not None:
            parts.append("ranks " + ",".join(map(str, sorted(self.ranks))))
        if self.text:
            parts.append(repr(self.text))
        return " ".join(parts) or "none"


NO_FILTER = LineFilter(None, "")


def parse_filter(spec: str) -> tuple[LineFilter, str]:
    """``"@0,3-5 loss"`` -> ranks {0,3,4,5} and text ``loss``; a problem sentence or ``""``.

    Words starting with ``@`` choose ranks (lists and ranges); the rest, joined by single
    spaces, is the text to match. A bad rank word is reported and ignored, never raised.
    """
    ranks: set[int] = set()
    chose = False
    words = []
    problems = []
    for word in spec.split():
        if not word.startswith("@"):
            words.append(word)
            continue
        chose = True
        for part in filter(None, word[1:].split(",")):
            low, dash, high = part.partition("-")
            try:
                first, last = int(low), int(high) if dash else int(low)
            except ValueError:
                problems.append(f"{part!r} is not a rank or a range such as 3-5")
                continue
            if last < first or last - first > 1_000_000:
                problems.append(f"{part!r} is not a range of ranks")
                continue
            ranks.update(range(first, last + 1))
    problem = ("Filter: " + "; ".join(problems) + ".") if problems else ""
    return LineFilter(frozenset(ranks) if chose and ranks else None, " ".join(words)), problem
