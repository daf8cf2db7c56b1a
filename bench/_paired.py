"""Paired statistics for a cost measured as on/off ratios of interleaved runs: the median ratio
with a bootstrap 95% confidence interval, a sign test, and what they say about a threshold.

A bench that alternates a feature on and off gets one ratio per pair of neighbouring runs, so
slow drift of the machine's load cancels within a pair; the median of the ratios shrugs off a
pair another process disturbed. The percentile bootstrap needs no assumption on the ratios'
spread, and its seed is fixed so a rerun on the same figures prints the same interval. Imported
as a sibling (``from _paired import ...``); not a bench itself.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

RESAMPLES = 5000


@dataclass(frozen=True)
class Estimate:
    """The median of paired ratios, its 95% interval, and the sign test's two-sided p-value."""

    median: float
    low: float
    high: float
    above: int  # pairs whose ratio is above 1
    pairs: int
    p_value: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def median_ci(values: Sequence[float], level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of the median of ``values``."""
    rng = random.Random(seed)
    n = len(values)
    medians = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(RESAMPLES))
    tail = (1 - level) / 2
    return medians[int(tail * RESAMPLES)], medians[min(RESAMPLES - 1, int((1 - tail) * RESAMPLES))]


def sign_test(ratios: Sequence[float]) -> tuple[int, float]:
    """How many ratios are above 1, and the exact two-sided binomial p-value of that count
    (ties at exactly 1 left out) under "on and off cost the same"."""
    above = sum(r > 1 for r in ratios)
    n = above + sum(r < 1 for r in ratios)
    if n == 0:
        return above, 1.0
    k = min(above, n - above)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return above, min(1.0, 2 * tail)


def estimate(ratios: Sequence[float]) -> Estimate:
    """The median ratio, its interval and the sign test, from one ratio per pair."""
    if len(ratios) < 2:
        raise ValueError("a confidence interval needs at least 2 pairs")
    low, high = median_ci(ratios)
    above, p_value = sign_test(ratios)
    return Estimate(statistics.median(ratios), low, high, above, len(ratios), p_value)


def describe(found: Estimate, threshold: float = 0.01) -> list[str]:
    """The estimate as a cost in percent, its interval, and whether ``threshold`` is resolved:
    the interval narrower than the threshold either side, and on which side of it the cost is."""
    pct = (found.median - 1) * 100
    lines = [
        f"cost {pct:+.2f}% (median on/off ratio {found.median:.4f} of {found.pairs} pairs), "
        f"95% CI {(found.low - 1) * 100:+.2f}% .. {(found.high - 1) * 100:+.2f}% "
        f"(half-width {found.half_width * 100:.2f}%)",
        f"sign test: on slower in {found.above} of {found.pairs} pairs, two-sided p = "
        f"{found.p_value:.3g}",
    ]
    resolved = found.half_width < threshold
    if found.high < 1 + threshold:
        side = f"below {threshold:.0%}: the whole interval is under +{threshold:.0%}"
    elif found.low > 1 + threshold:
        side = f"above {threshold:.0%}: the whole interval is over +{threshold:.0%}"
    else:
        side = f"not decided: the interval straddles +{threshold:.0%}"
    word = "resolved" if resolved else "NOT resolved (run more pairs, on a quieter machine)"
    lines.append(f"{threshold:.0%} {word}; cost {side}")
    return lines
