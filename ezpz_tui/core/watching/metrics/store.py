"""The metric store: every metric of every rank of one run, appended to as the run goes.

:class:`MetricStore` keeps, per rank, one steps array, one timestamps array and one float64
array per metric, in buffers that double when full, so appending is amortised O(1) and no
Python object per record survives :meth:`MetricStore.add`. A record that lacks a metric leaves
NaN in that metric's array; that NaN carries a private payload (MISSING) so it is never
mistaken for a NaN the training really produced, which is kept and counted
(:meth:`MetricStore.nonfinite`): a loss that became NaN is exactly what the user must see.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from ezpz_tui.core.watching.metrics.aggregated import folded, overlay, sources
from ezpz_tui.core.watching.metrics.arrays import Column, is_missing
from ezpz_tui.core.watching.metrics.band import Band, FoldedBand, general_band, steps_span
from runtime.record_columns import MISSING, RecordColumns
from runtime.records import Record

if TYPE_CHECKING:
    from numpy.typing import NDArray

    FloatArray = NDArray[np.float64]
    Array = NDArray[Any]

XAxis = Literal["step", "time"]

_BANDS_KEPT = 2
"""Bands kept between calls (the plotted metric, and the one just left)."""

_STEP_LIMIT = 1 << 62
"""Steps beyond this do not fit the int64 arrays; such a record is numbered like a step-less one."""


class NonFinite(NamedTuple):
    """The non-finite values (NaN, ±inf) one rank logged for one metric: how many, and the
    first one (its step, timestamp and value) so a plot can mark where it started."""

    count: int
    step: int
    timestamp: float
    value: float


class _Series:
    """Bookkeeping of one metric on one rank; the values live in a :class:`Column`."""

    __slots__ = ("bad", "column", "missing")

    def __init__(self, column: Column, missing: int) -> None:
        self.column = column
        self.missing = missing  # records of the rank without this metric
        self.bad: NonFinite | None = None


class RankData:
    """One rank's columns: its steps, timestamps and a series per metric (what bands fold)."""

    __slots__ = ("consecutive", "first_time", "series", "steps", "timeless", "times")

    def __init__(self) -> None:
        self.steps = Column(np.int64)
        self.times = Column(np.float64)
        self.series: dict[str, _Series] = {}
        self.consecutive = True  # steps == steps[0] + arange(n): bands align without sorting
        self.timeless = 0  # records without a timestamp
        self.first_time = math.inf

    @property
    def n(self) -> int:
        return self.steps.n


def nonfinite_word(value: float) -> str:
    """How a non-finite value is written for people: NaN, inf or -inf."""
    return "NaN" if math.isnan(value) else "inf" if value > 0 else "-inf"


class MetricStore:
    """Every metric of every rank of one run, appended to as the run goes.

    ``version`` increases on every change, so a view redraws only when it moved; ``count`` is
    the number of records held (one point per metric each).
    """

    def __init__(self) -> None:
        self._ranks: dict[int, RankData] = {}
        self._bands: dict[tuple[str, str], FoldedBand | tuple[int, Band]] = {}
        self._recorded: dict[tuple[str, str], tuple[int, Band]] = {}  # bands ezpz recorded
        self.version = 0
        self._count = 0

    # --- writing ----------------------------------------------------------------------------

    def add(self, rank: int, records: RecordColumns | Sequence[Record]) -> None:
        """Append ``records`` (all of ``rank``, in file order): the follower's columns, or
        :class:`Record` objects (turned into columns first).

        A record without a step gets the rank's running record number, as
        :func:`runtime.records.number_steps` numbers ezpz's step-less records.
        """
        columns = (
            records
            if isinstance(records, RecordColumns)
            else RecordColumns.from_records(records, rank)
        )
        m = len(columns)
        if not m:
            return
        data = self._ranks.get(rank)
        if data is None:
            data = self._ranks[rank] = RankData()
        n0 = data.n
        steps = _steps(columns.steps, n0)
        times = np.array(columns.timestamps, dtype=np.float64)  # None reads as NaN
        found = set()
        for name, values in columns.metrics.items():
            chunk = np.array(values, dtype=np.float64)  # keeps MISSING's payload
            missing = is_missing(chunk)
            gaps = int(np.count_nonzero(missing))
            if gaps == m:  # a slice of columns may hold a name none of its records has
                continue
            found.add(name)
            series = data.series.get(name)
            if series is None:
                series = data.series[name] = _Series(Column(np.float64, MISSING, n0), n0)
            self._note_nonfinite(series, chunk, missing, steps, times)
            series.missing += gaps
            series.column.extend(chunk)
        gap = np.full(m, MISSING)
        for name, series in data.series.items():
            if name not in found:
                series.column.extend(gap)
                series.missing += m
        if data.consecutive:
            follows = n0 == 0 or steps[0] == data.steps.data[n0 - 1] + 1
            data.consecutive = bool(follows and (m == 1 or np.all(np.diff(steps) == 1)))
        data.steps.extend(steps)
        data.times.extend(times)
        timed = times[~np.isnan(times)]
        data.timeless += m - len(timed)
        if len(timed):
            data.first_time = min(data.first_time, float(timed.min()))
        self._count += m
        self.version += 1

    @staticmethod
    def _note_nonfinite(
        series: _Series, chunk: FloatArray, missing: Array, steps: Array, times: FloatArray
    ) -> None:
        bad = ~np.isfinite(chunk)
        if not bad.any():
            return
        bad &= ~missing
        count = int(bad.sum())
        if not count:
            return
        if series.bad is not None:
            series.bad = series.bad._replace(count=series.bad.count + count)
            return
        i = int(np.argmax(bad))
        series.bad = NonFinite(count, int(steps[i]), float(times[i]), float(chunk[i]))

    def reset(self, rank: int) -> None:
        """Forget ``rank``'s data: its file was truncated or replaced and is read again."""
        data = self._ranks.pop(rank, None)
        if data is not None:
            self._count -= data.n
            self._bands.clear()  # folded bands hold this rank's old records
            self.version += 1

    # --- reading ----------------------------------------------------------------------------

    @property
    def count(self) -> int:
        """Records held across all ranks."""
        return self._count

    @property
    def start_time(self) -> float:
        """The earliest timestamp of the run (NaN when no record has one): time axes count
        seconds from here."""
        first = min((d.first_time for d in self._ranks.values()), default=math.inf)
        return first if math.isfinite(first) else math.nan

    def names(self) -> list[str]:
        """Metric names, sorted, with ``loss`` first: the one people look at. ezpz's cross-rank
        statistics of a metric (``loss/mean``, ``aggregated/loss/max``...) are not listed: they
        are that metric's band (:mod:`~ezpz_tui.core.watching.metrics.aggregated`)."""
        found = folded(set().union(*(d.series for d in self._ranks.values())))
        return sorted(found, key=lambda name: (name != "loss", name))

    def ranks(self, metric: str | None = None) -> list[int]:
        """Ranks with data (with ``metric``, when given), ascending."""
        return sorted(r for r, d in self._ranks.items() if metric is None or metric in d.series)

    def points(self, rank: int) -> int:
        """Records held for ``rank``."""
        data = self._ranks.get(rank)
        return data.n if data else 0

    def nonfinite(self, metric: str) -> dict[int, NonFinite]:
        """The ranks whose ``metric`` had NaN or ±inf values, with the first of them."""
        out = {}
        for rank, data in self._ranks.items():
            series = data.series.get(metric)
            if series is not None and series.bad is not None:
                out[rank] = series.bad
        return dict(sorted(out.items()))

    def series(self, metric: str, rank: int, x: XAxis = "step") -> tuple[Array, FloatArray]:
        """``(x, y)`` of ``metric`` on ``rank`` in record order; views of the store when nothing
        has to be left out (records without the metric; on the time axis, records without a
        timestamp). x is the step or the absolute timestamp (see :attr:`start_time`)."""
        data = self._ranks.get(rank)
        series = data.series.get(metric) if data else None
        if data is None or series is None:
            return np.empty(0, dtype=np.int64), np.empty(0)
        xs = data.steps.view() if x == "step" else data.times.view()
        ys = series.column.view()
        keep = None
        if series.missing:
            keep = ~is_missing(ys)
        if x == "time" and data.timeless:
            timed = ~np.isnan(xs)
            keep = timed if keep is None else keep & timed
        if keep is None:
            return xs, ys
        return xs[keep], ys[keep]

    def timed_steps(self, metric: str, rank: int) -> tuple[Array, FloatArray]:
        """``(steps, timestamps)`` of the records of ``rank`` that hold ``metric`` and a
        timestamp: the points of the time axis, with the step of each."""
        data = self._ranks.get(rank)
        series = data.series.get(metric) if data else None
        if data is None or series is None:
            return np.empty(0, dtype=np.int64), np.empty(0)
        keep = ~is_missing(series.column.view()) & ~np.isnan(data.times.view())
        return data.steps.view()[keep], data.times.view()[keep]

    def at_step(self, metric: str, rank: int, step: int) -> tuple[float, float] | None:
        """``(value, timestamp)`` of ``metric`` on ``rank`` at ``step`` (its last record of
        that step), or None where the rank logged no such value. O(1) while the rank's steps
        are consecutive: the cursor's readout asks this of every rank on each move."""
        data = self._ranks.get(rank)
        series = data.series.get(metric) if data else None
        if data is None or series is None or not data.n:
            return None
        if data.consecutive:
            i = step - int(data.steps.data[0])
            if not 0 <= i < data.n:
                return None
        else:
            found = np.flatnonzero(data.steps.view() == step)
            if not len(found):
                return None
            i = int(found[-1])
        value = series.column.data[i : i + 1]
        if is_missing(value)[0]:
            return None
        return float(value[0]), float(data.times.data[i])

    def band(self, metric: str, x: XAxis = "step") -> Band:
        """Mean, min and max of ``metric`` across ranks at each step (read-only arrays, valid
        until the store changes). On the time axis each step sits at the earliest timestamp
        any rank logged it (NaN where none did).

        While every rank's steps are consecutive (the usual case), the band is kept up to date
        by folding in only the records added since the last call, so a redraw of a streaming
        run costs what arrived, not the million steps before it; otherwise it is recomputed,
        once per change.
        """
        ranks = self.ranks(metric)
        datas = [self._ranks[r] for r in ranks]
        key = (metric, x)
        if not ranks:
            empty = np.empty(0)
            return Band(empty, empty, empty, empty)
        if all(d.consecutive for d in datas) and steps_span(datas) <= 4 * sum(d.n for d in datas):
            state = self._bands.get(key)
            first = min(int(d.steps.data[0]) for d in datas)
            if not isinstance(state, FoldedBand) or state.first > first:
                state = FoldedBand(first, timed=x == "time")
            for rank, data in zip(ranks, datas, strict=True):
                state.fold(rank, data, metric)
            result = state.result()
        else:
            state = self._bands.get(key)
            if isinstance(state, tuple) and state[0] == self.version:
                return state[1]
            result = general_band(datas, metric, x)
            state = (self.version, result)
        self._bands.pop(key, None)
        self._bands[key] = state
        while len(self._bands) > _BANDS_KEPT:  # each holds several arrays as long as the run
            del self._bands[next(iter(self._bands))]
        return self._with_recorded(metric, x, result)

    def _with_recorded(self, metric: str, x: XAxis, band: Band) -> Band:
        """``band`` with the cross-rank statistics ezpz recorded for ``metric``, if any."""
        found = sources(metric, lambda name: any(name in d.series for d in self._ranks.values()))
        if not found:
            return band
        kept = self._recorded.get((metric, x))
        if kept is not None and kept[0] == self.version:
            return kept[1]
        grid = (band if x == "step" else self.band(metric, "step")).x.astype(np.int64)
        recorded = {}
        for statistic, name in found.items():
            parts = [self.series(name, rank) for rank in self.ranks(name)]
            recorded[statistic] = (
                np.concatenate([steps for steps, _ in parts]),
                np.concatenate([values for _, values in parts]),
            )
        result = overlay(band, grid, recorded)
        self._recorded = {**self._recorded, (metric, x): (self.version, result)}
        while len(self._recorded) > _BANDS_KEPT:
            del self._recorded[next(iter(self._recorded))]
        return result

    def to_xarray(self, metric: str) -> Any:
        """``metric`` as an xarray DataArray over (rank, step), NaN where a rank has no value;
        ``.mean("rank")``, ``.min("rank")``, ``.max("rank")`` give the band. Where a rank logged
        a step twice (a resumed run), the later value is kept."""
        import xarray as xr

        ranks = self.ranks(metric)
        steps = [self._ranks[r].steps.view() for r in ranks]
        grid = np.unique(np.concatenate(steps)) if steps else np.empty(0, dtype=np.int64)
        values = np.full((len(ranks), len(grid)), np.nan)
        for row, (rank, rank_steps) in enumerate(zip(ranks, steps, strict=True)):
            ys = self._ranks[rank].series[metric].column.view()
            where = np.searchsorted(grid, rank_steps)
            ys = np.where(is_missing(ys), np.nan, ys)
            if not self._ranks[rank].consecutive:  # repeated steps: keep each one's last value
                _, last = np.unique(where[::-1], return_index=True)
                where, ys = where[::-1][last], ys[::-1][last]
            values[row, where] = ys
        return xr.DataArray(
            values, dims=("rank", "step"), coords={"rank": ranks, "step": grid}, name=metric
        )


def _steps(steps: list[int | None], n0: int) -> Array:
    """The int64 steps of records ``n0``, ``n0 + 1``...: a record without a step, or with one
    too large for int64 arrays, gets its record number."""
    try:
        out = np.array(steps, dtype=np.int64)
    except (TypeError, OverflowError, ValueError):  # None, or past 64 bits
        pass
    else:
        if not len(out) or (out.min() > -_STEP_LIMIT and out.max() < _STEP_LIMIT):
            return out
    return np.array(
        [
            s if s is not None and -_STEP_LIMIT < s < _STEP_LIMIT else n0 + i
            for i, s in enumerate(steps)
        ],
        dtype=np.int64,
    )
