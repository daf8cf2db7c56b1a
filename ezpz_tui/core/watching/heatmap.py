"""A whole job at a glance: each rank one cell of a host x local-rank grid, coloured by a figure.

At scale the question is "which rank, which node is slow, hot or full". This module decides,
without a terminal, everything the heatmap widget shows:

- :data:`FIGURES`: what the cells can be coloured by, each with a unit and the end that is bad;
- :func:`layout_grid`: one row per host (hosts in the order of their lowest rank, columns = local
  ranks, gaps where a host lacks one), and rows of a fixed width, labelled by their first rank,
  for ranks whose host is not known or for a host with more ranks than fit;
- :class:`Scale`: a value to one of a few colour buckets, oriented so the bad end is always the
  hot one, whatever the figure;
- :func:`summarize`: the legend's numbers: min / median / max with the ranks at the ends, and the
  host whose median is worst against the typical host's.

The widget calls :meth:`Scale.bucket` only for the cells on screen, so a repaint costs the visible
rows however many ranks the job has; the rest here is linear in the ranks (a sort for medians).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from ezpz_tui.core.runs.hosts import short_host

BUCKETS = 8
"""Colour steps of the scale: enough to see a gradient, few enough to tell apart at a glance."""

Values = Mapping[int, "float | None"]
"""One figure's latest value per rank; ``None`` (or a missing rank) means no data yet."""


def _seconds(value: float) -> str:
    return f"{value:.3g} s"


def _rate(value: float) -> str:
    """Tokens per second with an SI prefix: 12.3k, 1.05M."""
    for prefix, size in (("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g}{prefix} tok/s"
    return f"{value:.3g} tok/s"


def _milliseconds(value: float) -> str:
    return f"{value * 1000:.3g} ms"


def _percent(value: float) -> str:
    return f"{value:.0f} %"


def _share(fraction: float) -> str:
    """MFU, a fraction, in percent with the digits a small one needs: 41.2 %, 0.37 %."""
    pct = fraction * 100
    return f"{pct:.3g} %" if pct >= 1 else f"{pct:.2g} %"


@dataclass(frozen=True)
class Figure:
    """A per-rank number the cells can be coloured by.

    ``high_is_bad`` orients the colours: a long step time is bad, a low token rate is. ``fixed``
    pins the scale (0..100 for a share of a device), so a job at 40 % memory everywhere does not
    look as full as one at 99 %; without it the scale spans the values seen.
    """

    key: str
    label: str
    format: Callable[[float], str]
    high_is_bad: bool
    fixed: tuple[float, float] | None = None


FIGURES: tuple[Figure, ...] = (
    Figure("step_time", "step time", _seconds, high_is_bad=True),
    Figure("tokens_per_s", "tokens/s", _rate, high_is_bad=False),
    # A rank's model FLOPs utilisation: the share of its device's peak the model's work uses.
    Figure("mfu", "MFU", _share, high_is_bad=False),
    # An accelerator left idle (data-starved, stuck) is what to find, so low is the hot end.
    Figure("util_pct", "util %", _percent, high_is_bad=False, fixed=(0.0, 100.0)),
    Figure("mem_pct", "mem %", _percent, high_is_bad=True, fixed=(0.0, 100.0)),
    # Percent of one core (a rank on four threads reads 400), so the scale follows the values.
    Figure("cpu_pct", "cpu %", _percent, high_is_bad=True),
    # After the median rank at the same collectives (the Flight Recorder's call times): the
    # straggler everyone waits for is the hot end, whatever its own step time.
    Figure("arrival_lag", "arrival lag", _milliseconds, high_is_bad=True),
)
"""Every figure, in the order ``o`` cycles through them. Keys match the telemetry record's field
names (``util_pct``, ``mem_pct``, ``cpu_pct``), the metrics' step time and token rate, and the
arrival lag of :func:`~ezpz_tui.core.watching.collectives.arrival_lags`."""

FIGURE_KEYS: tuple[str, ...] = tuple(f.key for f in FIGURES)


def figure(key: str) -> Figure:
    """The figure called ``key``; KeyError if there is none."""
    for candidate in FIGURES:
        if candidate.key == key:
            return candidate
    raise KeyError(key)


def next_figure(key: str) -> str:
    """The figure after ``key`` in :data:`FIGURES`, round (the first if ``key`` is unknown)."""
    index = FIGURE_KEYS.index(key) + 1 if key in FIGURE_KEYS else 0
    return FIGURE_KEYS[index % len(FIGURE_KEYS)]


# --- layout ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class GridRow:
    """One line of the grid: ``cells[i]`` is the rank drawn in column ``i`` (``None``: a gap).

    ``host`` is the row's host, or ``None`` for ranks whose host is not known. A host's first row
    is labelled with its name; its further rows (a host wider than the grid) and rows of ranks
    without a host are labelled by their first rank, ``r1024``.
    """

    label: str
    host: str | None
    cells: tuple[int | None, ...]


@dataclass(frozen=True)
class Grid:
    """The rows in drawing order and where each rank sits in them."""

    rows: tuple[GridRow, ...]
    width: int
    """Columns of the widest row."""
    where: Mapping[int, tuple[int, int]]
    """rank -> (row, column)."""


def layout_grid(
    places: Mapping[int, tuple[str, int]], width: int, ranks: Iterable[int] = ()
) -> Grid:
    """The grid of ``places`` (rank -> (host, local rank)) at most ``width`` columns wide.

    ``ranks`` adds ranks whose place is not known (they have values but no status file yet); a
    place with an empty host or a negative local rank counts as unknown, and so does the second
    of two ranks claiming the same slot of a host. Unknown ranks come last, in rank order.
    """
    width = max(width, 1)
    by_host: dict[str, dict[int, int]] = {}
    unknown: set[int] = {r for r in ranks if r not in places}
    for rank in sorted(places):
        host, local = places[rank]
        slots = by_host.setdefault(host, {}) if host and local >= 0 else None
        if slots is None or local in slots:
            unknown.add(rank)
        else:
            slots[local] = rank
    rows: list[GridRow] = []
    # Insertion order of by_host is the order of each host's lowest rank (ranks were sorted).
    for host, slots in by_host.items():
        columns = max(slots) + 1
        if columns <= width:
            rows.append(GridRow(host, host, tuple(slots.get(c) for c in range(columns))))
            continue
        ordered = [slots[c] for c in sorted(slots)]
        for start in range(0, len(ordered), width):
            chunk = tuple(ordered[start : start + width])
            rows.append(GridRow(host if start == 0 else f"r{chunk[0]}", host, chunk))
    ordered = sorted(unknown)
    for start in range(0, len(ordered), width):
        chunk = tuple(ordered[start : start + width])
        rows.append(GridRow(f"r{chunk[0]}", None, chunk))
    where = {
        rank: (y, x)
        for y, row in enumerate(rows)
        for x, rank in enumerate(row.cells)
        if rank is not None
    }
    return Grid(tuple(rows), max((len(r.cells) for r in rows), default=0), where)


def widest_host(places: Mapping[int, tuple[str, int]]) -> int:
    """Columns the widest host needs (its highest local rank + 1): what cells are sized by."""
    return max((local + 1 for host, local in places.values() if host and local >= 0), default=0)


def row_label(label: str, width: int) -> str:
    """``label`` (a host's short name) in exactly ``width`` cells, cut from the left: node names
    differ at their end (``x1000c0s3b0n0`` -> ``…0c0s3b0n0``)."""
    short = short_host(label)
    if len(short) <= width:
        return short.ljust(width)
    return "…" + short[len(short) - width + 1 :] if width > 1 else short[-width:]


# --- scale ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scale:
    """Values of one figure to colour buckets ``0`` (best) .. ``buckets - 1`` (worst).

    The span is the figure's fixed range, or else the finite values' [min, max]. When all values
    are equal, nothing stands out: every cell is bucket 0. A value that is not a number
    (NaN, infinite) is never good: it takes the worst bucket.
    """

    low: float
    high: float
    high_is_bad: bool
    buckets: int = BUCKETS

    @classmethod
    def of(cls, fig: Figure, values: Values, buckets: int = BUCKETS) -> Scale:
        """The scale for ``values`` of ``fig`` (linear in the ranks: two passes for min and max)."""
        if fig.fixed is not None:
            low, high = fig.fixed
        else:
            finite = [v for v in values.values() if v is not None and math.isfinite(v)]
            low, high = (min(finite), max(finite)) if finite else (0.0, 0.0)
        return cls(low, high, fig.high_is_bad, buckets)

    def bucket(self, value: float | None) -> int | None:
        """The bucket of ``value``; ``None`` for no data."""
        if value is None:
            return None
        if not math.isfinite(value):
            return self.buckets - 1
        if self.high <= self.low:
            return 0
        share = (min(max(value, self.low), self.high) - self.low) / (self.high - self.low)
        badness = share if self.high_is_bad else 1.0 - share
        return min(int(badness * self.buckets), self.buckets - 1)

    @property
    def ends(self) -> tuple[float, float]:
        """(good end, bad end): the values the legend writes left and right of its ramp."""
        return (self.low, self.high) if self.high_is_bad else (self.high, self.low)


# --- summary --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """What the legend says about one figure: the spread and the worst host.

    ``best_rank`` / ``worst_rank`` hold the ends (for a figure where low is bad the worst is the
    minimum). ``worst_host`` is the host whose median is worst, against ``typical`` (the median
    of the host medians); ``None`` with fewer than two hosts, where there is nothing to compare.
    """

    count: int
    low: float
    median: float
    high: float
    low_rank: int
    high_rank: int
    worst_host: str | None = None
    worst_host_median: float | None = None
    typical: float | None = None

    def worst_host_text(self, fig: Figure) -> str:
        """``worst host: x3 (median 0.41 s vs 0.20 s)``, or empty without one."""
        if self.worst_host is None or self.worst_host_median is None or self.typical is None:
            return ""
        median, typical = fig.format(self.worst_host_median), fig.format(self.typical)
        return f"worst host: {short_host(self.worst_host)} (median {median} vs {typical})"


def host_medians(values: Values, places: Mapping[int, tuple[str, int]]) -> dict[str, float]:
    """Each host's median of its ranks' finite values, hosts with none left out."""
    per_host: dict[str, list[float]] = {}
    for rank, value in values.items():
        place = places.get(rank)
        if place and place[0] and value is not None and math.isfinite(value):
            per_host.setdefault(place[0], []).append(value)
    return {host: statistics.median(found) for host, found in per_host.items()}


def summarize(fig: Figure, values: Values, places: Mapping[int, tuple[str, int]]) -> Summary | None:
    """The legend's numbers for ``values`` of ``fig``; ``None`` when no rank has a finite value."""
    finite = {r: v for r, v in values.items() if v is not None and math.isfinite(v)}
    if not finite:
        return None
    low_rank = min(finite, key=lambda r: (finite[r], r))
    high_rank = max(finite, key=lambda r: (finite[r], -r))
    summary = Summary(
        count=len(finite),
        low=finite[low_rank],
        median=statistics.median(finite.values()),
        high=finite[high_rank],
        low_rank=low_rank,
        high_rank=high_rank,
    )
    medians = host_medians(finite, places)
    if len(medians) < 2:
        return summary
    sign = 1.0 if fig.high_is_bad else -1.0
    worst = max(medians, key=lambda h: sign * medians[h])
    typical = statistics.median(medians.values())
    if medians[worst] == typical:
        return summary  # every host alike: no host to point at
    return replace(summary, worst_host=worst, worst_host_median=medians[worst], typical=typical)
