"""ezpz's cross-rank statistics folded into the metric they describe.

ezpz's ``History`` (``src/ezpz/history.py``) all-reduces every scalar metric and rank 0 records
the result twice: ``loss/mean``, ``loss/max``, ``loss/min``, ``loss/std`` among its metrics, and
the same keys in an ``aggregated`` object (read as ``aggregated/loss/mean``...). Listed as they
come, ``loss`` would appear nine times. Here they are not metrics of their own: a statistic of a
metric that is present is left out of the names, and its mean / min / max become the band of
that metric at the steps where they were recorded (they cover every rank, including ranks whose
own records this reader never saw).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

    from ezpz_tui.core.watching.metrics.band import Band

    Array = NDArray[Any]

STATISTICS = ("mean", "min", "max", "std")
AGGREGATED = "aggregated/"


def statistic_of(name: str, names: set[str] | frozenset[str]) -> str | None:
    """The metric of ``names`` that ``name`` is a cross-rank statistic of, or None."""
    plain = name.removeprefix(AGGREGATED)
    base, slash, statistic = plain.rpartition("/")
    if slash and statistic in STATISTICS and base in names:
        return base
    return None


def folded(names: Iterable[str]) -> list[str]:
    """``names`` without the statistics of a metric among them."""
    present = set(names)
    return [name for name in present if statistic_of(name, present) is None]


def sources(metric: str, has: Callable[[str], bool]) -> dict[str, str]:
    """The series holding ``metric``'s mean, min and max across ranks, by statistic: the
    ``aggregated`` object's where a rank recorded it, else the ``<metric>/<stat>`` metric."""
    found = {}
    for statistic in ("mean", "min", "max"):
        for name in (f"{AGGREGATED}{metric}/{statistic}", f"{metric}/{statistic}"):
            if has(name):
                found[statistic] = name
                break
    return found


def overlay(band: Band, grid: Array, recorded: dict[str, tuple[Array, Array]]) -> Band:
    """``band`` with its mean / min / max replaced by the recorded statistics where there are
    any. ``grid`` is the step of each point of ``band``, ascending; ``recorded`` maps a
    statistic to the ``(steps, values)`` it was recorded at."""
    out = {"mean": band.mean.copy(), "min": band.lo.copy(), "max": band.hi.copy()}
    for statistic, (steps, values) in recorded.items():
        where = np.searchsorted(grid, steps)
        inside = where < len(grid)
        inside[inside] = grid[where[inside]] == steps[inside]
        out[statistic][where[inside]] = values[inside]
    return type(band)(band.x, out["mean"], out["min"], out["max"])
