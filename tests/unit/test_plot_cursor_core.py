"""The UI-free side of the plot's cursor: events on a curve, the zoom window, the readout,
the small multiples' metrics, and finding a step's line in a log."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ezpz_tui.core.watching.metrics.cursor import pan, readout, stacked_metrics, zoom
from ezpz_tui.core.watching.metrics.events import find_events, next_event
from ezpz_tui.core.watching.metrics.plot import PlotSettings
from ezpz_tui.core.watching.metrics.store import MetricStore
from ezpz_tui.core.watching.steplines import line_of_step
from runtime.records import Record


def test_events_spike_nonfinite_gap_and_relaunch() -> None:
    rng = np.random.default_rng(0)
    y = np.exp(-np.arange(1000) / 300) + rng.normal(0, 0.01, 1000)
    y[500] += 0.5
    y[700] = np.nan
    steps = np.arange(1000)
    steps[800:] += 5
    found = find_events(steps, y, {"parent": 300})
    assert [(e.index, e.kind) for e in found] == [
        (301, "relaunch"),
        (500, "spike"),
        (700, "nonfinite"),
        (800, "gap"),
    ]
    assert found[1].text.startswith("spike +0.5") and found[2].text == "NaN"
    assert found[3].text == "gap: 5 steps missing after step 799"
    assert next_event(found, 500, 1) == found[2]
    assert next_event(found, 500, -1) == found[0]
    assert next_event(found, 800, 1) is None


def test_a_smooth_or_flat_curve_has_no_spikes() -> None:
    assert find_events(np.arange(5000), np.exp(-np.arange(5000) / 900.0)) == []
    assert find_events(np.arange(100), np.full(100, 1e-3)) == []


def test_zoom_and_pan_stay_inside_the_data() -> None:
    full = (0.0, 100.0)
    window = zoom(None, full, 50.0, 0.5)
    assert window == (25.0, 75.0)
    assert zoom(window, full, 95.0, 0.5) == (75.0, 100.0)  # clamped at the end
    assert zoom(window, full, 50.0, 4.0) is None  # covers everything: no window
    assert pan(window, full, 0.5) == (50.0, 100.0)
    assert pan((50.0, 100.0), full, 0.5) == (50.0, 100.0)
    assert pan(None, full, 0.5) is None


def test_readout_of_the_band_names_the_extreme_ranks() -> None:
    store = MetricStore()
    for rank, value in ((0, 1.0), (1, 3.0), (2, 2.0)):
        store.add(rank, [Record(rank, s, 100.0 + s, {"loss": value + s}) for s in range(5)])
    reading = readout(store, PlotSettings("loss", mode="band"), 2)
    assert reading.values == [("mean", 4.0), ("min r0", 3.0), ("max r1", 5.0)]
    assert reading.time == 102.0 and reading.rank in (0, 1)
    one = readout(store, PlotSettings("loss", rank=2), 4)
    assert one.values == [("rank 2", 6.0)] and one.rank == 2
    assert readout(store, PlotSettings("loss"), 99).values == []


def test_stacked_metrics_prefer_the_four_and_fill_up() -> None:
    names = ["dt", "grad_norm", "loss", "lr", "tokens_per_s"]
    assert stacked_metrics(names, "loss") == ["loss", "lr", "grad_norm", "tokens_per_s"]
    assert stacked_metrics(["acc", "loss"], "acc") == ["acc", "loss"]


@pytest.mark.parametrize(
    ("step", "expected"),
    [(12, (2, "exact")), (13, (2, "before")), (1, (1, "after"))],
)
def test_line_of_step_by_the_step_it_names(step: int, expected: tuple[int, str]) -> None:
    texts = ["starting", "[INFO] step 10/100 loss=1.0", "step 12/100 loss=0.9", "done"]
    assert line_of_step(texts, step) == expected


def test_line_of_step_without_steps_goes_by_proportion() -> None:
    texts = [f"line {i}" for i in range(101)]
    assert line_of_step(texts, 50, (0, 100)) == (50, "proportion")
    assert line_of_step([], 5) == (0, "none")
    assert math.isclose(line_of_step(texts, 500, (0, 100))[0], 100)
