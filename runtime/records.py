"""The metric record on disk: one JSON object per line (DESIGN.md section 3).

Writer and readers live together so the encoding of non-finite numbers has one definition.
NaN and the infinities are written as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``:
strict JSON parsers (jq, browsers, Go) reject bare ``NaN``, and a loss that turns NaN is exactly
what the user must see, so dropping it or writing ``null`` would lose the signal.

Readers accept ezpz's own files too: no ``step`` key, an optional ``aggregated`` object, several
ranks sharing one ``metrics.jsonl``. They never raise: a torn last line is left for the next read
and a garbage line is counted and skipped. They parse with orjson where it can be imported (on the
first read, not with this module) and give exactly what json alone gives; without it, json.

Two forms of the same reading: :func:`parse_chunk` gives one :class:`Record` per line, and
:func:`parse_columns` gives the records of each rank as :class:`RecordColumns` (one list per field
and per metric), which a live follower needs: a Python object per record costs more than parsing
it, and the metric store keeps columns anyway.
"""

from __future__ import annotations

import gc
import json
import math
import struct
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, overload

_NONFINITE_OUT = {math.inf: "Infinity", -math.inf: "-Infinity"}
_NONFINITE_IN = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_STEP_KEYS = ("step", "iter", "iteration", "global_step")


def to_plain(value: Any) -> Any:
    """A JSON-ready scalar from floats, ints, bools, numpy scalars and 0-d tensors."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else _NONFINITE_OUT[value]
    item = getattr(value, "item", None)
    if item is not None:  # numpy scalar or 0-d torch tensor
        try:
            return to_plain(item())
        except (TypeError, ValueError, RuntimeError):
            pass
    try:
        return to_plain(float(value))
    except (TypeError, ValueError):
        return str(value)


def encode(rank: int, step: int, metrics: Mapping[str, Any], timestamp: float) -> bytes:
    """One newline-terminated UTF-8 record; ``metrics`` values already passed through to_plain."""
    record = {"timestamp": timestamp, "rank": rank, "step": step, "metrics": metrics}
    return (json.dumps(record, allow_nan=False, separators=(",", ":")) + "\n").encode()


@dataclass(slots=True)
class Record:
    rank: int
    step: int | None  # None for ezpz records without a step; readers number them per rank
    timestamp: float | None
    metrics: dict[str, float]


def as_number(value: Any) -> float | None:
    kind = type(value)
    if kind is float or kind is bool:
        return float(value)
    if kind is int:
        return _int_to_float(value)
    if kind is str:
        return _NONFINITE_IN.get(value)
    if isinstance(value, (int, float)):  # subclasses, rare
        return _int_to_float(value) if isinstance(value, int) else float(value)
    return None


def _int_to_float(value: int) -> float:
    """``float(value)``, except that an int past the float range reads as an infinity, as a
    JSON literal such as ``1e400`` does, instead of raising ``OverflowError``."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _flattened(obj: Mapping[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    _flatten("", obj, out)
    return out


def _flatten(prefix: str, obj: Mapping[str, Any], out: dict[str, float]) -> None:
    for key, value in obj.items():
        kind = type(value)
        if kind is float:  # the common case, without the generic checks
            out[f"{prefix}{key}"] = value
        elif kind is int:
            out[f"{prefix}{key}"] = _int_to_float(value)
        elif kind is dict or isinstance(value, Mapping):
            _flatten(f"{prefix}{key}/", value, out)
        else:
            number = as_number(value)
            if number is not None:
                out[f"{prefix}{key}"] = number


# orjson, when this Python has it, is imported on the first read rather than with this module:
# every training rank imports the writer, and the writer does not need it.
_UNRESOLVED: Any = object()
_fast_loads: Any = _UNRESOLVED


def _resolve_fast_loads() -> Callable[[bytes], Any] | None:
    global _fast_loads
    if _fast_loads is _UNRESOLVED:
        try:
            import orjson
        except ImportError:
            _fast_loads = None
        else:
            _fast_loads = orjson.loads
    return _fast_loads


# orjson reads an integer outside [-2**63, 2**64) as a float where json keeps the int; that only
# changes the result for ``rank`` and ``step`` (metric values become floats anyway), so a record
# whose rank or step is a float this large is re-read with json.
_INT_LIMIT = 2.0**63
# Nesting: orjson accepts 1024 levels; json stops at the recursion limit (less the caller's
# stack) and the line is garbage. A line with this many opening brackets goes to json, so the
# two readers agree; only lines at least twice this long are looked at.
_DEEP = 400
_DEEP_LEN = 2 * _DEEP
_INEXACT: Any = object()  # "re-read this line with json"


def decode(line: bytes | str, default_rank: int = 0) -> Record | None:
    """Parse one line; ``None`` when it is not a record (the caller counts it as garbage)."""
    fast = _resolve_fast_loads()
    if fast is not None and not _deep(line):
        try:
            obj = fast(line)
        except ValueError:  # orjson.JSONDecodeError: bare NaN, 1e400, a BOM... or garbage
            pass
        else:
            record = _record(obj, default_rank, True, False)
            if record is not _INEXACT:
                return record
    return _record(_json_or_none(line), default_rank, True, True)


def from_object(obj: Any, default_rank: int = 0) -> Record | None:
    """A record from one value parsed by json; ``None`` when it is not one.

    ``obj`` is not modified and the record shares no mutable object with it.
    """
    return _record(obj, default_rank, False, True)


def _record(obj: Any, default_rank: int, owned: bool, exact: bool) -> Any:
    """``from_object``; ``owned``: ``obj`` is this reader's to reuse; ``exact``: it comes from
    json, not orjson. Returns ``_INEXACT`` when orjson may have changed the rank or step."""
    if type(obj) is not dict:
        return None
    metrics = obj.get("metrics")
    try:
        if type(metrics) is dict:
            if not owned:
                metrics = dict(metrics)
            # The usual flat dict of numbers is converted in place, one cheap step per metric.
            # Anything else goes to _flatten, which gives the same keys, order and values for
            # the part already converted here.
            try:
                for key, value in metrics.items():
                    kind = type(value)
                    if kind is not float:
                        if kind is not int:
                            metrics = _flattened(metrics)
                            break
                        metrics[key] = float(value)
            except OverflowError:  # an int past the float range
                metrics = _flattened(metrics)
        else:  # a flat record: every numeric top-level key but the bookkeeping ones is a metric
            metrics = _flattened({k: v for k, v in obj.items() if k not in ("timestamp", "rank")})
        aggregated = obj.get("aggregated")
        if type(aggregated) is dict:
            _flatten("aggregated/", aggregated, metrics)
    except RecursionError:  # absurdly nested metrics: garbage, like a line json cannot parse
        return None
    if not metrics:
        return None
    rank = obj.get("rank", default_rank)
    if type(rank) is not int:
        if not exact and type(rank) is float and abs(rank) >= _INT_LIMIT:
            return _INEXACT
        rank = default_rank
    step = obj.get("step")
    if type(step) is not int:
        if not exact and type(step) is float and abs(step) >= _INT_LIMIT:
            return _INEXACT
        step = None
        for key in _STEP_KEYS:
            value = metrics.get(key)
            if value is not None and math.isfinite(value):
                step = int(value)
                break
    stamp = obj.get("timestamp")
    kind = type(stamp)
    if kind is not float:
        stamp = _int_to_float(stamp) if kind is int else None
    return Record(rank, step, stamp, metrics)


@dataclass
class ParseResult:
    records: list[Record] = field(default_factory=list)
    garbage: int = 0
    consumed: int = 0  # bytes up to and including the last complete line


def parse_chunk(data: bytes, default_rank: int = 0) -> ParseResult:
    """Records from the complete lines of ``data``; a trailing partial line is not consumed.

    Blank lines are skipped; every other line that is not a record counts as garbage. With
    orjson each line is parsed by it, and re-parsed by json where orjson refuses (bare ``NaN``,
    ``1e400``, a BOM, lone surrogates, garbage) or may differ (huge ints, deep nesting), so the
    result is the same as with json alone.
    """
    result = ParseResult()
    end = data.rfind(b"\n")
    if end < 0:
        return result
    result.consumed = end + 1
    lines = data.split(b"\n")
    lines.pop()  # the part after the last newline: empty, or a torn line for the next read
    # The records are acyclic, so the cyclic collector is paused while a large chunk is parsed:
    # otherwise it scans the young records over and over, a third of the time or more.
    pause = len(lines) >= _PAUSE_GC_LINES and gc.isenabled()
    if pause:
        gc.disable()
    try:
        fast = _resolve_fast_loads()
        if fast is None:
            _parse_lines_json(lines, default_rank, result)
        else:
            _parse_lines_fast(fast, lines, default_rank, result)
    finally:
        if pause:
            gc.enable()
    return result


_PAUSE_GC_LINES = 1000


def _parse_lines_fast(
    loads: Callable[[bytes], Any], lines: list[bytes], default_rank: int, result: ParseResult
) -> None:
    out = result.records
    garbage = 0
    record: Any
    for line in lines:
        try:
            obj = loads(line)
        except ValueError:  # orjson.JSONDecodeError
            if not line.strip():
                continue
            record = _record(_json_or_none(line), default_rank, True, True)
        else:
            if len(line) >= _DEEP_LEN and _deep(line):
                record = _record(_json_or_none(line), default_rank, True, True)
            else:
                record = _record(obj, default_rank, True, False)
                if record is _INEXACT:
                    record = _record(_json_or_none(line), default_rank, True, True)
        if record is None:
            garbage += 1
        else:
            out.append(record)
    result.garbage = garbage


def _deep(line: bytes | str) -> bool:
    if len(line) < _DEEP_LEN:
        return False
    if isinstance(line, str):
        return line.count("[") + line.count("{") >= _DEEP
    return line.count(b"[") + line.count(b"{") >= _DEEP


def _parse_lines_json(lines: list[bytes], default_rank: int, result: ParseResult) -> None:
    """The reader without orjson. The lines are parsed as one JSON array when every one looks
    like an object (one C-level parse instead of one per line, about twice the throughput); any
    doubt, a garbage line or a count that does not match, falls back to line by line."""
    lines = [line for line in lines if line.strip()]
    objects = _parse_as_array(lines)
    if objects is None:
        objects = [_json_or_none(line) for line in lines]
    for obj in objects:
        record = _record(obj, default_rank, True, True)
        if record is None:
            result.garbage += 1
        else:
            result.records.append(record)


def _parse_as_array(lines: list[bytes]) -> list[Any] | None:
    if not all(line.lstrip()[:1] == b"{" and line.rstrip()[-1:] == b"}" for line in lines):
        return None
    try:
        objects = json.loads(b"[" + b",".join(lines) + b"]")
    except (ValueError, RecursionError):
        return None
    return objects if len(objects) == len(lines) else None


def _json_or_none(line: bytes | str) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


# --- columns ----------------------------------------------------------------------------------

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
    """:func:`parse_chunk` as columns: the same records, garbage count and consumed bytes, with
    ``columns_by_rank(parse_chunk(data).records)`` as the records.

    With orjson the lines are taken a block of about ``_BLOCK`` bytes at a time. A block whose
    records all have this writer's shape (``timestamp``, ``rank``, ``step`` and a flat
    ``metrics`` object of numbers or non-finite strings, nothing else, one rank) becomes columns
    by C-level passes over the parsed block (``map``, ``set``, ``list``), no Python code per
    record. Any other block (a garbage, blank, bare-``NaN`` or odd line, several ranks, ezpz's
    layout) is read record by record exactly as :func:`parse_chunk` reads it.
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
        fast = _resolve_fast_loads()
        if fast is None:
            parsed = ParseResult()
            _parse_lines_json(data[:end].split(b"\n"), default_rank, parsed)
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
            _parse_lines_fast(fast, block.split(b"\n"), default_rank, parsed)
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
    block of n lines with at most ``2 * n + _DEEP - 3`` of them has no line that :func:`_deep`
    would send to json. Otherwise each line is parsed on its own, as :func:`parse_chunk` does.
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
        if block.count(b"{") > 2 * len(objects) + _DEEP - 3:
            objects = None
    if objects is None:
        lines = block.split(b"\n")
        if max(map(len, lines)) >= _DEEP_LEN and any(map(_deep, lines)):
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
    """What :func:`_record` makes of each of ``objects``, as columns, when each is a dict with
    exactly this writer's four keys, an int rank (all the same) and step, a number timestamp and
    a flat dict of numbers (or non-finite strings) under the same names; else None (or
    KeyError/TypeError). Each line below is a C-level pass or two."""
    if set(map(len, objects)) != {4}:
        return None
    ranks = list(map(_RANK, objects))
    steps = list(map(_STEP, objects))
    stamps = list(map(_TIMESTAMP, objects))
    metrics = list(map(_METRICS, objects))
    # rank and step: exactly int (orjson gives a float past 64 bits, json an int: such a line
    # is re-read with json by _record), never a bool
    if set(map(type, ranks)) != {int} or len(set(ranks)) != 1 or set(map(type, steps)) != {int}:
        return None
    kinds = set(map(type, stamps))
    if kinds != {float}:
        if not kinds <= {float, int}:  # a str, bool or null timestamp: no timestamp
            return None
        stamps = list(map(float, stamps))  # ints from orjson fit 64 bits: _int_to_float
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
                column = list(map(float, column))  # as _record and as_number convert them
            elif kinds <= _VALUES:  # NaN, Infinity and -Infinity; any other str: KeyError
                column = [_NONFINITE_IN[v] if type(v) is str else float(v) for v in column]
            else:
                return None
        columns[name] = column
    return RecordColumns(ranks[0], steps, stamps, columns)


def number_steps(records: Iterable[Record]) -> list[Record]:
    """Give step-less records (ezpz's) their per-rank sequence number as step."""
    counters: dict[int, int] = {}
    out = []
    for record in records:
        n = counters.get(record.rank, 0)
        counters[record.rank] = n + 1
        if record.step is None:
            record.step = n
        out.append(record)
    return out
