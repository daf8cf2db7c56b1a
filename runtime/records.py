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
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        return _NONFINITE_IN.get(value)
    return None


def _flatten(prefix: str, obj: Mapping[str, Any], out: dict[str, float]) -> None:
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            _flatten(f"{name}/", value, out)
            continue
        number = as_number(value)
        if number is not None:
            out[name] = number


def decode(line: bytes | str, default_rank: int = 0) -> Record | None:
    """Parse one line; ``None`` when it is not a record (the caller counts it as garbage)."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    metrics_obj = obj.get("metrics")
    metrics: dict[str, float] = {}
    if isinstance(metrics_obj, Mapping):
        _flatten("", metrics_obj, metrics)
    else:  # a flat record: every numeric top-level key but the bookkeeping ones is a metric
        _flatten("", {k: v for k, v in obj.items() if k not in ("timestamp", "rank")}, metrics)
    aggregated = obj.get("aggregated")
    if isinstance(aggregated, Mapping):
        _flatten("aggregated/", aggregated, metrics)
    if not metrics:
        return None
    rank = obj.get("rank", default_rank)
    rank = rank if isinstance(rank, int) and not isinstance(rank, bool) else default_rank
    step = obj.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        step = next((int(metrics[k]) for k in _STEP_KEYS if _finite(metrics.get(k))), None)
    stamp = obj.get("timestamp")
    stamp = (
        float(stamp) if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else None
    )
    return Record(rank, step, stamp, metrics)


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


@dataclass
class ParseResult:
    records: list[Record] = field(default_factory=list)
    garbage: int = 0
    consumed: int = 0  # bytes up to and including the last complete line


def parse_chunk(data: bytes, default_rank: int = 0) -> ParseResult:
    """Records from the complete lines of ``data``; a trailing partial line is not consumed."""
    result = ParseResult()
    end = data.rfind(b"\n")
    if end < 0:
        return result
    result.consumed = end + 1
    for line in data[: end + 1].splitlines():
        if not line.strip():
            continue
        record = decode(line, default_rank)
        if record is None:
            result.garbage += 1
        else:
            result.records.append(record)
    return result


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
