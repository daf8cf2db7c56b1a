"""Stragglers: ranks whose recent steps take much longer than the other ranks' median.

A rank's step time is the ``dt`` its records carry (:meth:`runtime.History.record` writes the
time the rank measured for its step), else the time between two records over the steps between
them. In a job whose ranks meet in a collective every step, every rank's wall-clock step is the
slowest one's: only a ``dt`` measured before the collective (compute time) tells the straggler
apart, and without one no rank is flagged, which is true, not a miss. UI-free.
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Iterable, Mapping

from runtime.efficiency.flops import FLOPS_PER_TOKEN
from runtime.record_columns import RecordColumns, is_missing

RECENT_STEPS = 3  # step times a rank's recent figure is the median of: one odd step is no flag
SLOW_FACTOR = 1.5


class StepTimes:
    """Each rank's recent step times, fed with the records a follower reads."""

    def __init__(self, slow_factor: float = SLOW_FACTOR) -> None:
        self.slow_factor = slow_factor
        self._recent: dict[int, deque[float]] = {}
        self._last: dict[int, tuple[int, float]] = {}  # (step, timestamp) of the last record
        self._settled: dict[int, float] = {}  # a finished run's, from its digest
        self.tokens_per_s: dict[int, float] = {}  # each rank's latest, for the heatmap
        self.flops_per_token: float | None = None  # the run's, from the first record that says
        self.slow: frozenset[int] = frozenset()
        self.median: float | None = None

    def update(self, records: Mapping[int, RecordColumns], restarted: Iterable[int] = ()) -> None:
        """Take in one batch of records (by rank, in file order) and decide who is slow."""
        for rank in restarted:
            self._recent.pop(rank, None)
            self._last.pop(rank, None)
            self.tokens_per_s.pop(rank, None)
        for rank, columns in records.items():
            self._add(rank, columns)
        if records or restarted:
            self._decide()

    def settle(
        self,
        recent: Mapping[int, float],
        slow: frozenset[int],
        tokens_per_s: Mapping[int, float],
        flops_per_token: float | None,
    ) -> None:
        """Take a finished run's figures as its digest judged them at the end (``recent``:
        each rank's recent step time): no record of it is read again."""
        self._settled = dict(recent)
        self.slow = slow
        self.tokens_per_s = dict(tokens_per_s)
        self.flops_per_token = flops_per_token
        self.median = statistics.median(self._settled.values()) if self._settled else None

    @property
    def ranks(self) -> list[int]:
        """The ranks with records seen so far."""
        return [*self._settled, *(r for r in self._recent if r not in self._settled)]

    def recent(self, rank: int) -> float | None:
        """The median of ``rank``'s last :data:`RECENT_STEPS` step times, in seconds."""
        times = self._recent.get(rank)
        if not times:
            return self._settled.get(rank)
        return statistics.median(times)

    def _add(self, rank: int, columns: RecordColumns) -> None:
        times = self._recent.setdefault(rank, deque(maxlen=RECENT_STEPS))
        rates = columns.metrics.get("tokens_per_s", ())
        latest = next((r for r in reversed(rates) if not is_missing(r)), None)
        if latest is not None:
            self.tokens_per_s[rank] = latest
        if self.flops_per_token is None:
            said = columns.metrics.get(FLOPS_PER_TOKEN, ())
            self.flops_per_token = next((v for v in said if not is_missing(v)), None)
        dts = columns.metrics.get("dt")
        start = max(0, len(columns.steps) - RECENT_STEPS - 1)  # only the newest records matter
        if start:  # the record before the newest few starts their first interval
            step, stamp = columns.steps[start - 1], columns.timestamps[start - 1]
            if step is not None and stamp is not None:
                self._last[rank] = (step, stamp)
        for i in range(start, len(columns.steps)):
            step, stamp = columns.steps[i], columns.timestamps[i]
            dt = None if dts is None or is_missing(dts[i]) else dts[i]
            last = self._last.get(rank)
            if dt is None and last is not None and step is not None and stamp is not None:
                dt = _between(last, step, stamp)
            if dt is not None and dt >= 0:
                times.append(dt)
            if step is not None and stamp is not None:
                self._last[rank] = (step, stamp)

    def _decide(self) -> None:
        recent = [(t, r) for r in self._recent if (t := self.recent(r)) is not None]
        recent.sort()
        times = [t for t, _ in recent]
        self.median = statistics.median(times) if times else None
        if len(times) < 2:  # nobody to be slower than
            self.slow = frozenset()
            return
        # Each rank against the median of the others: with two ranks the peer itself, which a
        # median of both (their mean) could never show twice as fast as the slow one.
        self.slow = frozenset(
            rank
            for i, (t, rank) in enumerate(recent)
            if t > self.slow_factor * _median_without(times, i) > 0
        )


def _between(last: tuple[int, float], step: int, stamp: float) -> float | None:
    """Seconds a step between the record ``last`` and this one; None when they go backwards."""
    if step <= last[0] or stamp < last[1]:
        return None
    return (stamp - last[1]) / (step - last[0])


def _median_without(ordered: list[float], i: int) -> float:
    """The median of the sorted ``ordered`` without its ``i``-th value, in O(1)."""

    def at(j: int) -> float:  # the j-th of the values left
        return ordered[j if j < i else j + 1]

    left = len(ordered) - 1
    half = left // 2
    return at(half) if left % 2 else (at(half - 1) + at(half)) / 2
