"""What a plot shows: the user's :class:`PlotSettings` and the store turned into the traces handed
to plotext, at about two points per cell per line (:func:`prepare_plot`), with the status row's
numbers and, when nothing can be drawn, the reason in words the user can act on.

Log scales are drawn as log10 of the values on a linear axis (:func:`safe_log10`): plotext's
log axis fails on repeated redraws.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from ezpz_tui.core.watching.metrics.decimate import decimate, envelope
from ezpz_tui.core.watching.metrics.ema import ema
from ezpz_tui.core.watching.metrics.store import nonfinite_word

if TYPE_CHECKING:
    from numpy.typing import NDArray

    FloatArray = NDArray[np.float64]
    Array = NDArray[Any]

    from ezpz_tui.core.watching.metrics.band import Band
    from ezpz_tui.core.watching.metrics.store import MetricStore, XAxis

Mode = Literal["rank", "all", "band"]
"""One rank; every rank as its own line; the mean across ranks with the min/max band."""

ALL_RANKS_LIMIT = 16
"""More ranks than this are not drawn one line each in "all" mode (256 lines are neither
readable nor fast): the band is drawn, with the selected rank on top."""


@dataclass(frozen=True)
class PlotSettings:
    """Everything the user chose about a plot: which metric, how it is reduced and scaled."""

    metric: str
    mode: Mode = "rank"
    rank: int = 0  # the rank of "rank" mode, drawn on top of the band when "all" has too many
    smoothing: float = 0.0  # EMA weight; 0 is off
    log: bool = False
    x: XAxis = "step"
    window: tuple[float, float] | None = None  # the zoomed x range as plotted; None: all


class Trace(NamedTuple):
    """One line handed to plotext. ``colour`` indexes the theme's line colours (negative from
    the end, for overlays); a ``band`` trace zigzags between the low and high end of each
    bucket so its line fills the band."""

    label: str
    x: list[float]
    y: list[float]
    colour: int = 0
    band: bool = False


@dataclass
class Drawing:
    """What to draw for one metric at one width: the traces in drawing order (band first, the
    main line last), where the shown data first turned NaN or infinite, and the numbers the
    status row reports. ``message`` replaces the plot when there is nothing to draw."""

    traces: list[Trace] = field(default_factory=list)
    mark: float | None = None
    join: float | None = None  # the step a resumed run continued its parent's curve from
    window: tuple[float, float] | None = None  # the x range to show (zoomed), None: the data's
    shown: str = ""
    raw: int = 0
    hidden: int = 0  # finite points that have no place on the log axis (zero or negative)
    missing: list[str] = field(default_factory=list)  # overlays without this metric
    message: str = ""

    @property
    def drawn(self) -> int:
        return sum(len(t.x) for t in self.traces)


def safe_log10(y: Array) -> FloatArray:
    """log10 of ``y``, NaN where the value is zero, negative or NaN (they have no place on a
    log axis; the caller says so rather than plotting -inf)."""
    values = np.asarray(y, dtype=np.float64)
    out = np.full(values.shape, np.nan)
    np.log10(values, out=out, where=values > 0)
    return out


def visible(x: Array, shift: float, window: tuple[float, float] | None) -> slice | Array:
    """What of the points at ``x`` (``x - shift`` as plotted) lies in ``window``: a slice when
    ``x`` ascends (the usual case: two binary searches), else a mask. Zooming re-decimates only
    this part, so a zoomed plot keeps about two points per cell at every zoom."""
    if window is None:
        return slice(None)
    lo, hi = window[0] + shift, window[1] + shift
    if x.dtype.kind in "iu":  # steps: integer bounds, or numpy searches a float copy of x
        lo, hi = x.dtype.type(math.ceil(lo)), x.dtype.type(math.floor(hi))
    if len(x) < 2 or bool(np.all(x[1:] >= x[:-1])):
        return slice(int(np.searchsorted(x, lo)), int(np.searchsorted(x, hi, side="right")))
    return (x >= lo) & (x <= hi)


def _line(
    drawing: Drawing,
    x: Array,
    y: FloatArray,
    settings: PlotSettings,
    start: float,
    max_points: int,
    label: str,
    colour: int,
) -> None:
    """Smooth (on every point: smoothing decimated data would smooth the min/max envelope,
    not the curve), decimate, shift the time axis, take log10, keep what can be drawn."""
    if settings.smoothing:
        y = ema(y, settings.smoothing)
    part = visible(x, start if settings.x == "time" else 0.0, settings.window)
    xs, ys = decimate(x[part], y[part], max_points)
    xs = xs.astype(np.float64)
    if settings.x == "time":
        xs = xs - start
    keep = np.isfinite(ys) & np.isfinite(xs)
    if settings.log:
        ys = safe_log10(ys)
        drawable = keep & np.isfinite(ys)
        drawing.hidden += int(np.count_nonzero(keep & ~drawable))
        keep = drawable
    if keep.any():
        drawing.traces.append(Trace(label, xs[keep].tolist(), ys[keep].tolist(), colour))


def _band(drawing: Drawing, band: Band, settings: PlotSettings, start: float, width: int) -> None:
    """The min/max band as one zigzag line: one vertical stroke per bucket. Up to ``2 * width``
    buckets: with fewer than one per column (the bucket size is rounded up) the band would
    show gaps. So the band costs plotext at most ``4 * width`` points, however many ranks and
    steps it covers."""
    shift = start if settings.x == "time" else 0.0
    part = visible(band.x, shift, settings.window)
    x, lo, hi = envelope(band.x[part], band.lo[part], band.hi[part], 2 * width)
    x = x.astype(np.float64) - shift
    if settings.log:
        lo, hi = safe_log10(lo), safe_log10(hi)
    keep = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(x)
    x, lo, hi = x[keep], lo[keep], hi[keep]
    if not len(x):
        return
    ys = np.empty(2 * len(x))
    ys[0::2], ys[1::2] = lo, hi
    ys[2::4], ys[3::4] = hi[1::2], lo[1::2]  # odd buckets top-down: strokes join at the ends
    drawing.traces.append(Trace("min–max", np.repeat(x, 2).tolist(), ys.tolist(), band=True))


def _first_mark(store: MetricStore, metric: str, ranks: list[int], x: XAxis) -> float | None:
    """Where the first NaN/inf of ``metric`` on ``ranks`` sits on the x axis."""
    bad = [b for r, b in store.nonfinite(metric).items() if r in ranks]
    if not bad:
        return None
    if x == "step":
        return float(min(b.step for b in bad))
    times = [b.timestamp - store.start_time for b in bad if math.isfinite(b.timestamp)]
    return min(times) if times else None


def _plot_band(drawing: Drawing, store: MetricStore, settings: PlotSettings, width: int) -> None:
    """The min/max band under the mean line."""
    band = store.band(settings.metric, settings.x)
    if settings.smoothing:  # smooth the band too, or the lagging mean leaves it
        band = band._replace(
            lo=ema(band.lo, settings.smoothing), hi=ema(band.hi, settings.smoothing)
        )
    _band(drawing, band, settings, store.start_time, width)
    _line(drawing, band.x, band.mean, settings, store.start_time, 2 * width, "mean", 0)
    ranks = store.ranks(settings.metric)
    drawing.raw = store.points_of(settings.metric)
    drawing.shown = f"mean, min–max of {len(ranks)} ranks"


def _plot_rank(
    drawing: Drawing, store: MetricStore, settings: PlotSettings, width: int, colour: int
) -> int:
    """The selected rank's line (the lowest rank with the metric if it has none); returns the
    rank drawn."""
    ranks = store.ranks(settings.metric)
    rank = settings.rank if settings.rank in ranks else ranks[0]
    x, y = store.series(settings.metric, rank, settings.x)
    _line(drawing, x, y, settings, store.start_time, 2 * width, f"rank {rank}", colour)
    drawing.raw = drawing.raw or len(y)
    shown = f"rank {rank}"
    if rank in store.wanted():
        shown += " (reading its file)"
    if rank != settings.rank:
        shown += f" (rank {settings.rank} has no {settings.metric})"
    drawing.shown = f"{drawing.shown} + {shown}" if drawing.shown else shown
    return rank


def _plot_all(drawing: Drawing, store: MetricStore, settings: PlotSettings, width: int) -> None:
    """One line per rank, sharing about two points per cell (half a point per cell each at
    least, so 16 ranks stay readable)."""
    ranks = store.ranks(settings.metric)
    per_line = max(2 * width // len(ranks), width // 2, 3)
    for i, rank in enumerate(ranks):
        x, y = store.series(settings.metric, rank, settings.x)
        _line(drawing, x, y, settings, store.start_time, per_line, f"rank {rank}", i)
        drawing.raw += len(y)
    drawing.shown = f"all {len(ranks)} ranks" if len(ranks) > 1 else f"rank {ranks[0]}"


def prepare_plot(
    store: MetricStore | None,
    overlays: Mapping[str, MetricStore],
    settings: PlotSettings,
    width: int,
    joined: str | None = None,
) -> Drawing:
    """The traces of ``settings.metric`` for a plot ``width`` cells wide: about two points per
    cell per line (plotext's cost grows with the points, not with the data; the band is a
    full-block stroke per column). "all" mode with more than ALL_RANKS_LIMIT ranks draws the band
    and the selected rank instead. Overlays are each earlier run's mean across its ranks.

    ``joined`` names the overlay the run resumed from: on the step axis its steps before the
    run's first are drawn in the run's colour, the rest of it not at all (the run trains
    those steps again from the checkpoint), and ``join`` marks the step where one becomes
    the other."""
    drawing = Drawing(window=settings.window)
    width = max(width, 2)
    metric = settings.metric
    ranks = store.ranks(metric) if store is not None else []
    if store is not None and ranks:
        marked = ranks
        if settings.mode == "all" and len(ranks) <= ALL_RANKS_LIMIT:
            _plot_all(drawing, store, settings, width)
        elif settings.mode == "rank":
            marked = [_plot_rank(drawing, store, settings, width, 0)]
        else:
            _plot_band(drawing, store, settings, width)
            if settings.mode == "all":
                _plot_rank(drawing, store, settings, width, 1)
                drawing.shown += f" (more than {ALL_RANKS_LIMIT} ranks)"
        drawing.mark = _first_mark(store, metric, marked, settings.x)
    join = _join_step(store, metric, ranks, settings) if joined in overlays else None
    for i, (name, other) in enumerate(overlays.items()):
        if not other.ranks(metric):
            drawing.missing.append(name)
            continue
        band = other.band(metric, settings.x)
        x, y, colour = band.x, band.mean, -1 - i
        if name == joined and join is not None:
            before = x < join
            x, y, colour = x[before], y[before], 0
            drawing.join = join
        _line(drawing, x, y, settings, other.start_time, 2 * width, name, colour)
    if not drawing.traces:
        drawing.message = _nothing_drawn(store, metric, ranks, drawing, settings)
    return drawing


def _join_step(
    store: MetricStore | None, metric: str, ranks: list[int], settings: PlotSettings
) -> float | None:
    """The run's first step of ``metric``, where a resumed run's curve takes over from its
    parent's; None off the step axis (each run's time starts at its own start)."""
    if store is None or not ranks or settings.x != "step":
        return None
    first = store.first_step(metric)
    return float(first) if first is not None else None


def _nothing_drawn(
    store: MetricStore | None,
    metric: str,
    ranks: list[int],
    drawing: Drawing,
    settings: PlotSettings,
) -> str:
    """Why a plot is empty, in one line the user can act on."""
    if store is None or not store.count:
        return ""
    if not ranks:
        return f"no {metric} values in this run"
    if store.wanted():
        return f"reading rank {min(store.wanted())}'s {metric} from its file…"
    bad = store.nonfinite(metric)
    if bad:
        rank, first = next(iter(bad.items()))
        word = nonfinite_word(first.value)
        return f"{metric} has no finite values: {word} on rank {rank} from step {first.step}"
    if settings.x == "time":
        return f"{metric} has no timestamps: press x for steps"
    if settings.log and drawing.hidden:
        return f"{metric} has no positive values for a log10 axis: press y for linear"
    return f"no {metric} values to draw"
