"""Incremental reads of one growing file: a rank log as lines, a metric JSONL file as records.

A tail keeps its offset and at most one capped partial line, never file content, so a week-long
run costs the same memory as a fresh one. Nothing here raises on bad input: bytes are decoded
with replacement, torn lines wait for their end, garbage JSONL lines are counted. A file that
is truncated, replaced or re-created is read again from its start, and the caller is told.

Log lines are returned columnar (:class:`Lines`, texts plus byte lengths) rather than as one
object per line: building a Python object per line costs about half the ingest rate, and the UI
writes lines to its widgets in batches anyway. :class:`Line` objects are built on demand. Metric
records are columnar for the same reason (:class:`~runtime.record_columns.RecordColumns`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from itertools import accumulate
from pathlib import Path
from typing import NamedTuple

from ezpz_tui.core.watching import fscalls
from runtime.record_columns import ColumnsResult, RecordColumns, parse_columns

DEFAULT_MAX_LINE = 64 << 10  # bytes of one displayed line; the rest is cut with a marker
DEFAULT_READ = 8 << 20  # bytes read from one file per call: bounds latency and transient memory
MAX_RECORD = 1 << 20  # a JSONL "record" longer than this is garbage, not worth buffering

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI escape sequences, for searching and for plain-text views.

    Lines keep their escapes because the log view renders the colours; search must not match
    inside an escape, nor miss a word that a colour change splits.
    """
    return _ANSI.sub("", text)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f]")


def printable(text: str) -> str:
    """``text`` with its control bytes shown as ``�``: a NUL, a bell or a shift to another
    character set would move a terminal's cursor or change its state. Tabs, newlines and
    escapes stay (a view that renders colours reads those); :func:`plain` removes escapes too."""
    return _CONTROL.sub("\ufffd", text)


def plain(text: str) -> str:
    """``text`` as plain printable text, for a terminal or a report: no ANSI sequence, no
    control byte (a stray escape left over from a torn sequence included)."""
    return printable(strip_ansi(text)).replace("\x1b", "\ufffd")


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

    __slots__ = ("_gone", "_ino", "error", "more", "offset", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self._ino: int | None = None
        self._gone = False
        self.more = False  # the last read stopped at its cap, not at the file's end
        self.error: str | None = None  # why the last open or read failed, in the system's words

    @property
    def ino(self) -> int | None:
        """The inode read from (None before the first read)."""
        return self._ino

    def start_at(self, ino: int, offset: int) -> None:
        """Continue file ``ino`` from ``offset`` instead of its start."""
        self._ino, self.offset = ino, offset

    def read(self, max_bytes: int, st: os.stat_result | None = None) -> tuple[bytes, int, bool]:
        """``(chunk, file offset of chunk, restarted)``; an empty chunk when nothing is new.

        ``st`` is a fresh ``os.stat`` of the path when the caller already has one. The cheap
        path check only decides whether to open; the decision to restart uses ``fstat`` of the
        opened file so a rename between the two cannot pair a new file with an old offset.
        """
        st = st or fscalls.stat(self.path)
        if st is None:
            self._gone = self._ino is not None
            return b"", self.offset, False
        if st.st_ino == self._ino and st.st_size == self.offset and not self._gone:
            return b"", self.offset, False
        try:
            with fscalls.open_read(self.path) as fh:
                st = fscalls.fstat(fh.fileno())
                restarted = self._ino is not None and (
                    self._gone or st.st_ino != self._ino or st.st_size < self.offset
                )
                if restarted or self._ino is None:
                    self._ino, self.offset, self._gone = st.st_ino, 0, False
                fh.seek(self.offset)
                # No more than is there: an unbuffered read of max_bytes allocates all of it
                # first, and thousands of such reads leave the allocator's heap high.
                chunk = fh.read(max(0, min(max_bytes, st.st_size - self.offset)))
        except OSError as exc:
            self.error = exc.strerror or str(exc)
            return b"", self.offset, False
        self.error = None
        start = self.offset
        self.offset += len(chunk)
        self.more = len(chunk) == max_bytes
        return chunk, start, restarted


class LineTail:
    """New complete lines of one growing text log since the previous :meth:`read`.

    A torn last line waits (capped, ``\\r``-collapsed) until its newline arrives; decoding
    happens only on complete lines, so a multibyte character split across writes decodes
    correctly. Deletion gives empty reads until the file reappears, then reading restarts.
    """

    def __init__(self, path: str | os.PathLike[str], max_line: int = DEFAULT_MAX_LINE) -> None:
        # A Path is kept as it is: parsing it again costs ~30 µs, 0.4 s for 12k files.
        self.path = path if isinstance(path, Path) else Path(path)
        self.max_line = max_line
        self._src = _ByteTail(self.path)
        self._partial: LineSegment | None = None

    def skip_to_tail(self, backlog: int) -> None:
        """Start at the first line that begins within ``backlog`` bytes of the file's end.

        Opening a long run, the view wants its last lines, not gigabytes of history read and
        dropped: earlier lines stay on disk for the viewer to read back on demand.
        """
        try:
            with fscalls.open_read(self.path) as fh:
                st = fscalls.fstat(fh.fileno())
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

    def resume_point(self) -> tuple[int, int] | None:
        """``(inode, offset)`` where another tail of this file would go on from: the start of
        the torn last line, which it reads whole; None before the file was read."""
        ino = self._src.ino
        if ino is None:
            return None
        return ino, self._partial.start if self._partial is not None else self._src.offset

    def resume_at(self, ino: int, offset: int) -> None:
        """Go on from a :meth:`resume_point` of another tail (another process's)."""
        self._src.start_at(ino, offset)

    @property
    def more(self) -> bool:
        """The last read stopped at its cap: the file has more to read now."""
        return self._src.more

    @property
    def error(self) -> str | None:
        """Why the file could not be read at the last try (``Permission denied``), else None."""
        return self._src.error

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

    @property
    def more(self) -> bool:
        return self._src.more

    @property
    def error(self) -> str | None:
        return self._src.error

    @property
    def offset(self) -> int:
        return self._src.offset

    def resume_point(self) -> tuple[int, int] | None:
        """``(inode, offset)`` where another tail of this file would go on from: the start of
        the record still torn (an oversized one being skipped is read as garbage there); None
        before the file was read."""
        ino = self._src.ino
        return None if ino is None else (ino, self._src.offset - len(self._pending))

    def resume_at(self, ino: int, offset: int) -> None:
        """Go on from a :meth:`resume_point` of another tail (another process's)."""
        self._src.start_at(ino, offset)

    def read(
        self, max_bytes: int = DEFAULT_READ, st: os.stat_result | None = None
    ) -> tuple[dict[int, RecordColumns], int, bool]:
        """``(records by rank, garbage lines, restarted)``; ``more`` says whether the read
        stopped at its cap."""
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
        result = parse_columns(data, self.rank)
        self._pending = data[result.consumed :]
        garbage = result.garbage
        if len(self._pending) > MAX_RECORD:
            self._pending, self._skipping = b"", True
            garbage += 1
        return result.columns, garbage, restarted


def file_columns(path: Path, rank: int) -> Iterator[ColumnsResult]:
    """The records of one JSONL file by rank, with its garbage lines counted, a chunk at a time
    so a large file never sits in memory whole. A line longer than MAX_RECORD is skipped
    (garbage, as the followers treat it); a last line without its newline is parsed if it is
    complete JSON (a finished file). An unreadable file ends the records early instead of
    raising."""
    pending = b""
    skipping = False
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(DEFAULT_READ):
                data = pending + chunk
                if skipping:
                    newline = data.find(b"\n")
                    data, skipping = (b"", True) if newline < 0 else (data[newline + 1 :], False)
                result = parse_columns(data, rank)
                pending = data[result.consumed :]
                if len(pending) > MAX_RECORD:
                    pending, skipping = b"", True
                if result.columns or result.garbage:
                    yield result
    except OSError:
        return
    if pending.strip() and not skipping:
        yield parse_columns(pending + b"\n", rank)
