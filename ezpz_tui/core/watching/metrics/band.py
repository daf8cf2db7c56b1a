"""The band: a metric across ranks, aligned by step, as the mean and the min/max envelope.

While every rank's steps are consecutive (the usual case) a :class:`FoldedBand` folds in only
the records added since the last redraw, so a streaming run costs what arrived, not the million
steps before it; other runs (gaps, repeats after a resume) are aligned by sorting the union.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ezpz_tui.core.watching.metrics.arrays import Column

if TYPE_CHECKING:
    from numpy.typing import NDArray

    FloatArray = NDArray[np.float64]
    Array = NDArray[Any]

    from ezpz_tui.core.watching.metrics.store import RankData, XAxis


class Band(NamedTuple):
    """A metric across ranks, aligned by step: the mean and the min/max envelope (NaN-aware:
    gaps and NaNs are left out of each step's statistics; a step no rank has is NaN)."""

    x: FloatArray
    mean: FloatArray
    lo: FloatArray
    hi: FloatArray


def steps_span(ranks: list[RankData]) -> int:
    """Steps from the lowest first step of ``ranks`` to the highest last one: the length of the
    arrays a folded band over them would hold."""
    return int(max(d.steps.data[d.n - 1] for d in ranks) - min(d.steps.data[0] for d in ranks)) + 1


class FoldedBand:
    """A band over consecutive steps that grows as records arrive: per step the sum and count
    of the values, their min and max (and the earliest timestamp), in growable columns. Each
    rank's records are folded in once; the mean is recomputed only where something changed."""

    def __init__(self, first: int, timed: bool) -> None:
        self.first = first
        self.size = 0
        self.folded: dict[int, int] = {}  # records of each rank already in the band
        self.x = Column(np.float64)
        self.total = Column(np.float64)
        self.count = Column(np.int32)
        self.lo = Column(np.float64)
        self.hi = Column(np.float64)
        self.mean = Column(np.float64)
        self.when = Column(np.float64) if timed else None
        self.dirty: tuple[int, int] | None = None

    def _grow(self, size: int) -> None:
        if size <= self.size:
            return
        more = size - self.size
        nan = np.full(more, np.nan)
        self.x.extend(self.first + np.arange(self.size, size, dtype=np.float64))
        self.total.extend(np.zeros(more))
        self.count.extend(np.zeros(more, dtype=np.int32))
        for column in (self.lo, self.hi, self.mean, self.when):
            if column is not None:
                column.extend(nan)
        self.size = size

    def fold(self, rank: int, data: RankData, metric: str) -> None:
        begin, end = self.folded.get(rank, 0), data.n
        if begin >= end:
            return
        ys = data.series[metric].column.data[begin:end]
        start = int(data.steps.data[begin]) - self.first
        self._grow(start + end - begin)
        part = slice(start, start + end - begin)
        absent = np.isnan(ys)
        if absent.any():
            self.total.data[part] += np.where(absent, 0.0, ys)
            self.count.data[part] += ~absent
        else:
            self.total.data[part] += ys
            self.count.data[part] += 1
        np.fmin(self.lo.data[part], ys, out=self.lo.data[part])
        np.fmax(self.hi.data[part], ys, out=self.hi.data[part])
        if self.when is not None:
            times = data.times.data[begin:end]
            np.fmin(self.when.data[part], times, out=self.when.data[part])
        self.folded[rank] = end
        low, high = self.dirty or (part.start, part.stop)
        self.dirty = (min(low, part.start), max(high, part.stop))

    def result(self) -> Band:
        if self.dirty is not None:
            part = slice(*self.dirty)
            with np.errstate(invalid="ignore", divide="ignore"):
                self.mean.data[part] = self.total.data[part] / self.count.data[part]
            self.dirty = None
        x = self.when if self.when is not None else self.x
        views = (x.view(), self.mean.view(), self.lo.view(), self.hi.view())
        for view in views:
            view.flags.writeable = False
        return Band(*views)


def general_band(ranks: list[RankData], metric: str, x: XAxis) -> Band:
    """Steps in any order, with gaps or repeats (a resumed run): align by sorting the union."""
    steps = np.concatenate([d.steps.view() for d in ranks])
    ys = np.concatenate([d.series[metric].column.view() for d in ranks])
    grid, where = np.unique(steps, return_inverse=True)
    ok = ~np.isnan(ys)
    total = np.bincount(where, weights=np.where(ok, ys, 0.0), minlength=len(grid))
    count = np.bincount(where, weights=ok, minlength=len(grid))
    lo = np.full(len(grid), np.nan)
    hi = np.full(len(grid), np.nan)
    np.fmin.at(lo, where, ys)
    np.fmax.at(hi, where, ys)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
    xs = grid.astype(np.float64)
    if x == "time":
        xs = np.full(len(grid), np.nan)
        np.fmin.at(xs, where, np.concatenate([d.times.view() for d in ranks]))
    return Band(xs, mean, lo, hi)
