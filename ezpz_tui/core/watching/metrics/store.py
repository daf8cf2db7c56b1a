"""The metric store: every metric of every rank of one run, appended to as the run goes.

:class:`MetricStore` keeps, per rank, one steps array, one timestamps array and one float64
array per metric, in buffers that double when full, so appending is amortised O(1) and no
Python object per record survives :meth:`MetricStore.add`. A record that lacks a metric leaves
NaN in that metric's array; that NaN carries a private payload (MISSING) so it is never
mistaken for a NaN the training really produced, which is kept and counted
(:meth:`MetricStore.nonfinite`): a loss that became NaN is exactly what the user must see.

Past :data:`KEEP_ALL_RANKS` ranks, given a way to read a rank's file again, the store keeps the
bands and each rank's last values instead (:mod:`.lean`), and a rank's series while it is shown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ezpz_tui.core.watching.metrics.aggregated import folded, overlay, sources
from ezpz_tui.core.watching.metrics.arrays import Column, NonFinite, is_missing, noted_nonfinite
from ezpz_tui.core.watching.metrics.band import Band, FoldedBand, general_band, steps_span
from ezpz_tui.core.watching.metrics.lean import AtStep, LeanRanks, RankSummary
from runtime.record_columns import MISSING, RecordColumns
from runtime.records import Record

if TYPE_CHECKING:
    from numpy.typing import NDArray

    FloatArray = NDArray[np.float64]
    Array = NDArray[Any]

XAxis = Literal["step", "time"]

Loader = Callable[[int], Iterable[RecordColumns]]
"""A rank's records, read again from the run's files (in a worker)."""

KEEP_ALL_RANKS = 64
"""Up to this many ranks a store holds every rank's series (64 x 9 metrics x a million steps
is what one plot of them all needs anyway); past it, given a loader, only the shown ones."""

LOADED_RANKS = 8
"""Series a lean store keeps of the ranks shown last: the plotted rank, the ranks just left."""

_BANDS_KEPT = 2
"""Bands kept between calls (the plotted metric, and the one just left)."""

_STEP_LIMIT = 1 << 62
"""Steps beyond this do not fit the int64 arrays; such a record is numbered like a step-less one."""


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

    Given a ``loader`` (a rank's records, read from its file: :func:`~.load.rank_loader`), a
    store past :data:`KEEP_ALL_RANKS` ranks keeps only each metric's band and each rank's last
    values (:mod:`.lean`), and a rank's series while it is shown: :meth:`series` of a rank not
    held asks for it (:meth:`wanted`), a worker reads it (:meth:`read_rank`) and
    :meth:`install` hands it over; the :data:`LOADED_RANKS` shown last are kept. Without a
    loader, or at :data:`KEEP_ALL_RANKS` ranks or fewer, every series is held.
    """

    def __init__(self, loader: Loader | None = None) -> None:
        self._ranks: dict[int, RankData] = {}
        self._bands: dict[tuple[str, str], FoldedBand | tuple[int, Band]] = {}
        self._recorded: dict[tuple[str, str], tuple[int, Band]] = {}  # bands ezpz recorded
        self._loader = loader
        self._lean: LeanRanks | None = None
        self._shown: dict[int, None] = {}  # ranks whose series were asked for, oldest first
        self._wanted: set[int] = set()
        self.version = 0
        self._count = 0

    def __getstate__(self) -> dict[str, Any]:
        """A store crosses to another process (the first read's) without its loader, a
        function of the process that made it: the receiver gives it one (:meth:`attach`)."""
        return {**self.__dict__, "_loader": None}

    def attach(self, loader: Loader | None) -> None:
        """Read a rank's series with ``loader`` from now on."""
        self._loader = loader

    @property
    def summaries(self) -> dict[int, RankSummary] | None:
        """A lean store's rank summaries, by rank (None in a store holding every series): the
        first read moves them across processes a few hundred at a time."""
        return self._lean.ranks if self._lean is not None else None

    @classmethod
    def settled(cls, lean: LeanRanks, loader: Loader, records: int) -> MetricStore:
        """A finished run's store from its digest (:mod:`.settled`): the bands and each rank's
        last values, ``records`` records in all; a rank's series read by ``loader`` when a
        view shows it."""
        store = cls(loader)
        store._lean = lean
        store._count = records
        store.version = 1
        return store

    @property
    def lean(self) -> bool:
        """Whether only the bands, the last values and the shown ranks' series are held."""
        return self._lean is not None

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
        if self._lean is not None:
            n0 = self._lean.records(rank) or 0
        else:
            n0 = data.n if data is not None else 0
        steps = _steps(columns.steps, n0)
        times = np.array(columns.timestamps, dtype=np.float64)  # None reads as NaN
        if self._lean is not None:
            self._lean.fold(rank, steps, times, columns.metrics)
            if data is not None:  # a rank on screen: its series grows too
                _append(data, steps, times, _chunks(columns))
        else:
            if data is None:
                data = self._ranks[rank] = RankData()
            _append(data, steps, times, _chunks(columns))
            if self._loader is not None and len(self._ranks) > KEEP_ALL_RANKS:
                self._go_lean()
        self._count += m
        self.version += 1

    def _go_lean(self) -> None:
        """Fold every rank held into a :class:`LeanRanks` and keep only the ranks on screen."""
        lean = LeanRanks()
        for rank, data in self._ranks.items():
            chunks = {name: series.column.view() for name, series in data.series.items()}
            lean.fold(rank, data.steps.view(), data.times.view(), chunks)
        self._lean = lean
        self._bands.clear()
        self._recorded.clear()
        shown = [r for r in self._shown if r in self._ranks][-LOADED_RANKS:]
        self._ranks = {r: self._ranks[r] for r in shown}
        self._shown = dict.fromkeys(shown)

    def reset(self, rank: int) -> None:
        """Forget ``rank``'s data: its file was truncated or replaced and is read again."""
        data = self._ranks.pop(rank, None)
        self._shown.pop(rank, None)
        if self._lean is not None:
            held = self._lean.records(rank)
            if held:
                self._count -= held
                self._lean.forget(rank)
                self.version += 1
        elif data is not None:
            self._count -= data.n
            self._bands.clear()  # folded bands hold this rank's old records
            self.version += 1

    # --- loading a rank's series (a lean store) ---------------------------------------------

    def wanted(self) -> set[int]:
        """Ranks whose series a view asked for and the store does not hold yet."""
        return set(self._wanted)

    def read_rank(self, rank: int) -> RankData | None:
        """``rank``'s series read by the loader (in a worker: it reads a file), or None when
        the store has no loader. Touches nothing of the store."""
        if self._loader is None:
            return None
        data = RankData()
        for columns in self._loader(rank):
            m = len(columns)
            if m:
                steps = _steps(columns.steps, data.n)
                times = np.array(columns.timestamps, dtype=np.float64)
                _append(data, steps, times, _chunks(columns))
        return data

    def install(self, rank: int, data: RankData) -> bool:
        """Hold ``data`` (from :meth:`read_rank`) as ``rank``'s series if it has every record
        the store counted for the rank (the file may have grown since: those records are left
        for the batches that bring them); False when it falls short (it stays wanted: read it
        again)."""
        lean = self._lean
        if lean is None or not lean.holds(rank) or rank in self._ranks:
            self._wanted.discard(rank)
            return False
        held = lean.records(rank)
        if held is not None and data.n < held:
            return False
        self._wanted.discard(rank)
        if held is not None:
            _truncate(data, held)
        self._ranks[rank] = data
        self._shown.pop(rank, None)
        self._shown[rank] = None
        while len(self._ranks) > LOADED_RANKS:
            oldest = next(r for r in self._shown if r in self._ranks)
            del self._ranks[oldest]
            del self._shown[oldest]
        self.version += 1
        return True

    def _held(self, rank: int) -> RankData | None:
        """``rank``'s series; in a lean store, a rank not held is asked for."""
        data = self._ranks.get(rank)
        if data is not None:
            self._shown.pop(rank, None)
            self._shown[rank] = None
        elif self._lean is not None and self._lean.holds(rank):
            self._wanted.add(rank)
        return data

    # --- reading ----------------------------------------------------------------------------

    @property
    def count(self) -> int:
        """Records held across all ranks."""
        return self._count

    @property
    def start_time(self) -> float:
        """The earliest timestamp of the run (NaN when no record has one): time axes count
        seconds from here."""
        if self._lean is not None:
            first = self._lean.start_time()
        else:
            first = min((d.first_time for d in self._ranks.values()), default=math.inf)
        return first if math.isfinite(first) else math.nan

    def names(self) -> list[str]:
        """Metric names, sorted, with ``loss`` first: the one people look at. ezpz's cross-rank
        statistics of a metric (``loss/mean``, ``aggregated/loss/max``...) are not listed: they
        are that metric's band (:mod:`~ezpz_tui.core.watching.metrics.aggregated`)."""
        if self._lean is not None:
            found = folded(self._lean.bands.rows)
        else:
            found = folded(set().union(*(d.series for d in self._ranks.values())))
        return sorted(found, key=lambda name: (name != "loss", name))

    def ranks(self, metric: str | None = None) -> list[int]:
        """Ranks with data (with ``metric``, when given), ascending."""
        if self._lean is not None:
            return self._lean.with_metric(metric)
        return sorted(r for r, d in self._ranks.items() if metric is None or metric in d.series)

    def points(self, rank: int) -> int:
        """Records held for ``rank``."""
        if self._lean is not None:
            return self._lean.records(rank) or 0
        data = self._ranks.get(rank)
        return data.n if data else 0

    def points_of(self, metric: str) -> int:
        """Records held of the ranks with ``metric`` (a settled run's: its values across
        ranks, as its band counts them)."""
        if self._lean is not None:
            return self._lean.points_of(metric)
        return sum(self.points(r) for r in self.ranks(metric))

    def nonfinite(self, metric: str) -> dict[int, NonFinite]:
        """The ranks whose ``metric`` had NaN or ±inf values, with the first of them."""
        out = self._lean.nonfinite(metric) if self._lean is not None else {}
        for rank, data in self._ranks.items():
            series = data.series.get(metric)
            if series is not None and series.bad is not None:
                out.setdefault(rank, series.bad)  # a settled run's digest has no first NaN
        return dict(sorted(out.items()))

    def first_step(self, metric: str) -> int | None:
        """The first step any rank logged ``metric`` at (None before one did)."""
        if self._lean is not None:
            return self._lean.first_step(metric)
        firsts = [int(xs[0]) for r in self.ranks(metric) if len(xs := self.series(metric, r)[0])]
        found = [f for f in firsts if f is not None]
        return min(found) if found else None

    def series(self, metric: str, rank: int, x: XAxis = "step") -> tuple[Array, FloatArray]:
        """``(x, y)`` of ``metric`` on ``rank`` in record order; views of the store when nothing
        has to be left out (records without the metric; on the time axis, records without a
        timestamp). x is the step or the absolute timestamp (see :attr:`start_time`). Empty
        for a rank a lean store does not hold yet: it is asked for (:meth:`wanted`)."""
        data = self._held(rank)
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
        data = self._held(rank)
        series = data.series.get(metric) if data else None
        if data is None or series is None:
            return np.empty(0, dtype=np.int64), np.empty(0)
        keep = ~is_missing(series.column.view()) & ~np.isnan(data.times.view())
        return data.steps.view()[keep], data.times.view()[keep]

    def at_step(self, metric: str, rank: int, step: int) -> tuple[float, float] | None:
        """``(value, timestamp)`` of ``metric`` on ``rank`` at ``step`` (its last record of
        that step), or None where the rank logged no such value. O(1) while the rank's steps
        are consecutive: the cursor's readout asks this of every rank on each move. A lean
        store answers for a rank it does not hold at its last step only (see :meth:`across`)."""
        data = self._ranks.get(rank)
        if data is None and self._lean is not None:
            last = self._lean.last(rank, metric)
            if last is None or last.first is None or last.step != step:
                return None
            return last.value, last.time
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

    def across(self, metric: str, step: int) -> AtStep | None:
        """``metric`` across ranks at ``step`` as a lean store's band holds it (mean, extremes
        and the ranks holding them); None in a store that holds every series (ask
        :meth:`at_step` of each rank) or where no rank logged the metric at ``step``."""
        if self._lean is None or metric not in self._lean.bands.rows:
            return None
        return self._lean.bands.at(metric, step)

    @property
    def nbytes(self) -> int:
        """Bytes of the numpy arrays held: every rank's series (a store holding them all), or
        the bands plus the shown ranks' series (a lean store)."""
        held = sum(_rank_nbytes(d) for d in self._ranks.values())
        return held + (self._lean.nbytes if self._lean is not None else 0)

    def band(self, metric: str, x: XAxis = "step") -> Band:
        """Mean, min and max of ``metric`` across ranks at each step (read-only arrays, valid
        until the store changes). On the time axis each step sits at the earliest timestamp
        any rank logged it (NaN where none did).

        While every rank's steps are consecutive (the usual case), the band is kept up to date
        by folding in only the records added since the last call, so a redraw of a streaming
        run costs what arrived, not the million steps before it; otherwise it is recomputed,
        once per change.
        """
        if self._lean is not None:
            if metric not in self._lean.bands.rows:
                empty = np.empty(0)
                return Band(empty, empty, empty, empty)
            return self._with_recorded(metric, x, self._lean.bands.band(metric, x))
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
        found = sources(metric, self._has)
        if not found:
            return band
        kept = self._recorded.get((metric, x))
        if kept is not None and kept[0] == self.version:
            return kept[1]
        grid = (band if x == "step" else self.band(metric, "step")).x.astype(np.int64)
        recorded = {}
        for statistic, name in found.items():
            if self._lean is not None:  # each rank that recorded it recorded the same value
                of = self._lean.bands.band(name, "step")
                recorded[statistic] = (of.x.astype(np.int64), of.mean)
                continue
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

    def _has(self, name: str) -> bool:
        """Whether some rank logged the metric ``name``."""
        if self._lean is not None:
            return name in self._lean.bands.rows
        return any(name in d.series for d in self._ranks.values())

    def to_xarray(self, metric: str) -> Any:
        """``metric`` as an xarray DataArray over (rank, step), NaN where a rank has no value;
        ``.mean("rank")``, ``.min("rank")``, ``.max("rank")`` give the band. Where a rank logged
        a step twice (a resumed run), the later value is kept. A lean store reads every rank's
        series for it (the array holds them all anyway)."""
        import xarray as xr

        ranks = self.ranks(metric)
        datas = {r: self._ranks.get(r) or self.read_rank(r) or RankData() for r in ranks}
        ranks = [r for r in ranks if metric in datas[r].series]
        steps = [datas[r].steps.view() for r in ranks]
        grid = np.unique(np.concatenate(steps)) if steps else np.empty(0, dtype=np.int64)
        values = np.full((len(ranks), len(grid)), np.nan)
        for row, (rank, rank_steps) in enumerate(zip(ranks, steps, strict=True)):
            ys = datas[rank].series[metric].column.view()
            where = np.searchsorted(grid, rank_steps)
            ys = np.where(is_missing(ys), np.nan, ys)
            if not datas[rank].consecutive:  # repeated steps: keep each one's last value
                _, last = np.unique(where[::-1], return_index=True)
                where, ys = where[::-1][last], ys[::-1][last]
            values[row, where] = ys
        return xr.DataArray(
            values, dims=("rank", "step"), coords={"rank": ranks, "step": grid}, name=metric
        )


def _append(data: RankData, steps: Array, times: FloatArray, chunks: dict[str, FloatArray]) -> None:
    """Append records (their steps, timestamps and values by metric, MISSING where a record
    lacks one) to ``data``."""
    m, n0 = len(steps), data.n
    found = set()
    for name, chunk in chunks.items():
        missing = is_missing(chunk)
        gaps = int(np.count_nonzero(missing))
        if gaps == m:  # a slice of columns may hold a name none of its records has
            continue
        found.add(name)
        series = data.series.get(name)
        if series is None:
            series = data.series[name] = _Series(Column(np.float64, MISSING, n0), n0)
        series.bad = noted_nonfinite(series.bad, chunk, missing, steps, times)
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


def _chunks(columns: RecordColumns) -> dict[str, FloatArray]:
    """Each metric's values as float64 (np.array keeps MISSING's payload)."""
    return {name: np.array(values, dtype=np.float64) for name, values in columns.metrics.items()}


def _truncate(data: RankData, n: int) -> None:
    """Keep ``data``'s first ``n`` records (gap and non-finite counts stay those of the file:
    a gap count too high only masks, and the store's summary counts the non-finite values)."""
    data.steps.n = data.times.n = n
    for series in data.series.values():
        series.column.n = n


def _rank_nbytes(data: RankData) -> int:
    columns = (data.steps, data.times, *(s.column for s in data.series.values()))
    return sum(column.data.nbytes for column in columns)


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
