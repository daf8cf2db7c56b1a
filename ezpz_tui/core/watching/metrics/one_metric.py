"""One metric of a run, read for ``ezpz-tui plot``, with every value it could not draw explained.

The shared readers (:mod:`runtime.records`) keep what is numeric and drop the rest quietly,
which is right for a live view but leaves a person asking "why is my metric not there?". This
reader looks at the raw value of the one metric asked for in every record and sorts it: a
finite number is drawn; ``NaN`` and the infinities (as the strings the writer uses, or the bare
``NaN``/``Infinity`` Python's json writes) are counted as non-finite; ``true``/``false`` are
drawn as 1/0; text, lists, null and tables are counted by kind. Rank and step come from
:func:`runtime.records.from_object`, so records are placed as the other views place them
(records without a step are numbered per rank in file order). Never raises on what a file holds.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.unreadable import unreadable
from ezpz_tui.core.watching.metrics.aggregated import folded
from runtime import records
from runtime.metric_files import metric_files

_BOOKKEEPING = ("timestamp", "rank")
_MISSING: Any = object()


@dataclass
class MetricSeries:
    """The drawable values of one metric by step, and counts of everything else."""

    name: str
    values: dict[int, list[float]] = field(default_factory=dict)  # step -> one per record
    ranks: set[int] = field(default_factory=set)
    nonfinite: int = 0
    not_numbers: Counter[str] = field(default_factory=Counter)  # kind -> count
    booleans: int = 0
    unnumbered: int = 0
    garbage: int = 0
    unreadable: list[str] = field(default_factory=list)  # files that could not be read, why
    seen: int = 0  # records holding the metric at all
    metrics: set[str] = field(default_factory=set)  # every metric name met, in any record

    def add(self, step: int, rank: int, value: float) -> None:
        self.values.setdefault(step, []).append(value)
        self.ranks.add(rank)

    def span(self) -> tuple[float, float]:
        """The smallest and largest value drawn."""
        every = [v for column in self.values.values() for v in column]
        return (min(every), max(every)) if every else (math.nan, math.nan)

    def subnames(self) -> list[str]:
        """The metrics under ``name`` when it is a table of metrics (``opt/lr``...)."""
        return sorted(m for m in self.metrics if m.startswith(f"{self.name}/"))

    def why_nothing(self, run: str) -> str:
        """Why there is no line to draw: the metric is absent, a table, or has no number."""
        if self.subnames():
            return f"{self.name} in {run} is a table; metrics in it: {', '.join(self.subnames())}"
        if self.seen:
            return f"no value of {self.name} in {run} is a finite number"
        known = ", ".join(sorted(folded(self.metrics))) or "none"  # ezpz's statistics: bands
        return f"no metric {self.name!r} in {run}; metrics: {known}"

    def notes(self) -> list[str]:
        """One sentence per kind of value that was not drawn as read, for the user."""
        out = []
        if self.nonfinite:
            out.append(f"{_count(self.nonfinite, 'non-finite value')} of {self.name} skipped")
        if self.not_numbers:
            kinds = ", ".join(f"{kind}: {n}" for kind, n in sorted(self.not_numbers.items()))
            total = sum(self.not_numbers.values())
            out.append(f"{_count(total, 'value')} of {self.name} skipped: not numbers ({kinds})")
        if self.booleans:
            out.append(f"{_count(self.booleans, 'true/false value')} of {self.name} drawn as 1/0")
        if self.unnumbered:
            out.append(f"{_count(self.unnumbered, 'record')} without a step numbered in order")
        if self.garbage:
            out.append(f"{_count(self.garbage, 'unreadable line')} skipped")
        return out + self.unreadable


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "table"
    return type(value).__name__


def _flat_raw(obj: dict[str, Any]) -> dict[str, Any]:
    """Every metric of a record by its flattened name (``a/b``), values as written; tables
    appear under their own name too, so asking for one can be answered."""
    metrics = obj.get("metrics")
    source = (
        metrics
        if isinstance(metrics, dict)
        else {k: v for k, v in obj.items() if k not in _BOOKKEEPING}
    )
    out: dict[str, Any] = {}
    _walk("", source, out)
    aggregated = obj.get("aggregated")
    if isinstance(aggregated, dict):
        _walk("aggregated/", aggregated, out)
    return out


def _walk(prefix: str, table: dict[str, Any], out: dict[str, Any]) -> None:
    for key, value in table.items():
        out[f"{prefix}{key}"] = value
        if isinstance(value, dict):
            _walk(f"{prefix}{key}/", value, out)


def _place(obj: dict[str, Any], default_rank: int) -> tuple[int, int | None]:
    """The record's rank and step as the shared reader gives them."""
    record = records.from_object(obj, default_rank)
    if record is not None:
        return record.rank, record.step
    rank, step = obj.get("rank"), obj.get("step")
    return (
        rank if type(rank) is int else default_rank,
        step if type(step) is int else None,
    )


def _lines(path: Path) -> list[bytes] | None:
    """The file's lines, None when it cannot be read. A last line without its newline is kept
    when it is complete JSON (a finished file) and left out otherwise: a live rank is still
    writing it, it is not garbage."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    lines = data.split(b"\n")
    last = lines.pop()
    if last.strip():
        try:
            json.loads(last)
        except (ValueError, RecursionError):
            pass
        else:
            lines.append(last)
    return [line for line in lines if line.strip()]


def _sort(series: MetricSeries, raw: Any, step: int, rank: int) -> None:
    """Count ``raw`` into ``series``: drawn, non-finite, or not a number."""
    series.seen += 1
    if isinstance(raw, bool):
        series.booleans += 1
        series.add(step, rank, float(raw))
        return
    number = records.as_number(raw) if isinstance(raw, (int, float, str)) else None
    if number is None:
        series.not_numbers[_kind(raw)] += 1
    elif not math.isfinite(number):
        series.nonfinite += 1
    else:
        series.add(step, rank, number)


def read_metric(
    run_dir: str | os.PathLike[str], name: str, rank: int | None = None
) -> MetricSeries:
    """Every value of metric ``name`` in the run's metric files (of ``rank`` alone when given),
    sorted as the module says."""
    series = MetricSeries(name)
    for path, file_rank in metric_files(run_dir):
        counters: dict[int, int] = {}
        lines = _lines(path)
        if lines is None:
            said = unreadable(Path(run_dir), path)
            series.unreadable.append(said or f"{path.name} cannot be read")
            continue
        for line in lines:
            try:
                obj = json.loads(line)
                flat = _flat_raw(obj) if isinstance(obj, dict) else None
            except (ValueError, RecursionError):
                flat = None
            if not flat:
                series.garbage += 1
                continue
            of, step = _place(obj, file_rank)
            order = counters.get(of, 0)
            counters[of] = order + 1
            series.metrics.update(k for k, v in flat.items() if not isinstance(v, dict))
            raw = flat.get(name, _MISSING)
            if raw is _MISSING or (rank is not None and of != rank):
                continue
            if step is None:
                series.unnumbered += 1
                step = order
            _sort(series, raw, step, of)
    return series
