"""The metric record on disk: one JSON object per line (docs/run-directory.md).

Writer and readers live together so the encoding of non-finite numbers has one definition.
NaN and the infinities are written as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``:
strict JSON parsers (jq, browsers, Go) reject bare ``NaN``, and a loss that turns NaN is exactly
what the user must see, so dropping it or writing ``null`` would lose the signal.

Readers accept ezpz's own files too: no ``step`` key, an optional ``aggregated`` object, several
ranks sharing one ``metrics.jsonl``. They never raise: a torn last line is left for the next read
and a garbage line is counted and skipped. They parse with orjson where it can be imported (on the
first read, not with this module) and give exactly what json alone gives; without it, json.

:func:`parse_chunk` gives one :class:`Record` per line; :mod:`runtime.record_columns` reads the
same lines as columns, for the live follower, and shares this module's fallbacks so the two forms
never disagree.
"""

from __future__ import annotations

import gc
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

_NONFINITE_OUT = {math.inf: "Infinity", -math.inf: "-Infinity"}
NONFINITE_STRINGS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
"""How the writer spells non-finite numbers, and what each string reads back as."""
_STEP_KEYS = ("step", "iter", "iteration", "global_step")
_UNRESOLVED: Any = object()
_fast_dumps: Any = _UNRESOLVED  # orjson.dumps once looked up; None without orjson
_APPEND_NEWLINE = 0


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


# Made once: json.dumps with arguments builds a new encoder on every call, a third of a record.
_ENCODE = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode


def encode(rank: int, step: int, metrics: Mapping[str, Any], timestamp: float) -> bytes:
    """One newline-terminated UTF-8 record; ``metrics`` values already passed through to_plain.

    orjson writes it where installed (imported at the first record, not with this module): a
    fifth of json's time, and the encoding is most of what a record costs the training step.
    What it refuses (an int past 64 bits, a float subclass such as numpy's) json writes.
    """
    record = {"timestamp": timestamp, "rank": rank, "step": step, "metrics": metrics}
    fast = _fast_dumps if _fast_dumps is not _UNRESOLVED else _orjson_dumps()
    if fast is not None:
        try:
            return fast(record, option=_APPEND_NEWLINE)
        except TypeError:
            pass
    return (_ENCODE(record) + "\n").encode()


def _orjson_dumps() -> Callable[..., bytes] | None:
    global _fast_dumps, _APPEND_NEWLINE
    try:
        import orjson
    except ImportError:
        _fast_dumps = None
    else:
        _fast_dumps, _APPEND_NEWLINE = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    return _fast_dumps


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
        return NONFINITE_STRINGS.get(value)
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
_fast_loads: Any = _UNRESOLVED


def orjson_loads() -> Callable[[bytes], Any] | None:
    """``orjson.loads``, imported on the first call; None where orjson is not installed."""
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
DEEP = 400
DEEP_LEN = 2 * DEEP
_INEXACT: Any = object()  # "re-read this line with json"


def decode(line: bytes | str, default_rank: int = 0) -> Record | None:
    """Parse one line; ``None`` when it is not a record (the caller counts it as garbage)."""
    fast = orjson_loads()
    if fast is not None and not is_deep(line):
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
        parse_lines(lines, default_rank, result, orjson_loads())
    finally:
        if pause:
            gc.enable()
    return result


_PAUSE_GC_LINES = 1000


def parse_lines(
    lines: list[bytes],
    default_rank: int,
    result: ParseResult,
    loads: Callable[[bytes], Any] | None,
) -> None:
    """Append the records of ``lines`` (without their newlines) to ``result`` and count the
    garbage: with orjson's ``loads`` (json where it refuses or may differ), or json alone."""
    if loads is None:
        _parse_lines_json(lines, default_rank, result)
    else:
        _parse_lines_fast(loads, lines, default_rank, result)


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
            if len(line) >= DEEP_LEN and is_deep(line):
                record = _record(_json_or_none(line), default_rank, True, True)
            else:
                record = _record(obj, default_rank, True, False)
                if record is _INEXACT:
                    record = _record(_json_or_none(line), default_rank, True, True)
        if record is None:
            garbage += 1
        else:
            out.append(record)
    result.garbage += garbage


def is_deep(line: bytes | str) -> bool:
    """Whether ``line`` may nest deeper than json can read (so orjson's reading is not used)."""
    if len(line) < DEEP_LEN:
        return False
    if isinstance(line, str):
        return line.count("[") + line.count("{") >= DEEP
    return line.count(b"[") + line.count(b"{") >= DEEP


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
