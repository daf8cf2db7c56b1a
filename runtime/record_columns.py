"""The records of each rank as columns: one list per field and per metric.

A live follower reads a million records a second this way: a Python object per record costs more
than parsing it, and the metric store keeps columns anyway. :func:`parse_columns` gives exactly
what :func:`runtime.records.parse_chunk` gives, as columns: a block of lines of this writer's
shape takes a fast path of C-level passes; any other block is read record by record through
:func:`runtime.records.parse_lines`, the same fallbacks included.

Like :mod:`runtime.records` it needs neither numpy nor orjson (orjson is used where present).
"""

from __future__ import annotations

import gc
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, overload

from runtime.records import (
    DEEP,
    DEEP_LEN,
    NONFINITE_STRINGS,
    ParseResult,
    Record,
    is_deep,
    orjson_loads,
    parse_lines,
)

_PACK = struct.Struct("<d").pack
MISSING: float = struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_00BA_DF00))[0]
"""The value a :class:`RecordColumns` metric column holds where a record lacks that metric: a
quiet NaN with a payload that no arithmetic and no JSON reader produces, so it is never mistaken
for a NaN the training really logged (numpy keeps the payload when it copies the column)."""
_MISSING_PACKED = _PACK(MISSING)


def is_missing(value: float) -> bool:
    """Whether a column value is :data:`MISSING` (a real NaN is not)."""
    return value != value and _PACK(value) == _MISSING_PACKED


class RecordColumns:
    """The records of one rank, in file order, as columns: ``steps`` and ``timestamps`` (None
    where a record has none, as in :class:`Record`) and one list of floats per metric name (names
    in order of first appearance), :data:`MISSING` where a record lacks the metric.

    ``len`` is the number of records; indexing, slicing and iteration build :class:`Record`
    objects (or a sliced copy) on demand.
    """

    __slots__ = ("metrics", "rank", "steps", "timestamps")

    def __init__(
        self,
        rank: int,
        steps: list[int | None] | None = None,
        timestamps: list[float | None] | None = None,
        metrics: dict[str, list[float]] | None = None,
    ) -> None:
        self.rank = rank
        self.steps: list[int | None] = steps if steps is not None else []
        self.timestamps: list[float | None] = timestamps if timestamps is not None else []
        self.metrics: dict[str, list[float]] = metrics if metrics is not None else {}

    @classmethod
    def from_records(cls, records: Sequence[Record], rank: int | None = None) -> RecordColumns:
        """Columns of ``records`` (of one rank: ``rank``, else the first record's)."""
        if rank is None:
            rank = records[0].rank if records else 0
        metrics: dict[str, list[float]] = {}
        for i, record in enumerate(records):
            for name, value in record.metrics.items():
                column = metrics.get(name)
                if column is None:
                    column = metrics[name] = [MISSING] * i
                elif len(column) < i:
                    column.extend([MISSING] * (i - len(column)))
                column.append(value)
        n = len(records)
        for column in metrics.values():
            column.extend([MISSING] * (n - len(column)))
        return cls(rank, [r.step for r in records], [r.timestamp for r in records], metrics)

    def extend(self, other: RecordColumns) -> None:
        """Append ``other``'s records (``other`` is left alone)."""
        n, m = len(self.steps), len(other.steps)
        self.steps.extend(other.steps)
        self.timestamps.extend(other.timestamps)
        for name, column in self.metrics.items():
            more = other.metrics.get(name)
            column.extend([MISSING] * m if more is None else more)
        for name, more in other.metrics.items():
            if name not in self.metrics:
                self.metrics[name] = [MISSING] * n + more

    def __len__(self) -> int:
        return len(self.steps)

    @overload
    def __getitem__(self, i: int) -> Record: ...

    @overload
    def __getitem__(self, i: slice) -> RecordColumns: ...

    def __getitem__(self, i: int | slice) -> Record | RecordColumns:
        if isinstance(i, slice):
            return RecordColumns(
                self.rank,
                self.steps[i],
                self.timestamps[i],
                {name: column[i] for name, column in self.metrics.items()},
            )
        if i < 0:
            i += len(self.steps)
        if not 0 <= i < len(self.steps):
            raise IndexError(i)
        metrics = {}
        for name, column in self.metrics.items():
            value = column[i]
            if not is_missing(value):
                metrics[name] = value
        return Record(self.rank, self.steps[i], self.timestamps[i], metrics)

    def __iter__(self) -> Iterator[Record]:
        return (self[i] for i in range(len(self.steps)))

    def __repr__(self) -> str:
        return f"RecordColumns(rank={self.rank}, records={len(self)}, metrics={list(self.metrics)})"


def columns_by_rank(records: Iterable[Record]) -> dict[int, RecordColumns]:
    """``records`` split by their rank (ranks in order of first appearance), as columns."""
    by_rank: dict[int, list[Record]] = {}
    for record in records:
        by_rank.setdefault(record.rank, []).append(record)
    return {rank: RecordColumns.from_records(recs, rank) for rank, recs in by_rank.items()}


def merge_columns(into: dict[int, RecordColumns], new: Mapping[int, RecordColumns]) -> None:
    """Append ``new`` to ``into`` rank by rank (``new``'s columns may be taken over whole)."""
    for rank, columns in new.items():
        have = into.get(rank)
        if have is None:
            into[rank] = columns
        else:
            have.extend(columns)


@dataclass
class ColumnsResult:
    columns: dict[int, RecordColumns] = field(default_factory=dict)  # by the records' rank
    garbage: int = 0
    consumed: int = 0  # bytes up to and including the last complete line


def parse_columns(data: bytes, default_rank: int = 0) -> ColumnsResult:
    """:func:`runtime.records.parse_chunk` as columns: the same records, garbage count and
    consumed bytes, with ``columns_by_rank(parse_chunk(data).records)`` as the records.

    With orjson the lines are taken a block of about ``_BLOCK`` bytes at a time. A block whose
    records all have this writer's shape (``timestamp``, ``rank``, ``step`` and a flat
    ``metrics`` object of numbers or non-finite strings, nothing else, one rank) becomes columns
    by C-level passes over the parsed block (``map``, ``set``, ``list``), no Python code per
    record. Any other block (a garbage, blank, bare-``NaN`` or odd line, several ranks, ezpz's
    layout) is read record by record exactly as :func:`runtime.records.parse_chunk` reads it.
    """
    result = ColumnsResult()
    end = data.rfind(b"\n")
    if end < 0:
        return result
    result.consumed = end + 1
    pause = end >= _PAUSE_GC_BYTES and gc.isenabled()
    if pause:
        gc.disable()
    try:
        fast = orjson_loads()
        if fast is None:
            parsed = ParseResult()
            parse_lines(data[:end].split(b"\n"), default_rank, parsed, None)
            result.columns, result.garbage = columns_by_rank(parsed.records), parsed.garbage
            return result
        start = 0
        while start <= end:
            stop = data.find(b"\n", start + _BLOCK, end)
            stop = end if stop < 0 else stop
            block = data[start:stop]  # whole lines, without the last one's newline
            start = stop + 1
            columns = _block_columns(fast, block)
            if columns is not None:
                merge_columns(result.columns, {columns.rank: columns})
                continue
            parsed = ParseResult()
            parse_lines(block.split(b"\n"), default_rank, parsed, fast)
            result.garbage += parsed.garbage
            merge_columns(result.columns, columns_by_rank(parsed.records))
    finally:
        if pause:
            gc.enable()
    return result


# Bytes per block: the parsed objects of one block are dropped before the next is parsed, so
# they stay in the CPU's caches (parsing a whole 8 MB chunk first is markedly slower), and an odd
# line sends only its own block down the record-by-record path.
_BLOCK = 128 << 10
_PAUSE_GC_BYTES = 64 << 10
_TIMESTAMP, _RANK, _STEP, _METRICS = map(itemgetter, ("timestamp", "rank", "step", "metrics"))
_FIRST = itemgetter(0)
_NUMBERS = frozenset((float, int, bool))
_VALUES = frozenset((float, int, bool, str))


def _block_columns(loads: Callable[[bytes], Any], block: bytes) -> RecordColumns | None:
    """The columns of the lines of ``block`` when every one is a record of this writer's shape,
    all of one rank; else None.

    Where it is safe the block is parsed by one orjson call, each line wrapped in an array of
    its own: ``[[line 1\\n],[line 2\\n],...]``. With no ``[`` or ``]`` in the block, and no
    string able to run past the end of its line (JSON strings cannot hold a raw newline), the
    brackets are exactly the ones added: an object cannot run into the next line, and the i-th
    inner array holds the values on line i. When each holds one, the line is that one value,
    which is what orjson makes of the line alone. A fast-shape line has at least two ``{``, so a
    block of n lines with at most ``2 * n + DEEP - 3`` of them has no line that :func:`is_deep`
    would send to json. Otherwise each line is parsed on its own, as ``parse_chunk`` does.
    """
    objects: Any = None
    if b"[" not in block and b"]" not in block:
        try:
            wrapped = loads(b"[[" + block.replace(b"\n", b"\n],[") + b"\n]]")
        except ValueError:
            return None  # a line orjson refuses (garbage, bare NaN...): record by record
        if set(map(len, wrapped)) != {1}:
            return None  # a blank line, or several values on one
        objects = list(map(_FIRST, wrapped))
        if block.count(b"{") > 2 * len(objects) + DEEP - 3:
            objects = None
    if objects is None:
        lines = block.split(b"\n")
        if max(map(len, lines)) >= DEEP_LEN and any(map(is_deep, lines)):
            return None
        try:
            objects = list(map(loads, lines))
        except ValueError:
            return None
    try:
        return _object_columns(objects)
    except (KeyError, TypeError):  # not a dict, a key missing, a value of another kind
        return None


def _object_columns(objects: list[Any]) -> RecordColumns | None:
    """What :func:`~runtime.records.decode` makes of each of ``objects``, as columns, when each
    is a dict with exactly this writer's four keys, an int rank (all the same) and step, a
    number timestamp and a flat dict of numbers (or non-finite strings) under the same names;
    else None (or KeyError/TypeError). Each line below is a C-level pass or two."""
    if set(map(len, objects)) != {4}:
        return None
    ranks = list(map(_RANK, objects))
    steps = list(map(_STEP, objects))
    stamps = list(map(_TIMESTAMP, objects))
    metrics = list(map(_METRICS, objects))
    # rank and step: exactly int (orjson gives a float past 64 bits, json an int: such a line
    # is re-read with json by the record reader), never a bool
    if set(map(type, ranks)) != {int} or len(set(ranks)) != 1 or set(map(type, steps)) != {int}:
        return None
    kinds = set(map(type, stamps))
    if kinds != {float}:
        if not kinds <= {float, int}:  # a str, bool or null timestamp: no timestamp
            return None
        stamps = list(map(float, stamps))  # ints from orjson fit 64 bits: float() cannot overflow
    first = metrics[0]
    if type(first) is not dict or not first:
        return None
    names = tuple(first)
    if set(map(len, metrics)) != {len(names)}:  # with every name present, the same names
        return None
    columns = {}
    for name in names:
        column = list(map(itemgetter(name), metrics))  # KeyError, TypeError: not those names
        kinds = set(map(type, column))
        if kinds != {float}:
            if kinds <= _NUMBERS:
                column = list(map(float, column))  # as decode and as_number convert them
            elif kinds <= _VALUES:  # NaN, Infinity and -Infinity; any other str: KeyError
                column = [NONFINITE_STRINGS[v] if type(v) is str else float(v) for v in column]
            else:
                return None
        columns[name] = column
    return RecordColumns(ranks[0], steps, stamps, columns)
