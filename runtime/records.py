"""The metric record on disk: one JSON object per line (DESIGN.md section 3).

Writer and readers live together so the encoding of non-finite numbers has one definition.
NaN and the infinities are written as the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``:
strict JSON parsers (jq, browsers, Go) reject bare ``NaN``, and a loss that turns NaN is exactly
what the user must see, so dropping it or writing ``null`` would lose the signal.

Readers accept ezpz's own files too: no ``step`` key, an optional ``aggregated`` object, several
ranks sharing one ``metrics.jsonl``. They never raise: a torn last line is left for the next read
and a garbage line is counted and skipped.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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


@dataclass
class Record:
    rank: int
    step: int | None  # None for ezpz records without a step; readers number them per rank
    timestamp: float | None
    metrics: dict[str, float]


def as_number(value: Any) -> float | None:
    kind = type(value)
    if kind is float or kind is int or kind is bool:
        return float(value)
    if kind is str:
        return _NONFINITE_IN.get(value)
    if isinstance(value, (int, float)):  # subclasses, rare
        return float(value)
    return None


def _flatten(prefix: str, obj: Mapping[str, Any], out: dict[str, float]) -> None:
    for key, value in obj.items():
        kind = type(value)
        if kind is float or kind is int:  # the common case, without the generic checks
            out[f"{prefix}{key}"] = float(value)
        elif kind is dict or isinstance(value, Mapping):
            _flatten(f"{prefix}{key}/", value, out)
        else:
            number = as_number(value)
            if number is not None:
                out[f"{prefix}{key}"] = number


def decode(line: bytes | str, default_rank: int = 0) -> Record | None:
    """Parse one line; ``None`` when it is not a record (the caller counts it as garbage)."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return from_object(obj, default_rank)


def from_object(obj: Any, default_rank: int = 0) -> Record | None:
    """A record from one parsed JSON value; ``None`` when it is not one."""
    if type(obj) is not dict:
        return None
    metrics_obj = obj.get("metrics")
    metrics: dict[str, float] = {}
    if type(metrics_obj) is dict:
        _flatten("", metrics_obj, metrics)
    else:  # a flat record: every numeric top-level key but the bookkeeping ones is a metric
        _flatten("", {k: v for k, v in obj.items() if k not in ("timestamp", "rank")}, metrics)
    aggregated = obj.get("aggregated")
    if type(aggregated) is dict:
        _flatten("aggregated/", aggregated, metrics)
    if not metrics:
        return None
    rank = obj.get("rank", default_rank)
    rank = rank if type(rank) is int else default_rank
    step = obj.get("step")
    if type(step) is not int:
        step = next((int(metrics[k]) for k in _STEP_KEYS if _finite(metrics.get(k))), None)
    stamp = obj.get("timestamp")
    stamp = float(stamp) if type(stamp) in (int, float) else None
    return Record(rank, step, stamp, metrics)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


@dataclass
class ParseResult:
    records: list[Record] = field(default_factory=list)
    garbage: int = 0
    consumed: int = 0  # bytes up to and including the last complete line


def parse_chunk(data: bytes, default_rank: int = 0) -> ParseResult:
    """Records from the complete lines of ``data``; a trailing partial line is not consumed.

    The lines are parsed as one JSON array when every one looks like an object (one C-level
    parse instead of one per line, about twice the throughput); any doubt, a garbage line or a
    count that does not match, falls back to line by line so the result is always the same.
    """
    result = ParseResult()
    end = data.rfind(b"\n")
    if end < 0:
        return result
    result.consumed = end + 1
    lines = [line for line in data[: end + 1].split(b"\n") if line.strip()]
    objects = _parse_as_array(lines)
    if objects is None:
        objects = [_loads_or_none(line) for line in lines]
    for obj in objects:
        record = from_object(obj, default_rank)
        if record is None:
            result.garbage += 1
        else:
            result.records.append(record)
    return result


def _parse_as_array(lines: list[bytes]) -> list[Any] | None:
    if not all(line.lstrip()[:1] == b"{" and line.rstrip()[-1:] == b"}" for line in lines):
        return None
    try:
        objects = json.loads(b"[" + b",".join(lines) + b"]")
    except (ValueError, RecursionError):
        return None
    return objects if len(objects) == len(lines) else None


def _loads_or_none(line: bytes) -> Any:
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
