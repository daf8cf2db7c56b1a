"""The chart ``ezpz-tui plot`` prints: one metric of a run over steps, drawn by plotext.

Kept apart from the CLI's argument handling so the CLI stays a list of small commands, and from
the reading (:mod:`ezpz_tui.core.watching.metrics.one_metric`), which decides what is drawable.
"""

from __future__ import annotations

from ezpz_tui.core.watching.metrics.one_metric import MetricSeries


def chart(series: MetricSeries, title: str, overlay: tuple[str, MetricSeries] | None = None) -> str:
    """Mean over ranks per step, with min and max when several ranks report; ``overlay`` adds
    another run's mean, labelled with its name.

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
    label = "mean over ranks" if len(series.ranks) > 1 else f"rank {min(series.ranks, default=0)}"
    plt.plot(steps, [sum(c) / len(c) for c in columns], label=label)
    if overlay is not None and overlay[1].values:
        name, other = overlay
        there = sorted(other.values)
        plt.plot(there, [sum(other.values[s]) / len(other.values[s]) for s in there], label=name)
    plt.title(title)
    plt.xlabel("step")
    return str(plt.build())


def series_json(series: MetricSeries, run: str) -> dict[str, object]:
    """The series ``plot --json`` prints: per step, the mean, min and max over the ranks."""
    steps = sorted(series.values)
    values = [series.values[s] for s in steps]
    return {
        "run": run,
        "metric": series.name,
        "ranks": sorted(series.ranks),
        "steps": steps,
        "mean": [sum(v) / len(v) for v in values],
        "min": [min(v) for v in values],
        "max": [max(v) for v in values],
        "skipped": series.notes(),
    }
