"""The chart ``ezpz-tui plot`` prints: one metric of a run over steps, drawn by plotext.

Kept apart from the CLI's argument handling so the CLI stays a list of small commands, and from
the reading (:mod:`ezpz_tui.core.watching.metrics.one_metric`), which decides what is drawable.
"""

from __future__ import annotations

from ezpz_tui.core.watching.metrics.one_metric import MetricSeries


def chart(series: MetricSeries, title: str) -> str:
    """Mean over ranks per step, with min and max when several ranks report.

    May raise whatever plotext raises on values it cannot scale (an ``OverflowError`` for a
    span near the float range); the caller explains that instead of drawing.
    """
    import plotext as plt

    steps = sorted(series.values)
    columns = [series.values[s] for s in steps]
    plt.clear_figure()
    plt.theme("clear")  # the terminal's own colours, readable on dark and light schemes
    if len(series.ranks) > 1:
        plt.plot(steps, [max(c) for c in columns], label="max", color="gray")
        plt.plot(steps, [min(c) for c in columns], label="min", color="gray")
    plt.plot(steps, [sum(c) / len(c) for c in columns], label="mean over ranks")
    plt.title(title)
    plt.xlabel("step")
    return str(plt.build())
