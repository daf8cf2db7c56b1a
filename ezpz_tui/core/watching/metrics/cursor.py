"""The plot's step cursor, UI-free: the points it moves over, what it reads out, and the zoom
window it moves inside.

The cursor sits on a point of the plot's main line: the selected rank's records in "one rank"
mode, the steps of the cross-rank band otherwise (:func:`cursor_axis`). It is kept as a step,
so streaming records, another metric or the other x axis leave it where it was. The readout
(:func:`readout`) gives the values as logged (before smoothing and log10): what the training
printed at that step, the figure a person compares with the log.

The zoom window is an x interval, or None for everything; :func:`zoom` and :func:`pan` keep it
inside the data, and a window that covers all of it becomes None again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ezpz_tui.core.watching.metrics.plot import ALL_RANKS_LIMIT

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ezpz_tui.core.watching.metrics.plot import PlotSettings
    from ezpz_tui.core.watching.metrics.store import MetricStore

    Array = NDArray[Any]

Window = tuple[float, float]

STACKED = ("loss", "lr", "grad_norm", "tokens_per_s")
"""The metrics small multiples show first (throughput as ``ezpz``'s History names it), each
also found by a looser name (``learning_rate``, ``grad/norm``, ``samples_per_s``)."""

_LIKE = (("loss",), ("lr", "learning_rate"), ("grad",), ("tokens_per_s", "tok", "samples_per_s"))


class Axis(NamedTuple):
    """The points the cursor moves over: their x as plotted, and the step of each."""

    x: Array
    steps: Array

    def index_of(self, step: int) -> int:
        """The point at ``step``, or the nearest one (steps ascend in the usual run)."""
        n = len(self.steps)
        i = int(np.searchsorted(self.steps, step))
        if i >= n or (i > 0 and step - self.steps[i - 1] < self.steps[i] - step):
            i -= 1
        return max(0, min(n - 1, i))


def main_rank(store: MetricStore, settings: PlotSettings) -> int | None:
    """The rank "one rank" mode draws: the selected one, or the lowest with the metric."""
    ranks = store.ranks(settings.metric)
    if not ranks:
        return None
    return settings.rank if settings.rank in ranks else ranks[0]


def cursor_axis(store: MetricStore, settings: PlotSettings) -> Axis:
    """The points of the main line (see the module's docstring); on the time axis x counts
    seconds from the run's first record, as the plot does."""
    rank = main_rank(store, settings)
    if rank is None:
        empty = np.empty(0)
        return Axis(empty, empty.astype(np.int64))
    if settings.mode == "rank":
        steps, _ = store.series(settings.metric, rank, "step")
        if settings.x == "step":
            return Axis(steps.astype(np.float64), steps)
        steps, times = store.timed_steps(settings.metric, rank)
        return Axis(times - store.start_time, steps)
    steps = store.band(settings.metric, "step").x.astype(np.int64)
    if settings.x == "step":
        return Axis(steps.astype(np.float64), steps)
    return Axis(store.band(settings.metric, "time").x - store.start_time, steps)


@dataclass
class Readout:
    """What the cursor reads at one step: the wall time (NaN where no record has one), each
    line's value as ``(label, value)``, and the rank to open on Enter (the rank drawn, or the
    one holding the extreme that strays furthest from the mean)."""

    step: int
    time: float = math.nan
    values: list[tuple[str, float]] = field(default_factory=list)
    rank: int | None = None


def readout(
    store: MetricStore,
    settings: PlotSettings,
    step: int,
    overlays: Mapping[str, MetricStore] | None = None,
) -> Readout:
    """The values of every line the plot shows at ``step``: the rank drawn; or the mean, min
    and max with the rank holding each extreme (``min r3``); or each rank in "all" mode (up
    to ``ALL_RANKS_LIMIT``); then each overlay's mean."""
    out = Readout(step)
    metric = settings.metric
    ranks = store.ranks(metric)
    if store.lean:
        _lean_readout(out, store, settings)
        _overlays(out, metric, step, overlays)
        return out
    found = {r: v for r in ranks if (v := store.at_step(metric, r, step)) is not None}
    times = [t for _, t in found.values() if math.isfinite(t)]
    out.time = min(times) if times else math.nan
    rank = main_rank(store, settings)
    if settings.mode == "rank" or not found:
        if rank is not None and rank in found:
            out.values.append((f"rank {rank}", found[rank][0]))
        out.rank = rank
    elif settings.mode == "all" and len(ranks) <= ALL_RANKS_LIMIT:
        out.values += [(f"rank {r}", v) for r, (v, _) in found.items()]
        out.rank = _stray(found, store, metric, step)
    else:
        finite = {r: v for r, (v, _) in found.items() if math.isfinite(v)}
        if finite:
            low = min(finite, key=finite.__getitem__)
            high = max(finite, key=finite.__getitem__)
            out.values.append(("mean", sum(finite.values()) / len(finite)))
            out.values += [(f"min r{low}", finite[low]), (f"max r{high}", finite[high])]
        bad = [r for r, (v, _) in found.items() if not math.isfinite(v)]
        if bad:
            out.values.append((f"non-finite on {len(bad)} ranks, first r{bad[0]}", math.nan))
        out.rank = bad[0] if bad else _stray(found, store, metric, step)
    _overlays(out, metric, step, overlays)
    return out


def _lean_readout(out: Readout, store: MetricStore, settings: PlotSettings) -> None:
    """The readout of a store that holds the band and the shown ranks' series, not every
    rank's: the drawn rank from its series, the mean and extremes from the band."""
    rank = main_rank(store, settings)
    mine = store.at_step(settings.metric, rank, out.step) if rank is not None else None
    band = store.across(settings.metric, out.step)
    out.time = band.time if band is not None else mine[1] if mine is not None else math.nan
    out.rank = rank
    if settings.mode != "rank" and band is not None:
        out.values += [
            ("mean", band.mean),
            (f"min r{band.lo_rank}", band.lo),
            (f"max r{band.hi_rank}", band.hi),
        ]
        if not all(map(math.isfinite, (band.mean, band.lo, band.hi))):
            out.values.append(("non-finite values at this step", math.nan))
        # The extreme furthest from the mean is the rank whose log tells why.
        out.rank = band.lo_rank if band.mean - band.lo > band.hi - band.mean else band.hi_rank
        if settings.mode == "all" and mine is not None:
            out.values.append((f"rank {rank}", mine[0]))
    elif mine is not None:
        out.values.append((f"rank {rank}", mine[0]))


def mean_at(store: MetricStore, metric: str, step: int, finite: bool = False) -> float | None:
    """``metric``'s mean across ranks at ``step`` (of the finite values only, when asked), or
    None where no rank has one; a lean store's band holds it."""
    if store.lean:
        band = store.across(metric, step)
        return band.mean if band is not None and not math.isnan(band.mean) else None
    found = [v for r in store.ranks(metric) if (v := store.at_step(metric, r, step))]
    values = [v for v, _ in found if math.isfinite(v) or not finite]
    return sum(values) / len(values) if values else None


def _overlays(
    out: Readout, metric: str, step: int, overlays: Mapping[str, MetricStore] | None
) -> None:
    """Each overlay's mean at ``step``."""
    for name, other in (overlays or {}).items():
        value = mean_at(other, metric, step, finite=True)
        if value is not None:
            out.values.append((name, value))


def _stray(
    found: Mapping[int, tuple[float, float]], store: MetricStore, metric: str, step: int
) -> int | None:
    """The rank to read at a step across ranks: a non-finite one first, else the one that
    strays furthest from the mean plus furthest from its own previous value (with two ranks
    both are as far from the mean: the one that jumped is the one whose log tells why)."""
    values = {r: v for r, (v, _) in found.items()}
    for rank, value in values.items():
        if not math.isfinite(value):
            return rank
    if not values:
        return None
    mean = sum(values.values()) / len(values)

    def score(rank: int) -> tuple[float, int]:
        before = store.at_step(metric, rank, step - 1)
        jump = abs(values[rank] - before[0]) if before and math.isfinite(before[0]) else 0.0
        return abs(values[rank] - mean) + jump, -rank

    return max(values, key=score)


def _clamp(lo: float, hi: float, full: Window) -> Window | None:
    span = hi - lo
    if span >= full[1] - full[0]:
        return None
    if lo < full[0]:
        lo, hi = full[0], full[0] + span
    if hi > full[1]:
        lo, hi = full[1] - span, full[1]
    return lo, hi


def zoom(window: Window | None, full: Window, centre: float, factor: float) -> Window | None:
    """The window ``factor`` times as wide (0.5 zooms in), centred on ``centre`` (the
    cursor), kept inside ``full`` (the data's x range); None once it covers everything."""
    lo, hi = window or full
    half = max((hi - lo) * factor / 2, 1.0 if full[1] - full[0] >= 4 else 0.0)
    return _clamp(centre - half, centre + half, full)


def pan(window: Window | None, full: Window, fraction: float) -> Window | None:
    """The window moved by ``fraction`` of its width (negative: left), inside ``full``."""
    if window is None:
        return None
    shift = (window[1] - window[0]) * fraction
    return _clamp(window[0] + shift, window[1] + shift, full)


def stacked_metrics(names: Sequence[str], first: str | None, count: int = 4) -> list[str]:
    """The metrics small multiples stack: loss, learning rate, gradient norm and throughput
    where the run has them (see ``STACKED``), else the next metrics by name, ``first`` (the
    metric on screen) at the top when it is none of those."""
    chosen: list[str] = []
    for exact, likes in zip(STACKED, _LIKE, strict=True):
        match = (
            exact
            if exact in names
            else next(
                (n for n in names for like in likes if like in n.lower() and n not in chosen), None
            )
        )
        if match is not None and match not in chosen:
            chosen.append(match)
    if first is not None and first not in chosen:
        chosen.insert(0, first)
    chosen += [n for n in names if n not in chosen]
    return chosen[:count]
