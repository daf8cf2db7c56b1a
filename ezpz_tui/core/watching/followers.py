"""UI-free followers of a live run directory: rank logs, metric JSONL and rank status files.

Everything here is polled by ``os.stat``: on Lustre/GPFS/NFS change notification does not see
writes made on other nodes (DESIGN.md section 6), so notification is only ever a wake-up hint.
A follower keeps offsets and at most one capped partial line per file, never file content, so a
week-long run costs the same memory as a fresh one. Nothing here raises on bad input: bytes are
decoded with replacement, torn lines wait for their end, garbage JSONL lines are counted.

Log lines are returned columnar (:class:`Lines`, texts plus byte lengths) rather than as one
object per line: building a Python object per line costs about half the ingest rate, and the UI
writes lines to its widgets in batches anyway. :class:`Line` objects are built on demand. Metric
records are columnar for the same reason (:class:`runtime.records.RecordColumns`, one per rank).
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any, NamedTuple

import watchfiles

from runtime import records
from runtime.history import metric_files

DEFAULT_MAX_LINE = 64 << 10  # bytes of one displayed line; the rest is cut with a marker
DEFAULT_READ = 8 << 20  # bytes read from one file per call: bounds latency and transient memory
MAX_RECORD = 1 << 20  # a JSONL "record" longer than this is garbage, not worth buffering

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_LOG_FILE = re.compile(r"rank-(\d+)\.log$")
_STATUS_FILE = re.compile(r"rank-(\d+)\.json$")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences, for searching and for plain-text views.

    Lines keep their escapes because the log view renders the colours; search must not match
    inside an escape, nor miss a word that a colour change splits.
    """
    return _ANSI.sub("", text)


class Line(NamedTuple):
    """One log line. ``offset``/``length`` locate its raw bytes (newline excluded) in the file,
    so the UI can read a cut line whole; ``cut`` is how many bytes of the shown segment were
    dropped (0 when the text is complete)."""

    text: str
    offset: int
    length: int
    cut: int

    @property
    def truncated(self) -> bool:
        return self.cut > 0


class Lines:
    """The complete lines one read produced, stored as columns; iterate or index for :class:`Line`.

    ``restarted`` says the file was truncated, replaced or re-created before these lines were
    read: lines delivered earlier for it are stale and the viewer should clear them.
    """

    __slots__ = ("_ends", "cuts", "lengths", "restarted", "start", "texts")

    def __init__(
        self,
        start: int = 0,
        texts: list[str] | None = None,
        lengths: list[int] | None = None,
        cuts: dict[int, int] | None = None,
        restarted: bool = False,
    ) -> None:
        self.start = start
        self.texts = texts if texts is not None else []
        self.lengths = lengths if lengths is not None else []
        self.cuts = cuts if cuts is not None else {}
        self.restarted = restarted
        self._ends: list[int] | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def __bool__(self) -> bool:
        return bool(self.texts)

    def offset(self, i: int) -> int:
        """Byte offset of line ``i`` in its file (prefix sums are built on first use)."""
        if self._ends is None:
            self._ends = list(accumulate(self.lengths, initial=0))
        return self.start + self._ends[i] + i

    def __getitem__(self, i: int) -> Line:
        if i < 0:
            i += len(self.texts)
        if not 0 <= i < len(self.texts):
            raise IndexError(i)
        return Line(self.texts[i], self.offset(i), self.lengths[i], self.cuts.get(i, 0))

    def __iter__(self) -> Iterator[Line]:
        return (self[i] for i in range(len(self.texts)))


def _trim_utf8(data: bytes) -> bytes:
    """``data`` without an incomplete multibyte character at its end (where a cap split it)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return data
        if byte >= 0xC0:
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data[:-back] if back < need else data
    return data


class LineSegment:
    """A line being assembled: ``\\r`` rewrites keep only the last non-empty segment and the
    segment's first ``cap`` bytes are kept, so a progress bar that never ends its line or a
    10 MB line costs at most ``cap`` bytes."""

    __slots__ = ("after_cr", "cap", "head", "length", "seg_len", "start")

    def __init__(self, start: int, cap: int) -> None:
        self.start = start
        self.cap = cap
        self.length = 0
        self.head = bytearray()
        self.seg_len = 0
        self.after_cr = False

    def feed(self, data: bytes) -> None:
        self.length += len(data)
        parts = data.split(b"\r")
        for i, part in enumerate(parts):
            if i:
                self.after_cr = True
            if not part:
                continue
            if self.after_cr:
                self.head.clear()
                self.seg_len = 0
                self.after_cr = False
            room = self.cap - len(self.head)
            if room > 0:
                self.head += part[:room]
            self.seg_len += len(part)

    def render(self) -> tuple[str, int]:
        if self.seg_len == len(self.head):
            return self.head.decode("utf-8", "replace"), 0
        shown = _trim_utf8(bytes(self.head))
        cut = self.seg_len - len(shown)
        return f"{shown.decode('utf-8', 'replace')} … [{cut} bytes cut]", cut


def collapse_cr(text: str) -> str:
    """The last non-empty ``\\r`` segment: what a terminal shows after a progress-bar rewrite."""
    return text.rstrip("\r").rpartition("\r")[2]


class _ByteTail:
    """New bytes of one file, restarting at 0 when it shrinks, is replaced or re-created."""

    __slots__ = ("_gone", "_ino", "offset", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._ino: int | None = None
        self._gone = False

    def start_at(self, ino: int, offset: int) -> None:
        """Continue file ``ino`` from ``offset`` instead of its start."""
        self._ino, self.offset = ino, offset

    def read(self, max_bytes: int, st: os.stat_result | None = None) -> tuple[bytes, int, bool]:
        """``(chunk, file offset of chunk, restarted)``; an empty chunk when nothing is new.

        ``st`` is a fresh ``os.stat`` of the path when the caller already has one. The cheap
        path check only decides whether to open; the decision to restart uses ``fstat`` of the
        opened file so a rename between the two cannot pair a new file with an old offset.
        """
        try:
            st = st or os.stat(self.path)
        except OSError:
            self._gone = self._ino is not None
            return b"", self.offset, False
        if st.st_ino == self._ino and st.st_size == self.offset and not self._gone:
            return b"", self.offset, False
        try:
            with open(self.path, "rb") as fh:
                st = os.fstat(fh.fileno())
                restarted = self._ino is not None and (
                    self._gone or st.st_ino != self._ino or st.st_size < self.offset
                )
                if restarted or self._ino is None:
                    self._ino, self.offset, self._gone = st.st_ino, 0, False
                fh.seek(self.offset)
                chunk = fh.read(max_bytes)
        except OSError:
            return b"", self.offset, False
        start = self.offset
        self.offset += len(chunk)
        return chunk, start, restarted


class LineTail:
    """New complete lines of one growing text log since the previous :meth:`read`.

    A torn last line waits (capped, ``\\r``-collapsed) until its newline arrives; decoding
    happens only on complete lines, so a multibyte character split across writes decodes
    correctly. Deletion gives empty reads until the file reappears, then reading restarts.
    """

    def __init__(self, path: str | os.PathLike[str], max_line: int = DEFAULT_MAX_LINE) -> None:
        self.path = Path(path)
        self.max_line = max_line
        self._src = _ByteTail(self.path)
        self._partial: LineSegment | None = None

    def skip_to_tail(self, backlog: int) -> None:
        """Start at the first line that begins within ``backlog`` bytes of the file's end.

        Opening a long run, the view wants its last lines, not gigabytes of history read and
        dropped: earlier lines stay on disk for the viewer to read back on demand.
        """
        try:
            with open(self.path, "rb") as fh:
                st = os.fstat(fh.fileno())
                if st.st_size <= backlog:
                    return
                fh.seek(st.st_size - backlog - 1)
                head = fh.read(backlog + 1)
        except OSError:
            return
        newline = head.find(b"\n")
        if newline >= 0:
            self._src.start_at(st.st_ino, st.st_size - backlog - 1 + newline + 1)

    @property
    def offset(self) -> int:
        """Bytes of the file consumed so far (a partial line included)."""
        return self._src.offset

    def read(self, max_bytes: int = DEFAULT_READ, st: os.stat_result | None = None) -> Lines:
        chunk, pos, restarted = self._src.read(max_bytes, st)
        if restarted:
            self._partial = None
        last = chunk.rfind(b"\n")
        if last < 0:
            if chunk:
                self._feed_partial(chunk, pos)
            return Lines(self._src.offset, restarted=restarted)
        out = Lines(pos, restarted=restarted)
        begin = 0
        if self._partial is not None:
            first = chunk.find(b"\n")
            seg = self._partial
            seg.feed(chunk[:first])
            text, cut = seg.render()
            out.start = seg.start
            out.texts.append(text)
            out.lengths.append(seg.length)
            if cut:
                out.cuts[0] = cut
            self._partial = None
            begin = first + 1
        if begin <= last:
            self._bulk(chunk[begin:last], out)
        if last + 1 < len(chunk):
            self._feed_partial(chunk[last + 1 :], pos + last + 1)
        return out

    def _feed_partial(self, data: bytes, pos: int) -> None:
        if self._partial is None:
            self._partial = LineSegment(pos, self.max_line)
        self._partial.feed(data)

    def _bulk(self, body: bytes, out: Lines) -> None:
        """Complete lines of ``body`` (newline-separated, no final newline) appended to ``out``.

        One decode and one split for the whole body; per-line Python work only for the rare
        lines with ``\\r`` or over the cap.
        """
        texts = body.decode("utf-8", "replace").split("\n")
        raw: list[str] | list[bytes] = texts if body.isascii() else body.split(b"\n")
        lengths = list(map(len, raw))
        base = len(out.texts)
        cr = body.find(b"\r")
        line, counted = 0, 0
        while cr >= 0:  # visit only the lines holding a \r: progress bars are a few percent
            line += body.count(b"\n", counted, cr)
            texts[line] = collapse_cr(texts[line])
            counted = body.find(b"\n", cr)
            if counted < 0:
                break
            cr = body.find(b"\r", counted)
        if max(lengths) > self.max_line:
            pos = 0
            for i, n in enumerate(lengths):
                if n > self.max_line:
                    seg = LineSegment(0, self.max_line)
                    seg.feed(body[pos : pos + n])
                    texts[i], cut = seg.render()
                    if cut:
                        out.cuts[base + i] = cut
                pos += n + 1
        out.texts.extend(texts)
        out.lengths.extend(lengths)


class RecordTail:
    """New metric records of one JSONL file, as columns by rank (the records name their rank;
    ``rank``, the file's, is the default); an oversized line is skipped, not buffered."""

    __slots__ = ("_pending", "_skipping", "_src", "rank")

    def __init__(self, path: Path, rank: int) -> None:
        self._src = _ByteTail(path)
        self.rank = rank
        self._pending = b""
        self._skipping = False

    def read(
        self, max_bytes: int = DEFAULT_READ, st: os.stat_result | None = None
    ) -> tuple[dict[int, records.RecordColumns], int, bool]:
        """``(records by rank, garbage lines, restarted)``."""
        chunk, _, restarted = self._src.read(max_bytes, st)
        if restarted:
            self._pending, self._skipping = b"", False
        if not chunk:
            return {}, 0, restarted
        data = self._pending + chunk if self._pending else chunk
        if self._skipping:
            nl = data.find(b"\n")
            if nl < 0:
                return {}, 0, restarted
            data, self._skipping = data[nl + 1 :], False
        result = records.parse_columns(data, self.rank)
        self._pending = data[result.consumed :]
        garbage = result.garbage
        if len(self._pending) > MAX_RECORD:
            self._pending, self._skipping = b"", True
            garbage += 1
        return result.columns, garbage, restarted


@dataclass
class Progress:
    """The latest step and loss of a run, with a rate measured from the records' timestamps."""

    step: int | None = None
    loss: float | None = None
    steps_per_s: float | None = None
    _first: tuple[int, float] | None = None

    def update(self, new: records.RecordColumns | Sequence[records.Record]) -> None:
        """Take in the next records of one rank, in file order: the latest step, the loss of the
        latest record with a step that has one, and the rate from the first record with a step
        and a timestamp to the latest later one. Records without a step are passed over.

        Columns are read from the end and the scan stops once everything is found, so a batch
        of 100k records costs a few lookups, not a loop over them all."""
        if not isinstance(new, records.RecordColumns):
            new = records.RecordColumns.from_records(new)
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
            if want_loss and not records.is_missing(losses[i]):
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
    records: dict[int, records.RecordColumns] = field(default_factory=dict)  # by record rank
    garbage: dict[int, int] = field(default_factory=dict)  # by the file's rank
    status: dict[int, dict[str, Any]] = field(default_factory=dict)  # re-read status files
    log_restarts: set[int] = field(default_factory=set)  # drop what was shown for these ranks
    metric_restarts: set[int] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(
            self.logs
            or self.records
            or self.garbage
            or self.status
            or self.log_restarts
            or self.metric_restarts
        )


class RunFollower:
    """Follows ``logs/rank-*.log``, metric JSONL (ours and ezpz's) and ``status/rank-*.json``.

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
        self._seq = 0
        self._scanned_at = -float("inf")

    def rescan(self) -> None:
        """Start following files that appeared since the last scan."""
        first = self._scanned_at == -float("inf")
        self._scanned_at = time.monotonic()
        for path, rank in _numbered(self.run_dir / "logs", _LOG_FILE):
            if path not in self._logs:
                tail = LineTail(path, self.max_line)
                if first and self.log_backlog is not None:
                    tail.skip_to_tail(self.log_backlog)
                self._logs[path] = (rank, tail)
        for path, rank in metric_files(self.run_dir):
            if path not in self._metrics:
                self._metrics[path] = RecordTail(path, rank)
        for path, rank in _numbered(self.run_dir / "status", _STATUS_FILE):
            self._status.setdefault(path, (rank, None))

    def poll(self) -> Batch:
        """What is new since the last poll: one ``stat`` per known file, reads only if grown."""
        if time.monotonic() - self._scanned_at >= self.rescan_s:
            self.rescan()
        batch = Batch()
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
            records.merge_columns(batch.records, new)
        for path, (rank, seen) in self._status.items():
            st = _stat(path)
            sig = (st.st_ino, st.st_size, st.st_mtime_ns) if st else None
            if sig is None or sig == seen:
                continue
            info = _read_json(path)
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


def _numbered(folder: Path, pattern: re.Pattern[str]) -> list[tuple[Path, int]]:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    found = []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match:
            found.append((Path(entry.path), int(match.group(1))))
    return sorted(found, key=lambda item: item[1])


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        obj = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None
