"""What the store keeps of a run too large to hold every rank's series: the band and each rank's
last values, folded in as records arrive.

A 4,096-rank run of 300 steps and 9 metrics holds 88 MB of float64 series, a 16,384-rank one
350 MB, yet a plot shows one rank's line over the band. :class:`LeanRanks` keeps every metric's
band in :class:`StepBands` (per metric and step: the sum and count of the values, their min and
max with the rank holding each; per step the earliest timestamp) and, per rank, a
:class:`RankSummary` (records held, and per metric its first step, last value and non-finite
values): memory grows with steps + ranks, not their product. A rank's full series is read
from its file when a view shows it (:meth:`.store.MetricStore.series`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ezpz_tui.core.watching.metrics.arrays import Column, NonFinite, is_missing, noted_nonfinite
from ezpz_tui.core.watching.metrics.band import Band
from runtime.record_columns import MISSING

if TYPE_CHECKING:
    from numpy.typing import NDArray

    FloatArray = NDArray[np.float64]
    Array = NDArray[Any]

    from ezpz_tui.core.watching.metrics.store import XAxis

_NO_RANK = -1


class AtStep(NamedTuple):
    """A metric across ranks at one step: the mean, the extremes and the ranks holding them,
    and the earliest timestamp (NaN where none)."""

    mean: float
    lo: float
    lo_rank: int
    hi: float
    hi_rank: int
    time: float


_TABLES = (
    ("total", np.float64, 0.0),
    ("count", np.int32, 0),  # values (not NaN) at the step
    ("present", np.int32, 0),  # records at the step of ranks holding the metric
    ("lo", np.float64, math.nan),
    ("hi", np.float64, math.nan),
    ("lo_rank", np.int32, _NO_RANK),
    ("hi_rank", np.int32, _NO_RANK),
)
"""The per-step tables of every metric (one row each): their type and what a step no rank
logged holds."""


class StepBands:
    """Every metric across ranks at each step any rank logged (ascending), grown in place: per
    metric and step the sum and count of the values, their min and max with the rank holding
    each; per step the earliest timestamp.

    One row per metric in 2-d tables, so a batch folds in a dozen numpy calls however many
    metrics it holds. A batch whose steps all follow the last one (a streaming run) appends;
    steps already held (the other ranks catching up) are folded where they sit; only a step
    before the last one that no rank logged yet (a rank starting behind, a resume) rebuilds the
    tables. Repeats count twice, as :func:`~ezpz_tui.core.watching.metrics.band.general_band`
    counts them.
    """

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.steps = Column(np.int64)
        self.when = Column(np.float64)
        self.tables = {name: np.empty((0, 16), dtype) for name, dtype, _ in _TABLES}
        self.changes = 0
        self._bands: dict[str, tuple[int, Band, Band]] = {}

    def row(self, name: str) -> int:
        """The row of metric ``name``, added where it is new."""
        row = self.rows.get(name)
        if row is None:
            row = self.rows[name] = len(self.rows)
            if row >= len(self.tables["total"]):
                self._resize(max(4, 2 * row), self.tables["total"].shape[1])
        return row

    def _resize(self, rows: int, columns: int) -> None:
        n = self.steps.n
        for name, dtype, fill in _TABLES:
            old = self.tables[name]
            grown = np.full((rows, columns), fill, dtype=dtype)
            grown[: len(old), :n] = old[:, :n]
            self.tables[name] = grown

    def _positions(self, steps: Array) -> Array:
        """Where ``steps`` sit in the grid, making room for those it lacks."""
        held = self.steps.view()
        if len(held) and held[-1] - held[0] + 1 == len(held):  # consecutive: no search
            pos = steps - held[0]
            if pos.min() >= 0 and pos.max() < len(held):
                return pos
        else:
            pos = np.searchsorted(held, steps)
            inside = pos < len(held)
            if inside.all() and (held[pos] == steps).all():
                return pos
        new = np.setdiff1d(steps, held)
        n = len(held)
        if not n or new[0] > held[-1]:  # all after the last: append
            if n + len(new) > self.tables["total"].shape[1]:
                self._resize(len(self.tables["total"]), max(n + len(new), 2 * n))
            self.steps.extend(new)
            self.when.extend(np.full(len(new), math.nan))
        else:
            grid = np.union1d(held, new)
            where = np.searchsorted(grid, held)
            for name, dtype, fill in _TABLES:
                old = self.tables[name]
                grown = np.full((len(old), max(len(grid), old.shape[1])), fill, dtype=dtype)
                grown[:, where] = old[:, :n]
                self.tables[name] = grown
            when = np.full(len(grid), math.nan)
            when[where] = self.when.view()
            self.when.data, self.when.n = when, len(grid)
            self.steps.data, self.steps.n = grid, len(grid)
        return np.searchsorted(self.steps.view(), steps)

    def fold(self, rank: int, steps: Array, times: FloatArray, rows: Array, ys: FloatArray) -> None:
        """Fold one rank's records: their steps and timestamps, and the values (``ys``, a row
        per metric of the rank: NaN where a record has none) of the metrics at ``rows``."""
        if not len(steps):
            return
        pos = self._positions(steps)
        t = self.tables
        absent = np.isnan(ys)
        if len(pos) > 1 and not bool(np.all(np.diff(pos) > 0)):
            # A step twice in one batch: fold one record at a time.
            for i in range(len(pos)):
                self.fold(rank, steps[i : i + 1], times[i : i + 1], rows, ys[:, i : i + 1])
            return
        # Slices where the batch's steps and the rank's metrics are runs of the tables (the
        # usual case): views, not copies.
        across: slice | Array = (
            slice(int(pos[0]), int(pos[-1]) + 1) if pos[-1] - pos[0] + 1 == len(pos) else pos
        )
        down: slice | Array = (
            slice(int(rows[0]), int(rows[-1]) + 1)
            if len(rows) and rows[-1] - rows[0] + 1 == len(rows) and bool(np.all(np.diff(rows) > 0))
            else rows
        )
        at: tuple[Any, ...] = (
            (down if isinstance(down, slice) else down[:, None], across)
            if isinstance(down, slice) or isinstance(across, slice)
            else np.ix_(rows, pos)
        )
        t["total"][at] += np.where(absent, 0.0, ys)
        t["count"][at] += ~absent
        t["present"][at] += 1
        self.when.data[across] = np.fmin(self.when.data[across], times)
        for extreme, ranks, pick in (("lo", "lo_rank", np.fmin), ("hi", "hi_rank", np.fmax)):
            before = t[extreme][at].copy()  # a view where ``at`` is slices
            after = pick(before, ys)
            t[extreme][at] = after
            moved = ~np.isnan(after) & ((after != before) | np.isnan(before))
            held = t[ranks][at]
            held[moved] = rank
            t[ranks][at] = held
        self.changes += 1

    def band(self, name: str, x: XAxis) -> Band:
        """Metric ``name``'s band as the store hands it out (read-only arrays, valid until the
        next fold): the steps where a rank holding it logged a record."""
        kept = self._bands.get(name)
        if kept is None or kept[0] != self.changes:
            row, n = self.rows[name], self.steps.n
            t = {key: table[row, :n] for key, table in self.tables.items()}
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = t["total"] / t["count"]
            xs, when, lo, hi = (
                self.steps.view().astype(np.float64),
                self.when.view(),
                t["lo"],
                t["hi"],
            )
            present = t["present"] > 0
            if not present.all():
                xs, when, mean, lo, hi = (a[present] for a in (xs, when, mean, lo, hi))
            parts = (xs, when, mean, lo, hi)
            for part in parts:
                part.flags.writeable = False
            kept = self._bands[name] = (
                self.changes,
                Band(xs, mean, lo, hi),
                Band(when, mean, lo, hi),
            )
        return kept[1] if x == "step" else kept[2]

    def at(self, name: str, step: int) -> AtStep | None:
        """Metric ``name`` across ranks at ``step``, or None where no rank logged it there."""
        held = self.steps.view()
        i = int(np.searchsorted(held, step))
        row = self.rows[name]
        if i >= len(held) or held[i] != step or not self.tables["count"][row, i]:
            return None
        t = {key: table[row, i] for key, table in self.tables.items()}
        return AtStep(
            float(t["total"] / t["count"]),
            float(t["lo"]),
            int(t["lo_rank"]),
            float(t["hi"]),
            int(t["hi_rank"]),
            float(self.when.data[i]),
        )

    @property
    def nbytes(self) -> int:
        tables = sum(table.nbytes for table in self.tables.values())
        return tables + self.steps.data.nbytes + self.when.data.nbytes


class Last:
    """One metric of one rank: its first step and last record holding it, gaps, non-finite."""

    __slots__ = ("bad", "first", "missing", "step", "time", "value")

    def __init__(self) -> None:
        self.first: int | None = None
        self.step = 0
        self.value = math.nan
        self.time = math.nan
        self.missing = 0  # records of the rank without this metric
        self.bad: NonFinite | None = None


class RankSummary:
    """One rank without its series: records held, its earliest timestamp, its last values."""

    __slots__ = ("first_time", "last", "n")

    def __init__(self) -> None:
        self.n = 0
        self.first_time = math.inf
        self.last: dict[str, Last] = {}


class LeanRanks:
    """Every rank's summary and every metric's band, folded in batch by batch."""

    def __init__(self) -> None:
        self.ranks: dict[int, RankSummary] = {}
        self.bands = StepBands()

    def fold(
        self,
        rank: int,
        steps: Array,
        times: FloatArray,
        metrics: dict[str, list[float] | FloatArray],
    ) -> RankSummary:
        """Fold one rank's records: ``metrics`` maps a name to its values, MISSING where a
        record lacks it (a metric of the rank absent from ``metrics`` is missing throughout)."""
        summary = self.ranks.get(rank)
        if summary is None:
            summary = self.ranks[rank] = RankSummary()
        m = len(steps)
        if not m:
            return summary
        n0 = summary.n
        summary.n += m
        timed = ~np.isnan(times)
        if timed.any():
            summary.first_time = min(summary.first_time, float(times[timed].min()))
        held = len(summary.last)
        names = [*summary.last, *(n for n in metrics if n not in summary.last)]
        ys = np.full((len(names), m), MISSING)
        for i, name in enumerate(names):
            values = metrics.get(name)
            if values is not None:
                ys[i] = values  # float64 assignment keeps MISSING's payload
        missing = is_missing(ys)
        logged = ~missing.all(axis=1)
        if not logged[held:].all():  # a slice of columns may name what none of its records has
            keep = np.flatnonzero(logged | (np.arange(len(names)) < held))
            names = [names[i] for i in keep]
            ys, missing, logged = ys[keep], missing[keep], logged[keep]
        last_i = m - 1 - np.argmax(~missing[:, ::-1], axis=1)
        first_i = np.argmax(~missing, axis=1)
        bad = ~np.isfinite(ys) & ~missing
        bad_rows = bad.any(axis=1)
        for i, name in enumerate(names):
            last = summary.last.get(name)
            if last is None:
                last = summary.last[name] = Last()
                last.missing = n0
            if not logged[i]:
                last.missing += m
                continue
            j = int(last_i[i])
            last.missing += m - int(np.count_nonzero(~missing[i]))
            last.step, last.value, last.time = int(steps[j]), float(ys[i, j]), float(times[j])
            if last.first is None:
                last.first = int(steps[first_i[i]])
            if bad_rows[i]:
                last.bad = noted_nonfinite(last.bad, ys[i], missing[i], steps, times)
        rows = np.array([self.bands.row(name) for name in names], dtype=np.intp)
        self.bands.fold(rank, steps, times, rows, ys)
        return summary

    def forget(self, rank: int) -> None:
        """Drop ``rank``'s summary (its file began again). What it folded into the bands stays:
        a band cannot be unfolded without every rank's series."""
        self.ranks.pop(rank, None)

    # --- what the store asks (a settled run's answers from columns: :mod:`.settled`) --------

    def holds(self, rank: int) -> bool:
        """Whether ``rank`` has records here."""
        return rank in self.ranks

    def records(self, rank: int) -> int | None:
        """Records folded for ``rank`` (0: none); None where the count is not known, and a
        series read from the rank's file is whole (a settled run's)."""
        summary = self.ranks.get(rank)
        return summary.n if summary is not None else 0

    def last(self, rank: int, metric: str) -> Last | None:
        """``rank``'s last record holding ``metric``."""
        summary = self.ranks.get(rank)
        return summary.last.get(metric) if summary is not None else None

    def with_metric(self, metric: str | None) -> list[int]:
        """Ranks holding ``metric`` (any record, with None), ascending."""
        held = self.ranks.items()
        return sorted(r for r, d in held if metric is None or metric in d.last)

    def points_of(self, metric: str) -> int:
        """Records folded of the ranks holding ``metric``."""
        return sum(d.n for d in self.ranks.values() if metric in d.last)

    def start_time(self) -> float:
        """The earliest timestamp of any rank (inf: none)."""
        return min((d.first_time for d in self.ranks.values()), default=math.inf)

    def nonfinite(self, metric: str) -> dict[int, NonFinite]:
        """The ranks whose ``metric`` had NaN or ±inf values, with the first of them."""
        out = {}
        for rank, summary in self.ranks.items():
            last = summary.last.get(metric)
            if last is not None and last.bad is not None:
                out[rank] = last.bad
        return dict(sorted(out.items()))

    def first_step(self, metric: str) -> int | None:
        """The first step any rank logged ``metric`` at."""
        firsts = [s.last[metric].first for s in self.ranks.values() if metric in s.last]
        found = [f for f in firsts if f is not None]
        return min(found) if found else None

    @property
    def nbytes(self) -> int:
        """Bytes of the bands' arrays: what grows with the steps."""
        return self.bands.nbytes
