"""A finished run's metrics as its digest holds them: every metric's band and each rank's last
values, as columns, so a 131,072-rank run's store is a few arrays, made without reading a rank's
file (docs/digest: ``digest.json``'s ``bands`` and ``ranks.last``).

:class:`SettledRanks` answers what a lean store asks of :class:`~.lean.LeanRanks` from those
columns; nothing is folded into it (the run has ended). A rank's series is still read from its
file when a view shows it, and is then whole: no record count to hold it to.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ezpz_tui.core.runs.digest import number
from ezpz_tui.core.watching.metrics.arrays import Column, NonFinite
from ezpz_tui.core.watching.metrics.lean import _TABLES, Last, LeanRanks, StepBands

if TYPE_CHECKING:
    from numpy.typing import NDArray

    FloatArray = NDArray[np.float64]
    Array = NDArray[Any]

Lists = Mapping[str, Sequence[Any]]
"""One metric's band as the digest writes it: ``step``, ``time``, ``mean``, ``lo``, ``hi``,
``lo_rank``, ``hi_rank``, ``count`` (lists of one length)."""


def floats(values: Sequence[Any]) -> FloatArray:
    """A digest's list of numbers as float64 (non-finite ones as the JSONL spells them), NaN
    for null or anything not a number."""
    found = (number(v) for v in values)
    return np.array([math.nan if v is None else v for v in found], dtype=np.float64)


def step_bands(bands: Mapping[str, Lists]) -> StepBands:
    """The digest's bands as the tables a lean store draws from: one grid of every step any
    metric has, each metric a row of it (a metric without a step holds what a step no rank
    logged holds)."""
    out = StepBands()
    usable = {}
    for name, band in bands.items():
        try:
            steps = np.array(band["step"], dtype=np.int64)
            n = len(steps)
            columns = {key: band[key] for key in ("time", "mean", "lo", "hi", "count")}
            if any(len(c) != n for c in columns.values()):
                continue
            lo_rank = np.array(band.get("lo_rank") or [-1] * n, dtype=np.int32)
            hi_rank = np.array(band.get("hi_rank") or [-1] * n, dtype=np.int32)
        except (KeyError, TypeError, ValueError, OverflowError):
            continue  # a band not of this shape is left out, not the run
        if len(lo_rank) == n and len(hi_rank) == n:
            usable[name] = (steps, columns, lo_rank, hi_rank)
    grid = np.unique(np.concatenate([u[0] for u in usable.values()] or [np.empty(0, np.int64)]))
    out.steps = Column(np.int64, 0, len(grid))
    out.steps.data[: len(grid)] = grid
    when = np.full(len(grid), math.nan)
    rows, width = max(4, len(usable)), max(16, len(grid))
    out.tables = {name: np.full((rows, width), fill, dtype) for name, dtype, fill in _TABLES}
    t = out.tables
    for name, (steps, columns, lo_rank, hi_rank) in usable.items():
        row, at = out.row(name), np.searchsorted(grid, steps)
        count = np.array(columns["count"], dtype=np.int32)
        mean = floats(columns["mean"])
        t["total"][row, at] = np.where(count > 0, np.nan_to_num(mean * count), 0.0)
        t["count"][row, at] = count
        t["present"][row, at] = np.maximum(count, 1)
        t["lo"][row, at] = floats(columns["lo"])
        t["hi"][row, at] = floats(columns["hi"])
        t["lo_rank"][row, at] = lo_rank
        t["hi_rank"][row, at] = hi_rank
        when[at] = np.fmin(when[at], floats(columns["time"]))
    out.when = Column(np.float64, math.nan, len(grid))
    out.when.data[: len(grid)] = when
    out.changes = 1
    return out


class SettledRanks(LeanRanks):
    """Every rank's last values of a finished run, as columns (``last[metric][rank]``: NaN
    where the rank logged none), and the bands; read-only."""

    def __init__(
        self,
        world: int,
        bands: StepBands,
        last: Mapping[str, FloatArray],
        last_step: Array,
        last_time: FloatArray,
    ) -> None:
        super().__init__()
        self.world = world
        self.bands = bands
        self._last = dict(last)
        self._last_step = last_step
        self._last_time = last_time
        self._with: dict[str | None, list[int]] = {}
        when = bands.when.view()
        self._start = float(np.nanmin(when)) if np.isfinite(when).any() else math.inf

    def holds(self, rank: int) -> bool:
        return 0 <= rank < self.world and int(self._last_step[rank]) >= 0

    def records(self, rank: int) -> int | None:
        return None

    def last(self, rank: int, metric: str) -> Last | None:
        values = self._last.get(metric)
        if values is None or not 0 <= rank < self.world or math.isnan(values[rank]):
            return None
        last = Last()
        last.first = self.first_step(metric)
        last.step, last.value = int(self._last_step[rank]), float(values[rank])
        last.time = float(self._last_time[rank])
        return last

    def with_metric(self, metric: str | None) -> list[int]:
        found = self._with.get(metric)
        if found is None:
            if metric is None:
                found = np.flatnonzero(self._last_step >= 0).tolist()
            else:
                values = self._last.get(metric)
                found = [] if values is None else np.flatnonzero(~np.isnan(values)).tolist()
            self._with[metric] = found
        return found

    def points_of(self, metric: str) -> int:
        row = self.bands.rows.get(metric)
        if row is None:
            return 0
        return int(self.bands.tables["count"][row, : self.bands.steps.n].sum())

    def start_time(self) -> float:
        return self._start

    def nonfinite(self, metric: str) -> dict[int, NonFinite]:
        return {}  # a digest keeps each rank's last finite value: a rank's file says the rest

    def first_step(self, metric: str) -> int | None:
        row = self.bands.rows.get(metric)
        if row is None:
            return None
        logged = np.flatnonzero(self.bands.tables["count"][row, : self.bands.steps.n] > 0)
        return int(self.bands.steps.data[logged[0]]) if len(logged) else None

    def forget(self, rank: int) -> None:
        """Nothing to forget: a finished run's files do not begin again."""

    @property
    def nbytes(self) -> int:
        columns = sum(a.nbytes for a in self._last.values())
        return super().nbytes + columns + self._last_step.nbytes + self._last_time.nbytes
