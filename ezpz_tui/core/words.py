"""Words the CLI, the TUI and the reports share, so they never say the same thing two ways."""

from __future__ import annotations

import math
from collections.abc import Iterable


def rank_ranges(ranks: Iterable[int]) -> str:
    """``0-3,7,9-10``: a thousand ranks in one line."""
    spans: list[list[int]] = []
    for rank in sorted(set(ranks)):
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            spans.append([rank, rank])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def short_number(value: float | None) -> str:
    """A figure in at most 6 characters, for tables: ``2048``, ``65.5k``, ``1.2M``, ``0.6489``,
    ``nan``, and ``-`` for none."""
    if value is None:
        return "-"
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    size = abs(value)
    if size >= 1e6:
        return f"{value / 1e6:.3g}M"
    if size >= 1e4:
        return f"{value / 1e3:.3g}k"
    return f"{value:.0f}" if size >= 100 else f"{value:.4g}"


def percent_of(fraction: float | None) -> str:
    """A fraction (MFU) as a percentage in at most 5 characters: ``41.2%``, ``0.37%``,
    ``<.01%``, and ``-`` for none."""
    if fraction is None or not math.isfinite(fraction):
        return short_number(fraction)
    pct = fraction * 100
    if pct >= 100:
        return f"{pct:.0f}%"
    if pct >= 1:
        return f"{pct:.3g}%"
    return f"{pct:.2f}%" if pct >= 0.01 else "<.01%"
