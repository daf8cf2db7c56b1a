"""The Metrics view driven through Pilot: records from real JSONL (fixture runs written with
``runtime.records.encode``), the plot keys, what plotext is given, throttled redraws, overlays,
theme colours, bad values, and a snapshot."""

from __future__ import annotations

import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.pilot import Pilot
from textual.widgets import Footer, Static

from ezpz_tui.core.watching.followers import RunFollower
from ezpz_tui.core.watching.metrics.load import load_store
from ezpz_tui.core.watching.metrics.plot import ALL_RANKS_LIMIT
from ezpz_tui.core.watching.metrics.store import KEEP_ALL_RANKS, MetricStore
from ezpz_tui.ui.widgets.metric_plot import MetricPlot, PlotColours
from ezpz_tui.ui.widgets.metrics import REDRAW_S, MetricsView
from runtime import records
from runtime.records import Record
from tests.fixtures.runs import make_run

Snap = Callable[..., bool]
SIZE = (100, 30)
CREATED = 1795350000.0
FAILED = "20261122-102000-000-tp2pp1cp1"


class Host(App[None]):
    """The view alone over a footer, focused, as the app's Metrics tab holds it."""

    def compose(self) -> ComposeResult:
        yield MetricsView(id="metrics")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(MetricsView).focus()


def failed_run(outputs: Path) -> Path:
    """8 ranks, rank 3 fails at step 20 of 40 with a NaN loss, as in the app snapshots."""
    failure: dict[str, Any] = {"state": "failed", "exit_code": 1, "failing_rank": 3}
    return make_run(
        outputs, run_id=FAILED, sizes={"tp": 2}, ranks=8, steps=40, created=CREATED, **failure
    )


def noisy_run(outputs: Path) -> Path:
    """4 ranks x 120 steps whose losses spread (so the band is wide), written through
    ``runtime.records.encode``; rank 2's loss turns NaN at step 100."""
    run = outputs / "20261122-110000-000-tp1pp1cp1"
    (run / "metrics").mkdir(parents=True)
    for rank in range(4):
        lines = []
        for step in range(120):
            loss = 4.0 * math.exp(-step / 35) + 0.6 + 0.25 * math.sin(0.7 * step + 2 * rank)
            value = math.nan if rank == 2 and step >= 100 else round(loss, 6)
            metrics = {"loss": records.to_plain(value), "lr": 1e-3}
            lines.append(records.encode(rank, step, metrics, CREATED + 0.5 * step + 0.01 * rank))
        (run / "metrics" / f"rank-{rank:05d}.jsonl").write_bytes(b"".join(lines))
    return run


def follow(view: MetricsView, run: Path) -> None:
    """What the app does with a follower batch: the records by rank, and the restarts."""
    batch = RunFollower(run).poll()
    view.set_run(run.name)
    view.add_records(batch.records, batch.metric_restarts)
    view.redraw()


def status(view: MetricsView) -> str:
    rendered = view.query_one("#metrics-status", Static).render()
    return str(rendered)


def plotted(view: MetricsView) -> list[list[float]]:
    """The y values of every line plotext was given at the last paint."""
    return view.query_one(MetricPlot).plt.monitor.y


async def painted(pilot: Pilot[None]) -> Text:
    """Wait for the repaint, then the plot's picture."""
    await pilot.pause()
    rendered = pilot.app.query_one(MetricPlot).render()
    assert isinstance(rendered, Text)
    return rendered


async def test_no_data_says_so() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MetricsView)
        text = await painted(pilot)
        assert text.plain.startswith("no metrics yet — launch a run")
        view.set_run("20261122-fresh")
        text = await painted(pilot)
        assert "no metrics yet — 20261122-fresh has written no" in text.plain
        assert status(view) == "20261122-fresh · no metrics yet"
        await pilot.press("m", "v", "s", "y", "x")  # keys with nothing to plot do no harm
        assert "no metrics yet" in (await painted(pilot)).plain


async def test_records_from_a_run_are_plotted_with_the_nan_marked(tmp_path: Path) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MetricsView)
        follow(view, failed_run(tmp_path))
        text = await painted(pilot)
        line = status(view)
        assert line.startswith("loss (1/4)  ⚠ NaN on rank 3 from step 20 · rank 0 · raw")
        assert "21 pts → 21" in line
        ys = plotted(view)
        assert len(ys) == 1 and len(ys[0]) == 21 and ys[0][0] == pytest.approx(5.25, abs=0.05)
        assert "5.2" in text.plain  # the y ticks
        assert view.query_one(MetricPlot).plt.monitor.vcoord[0] == []  # rank 0 has no NaN
        view.set_selected_rank(3)
        await painted(pilot)
        assert "· rank 3 ·" in status(view)
        assert len(plotted(view)[0]) == 20  # the NaN at step 20 is not a point of the line
        assert view.query_one(MetricPlot).plt.monitor.vcoord[0] == [20.0]  # but is marked


async def test_keys_change_metric_view_smoothing_scale_and_axis(tmp_path: Path) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MetricsView)
        follow(view, failed_run(tmp_path))
        await painted(pilot)
        await pilot.press("m")
        assert status(view).startswith("dt (2/4)")
        await pilot.press("M", "M")
        assert status(view).startswith("tokens_per_s (4/4)")
        await pilot.press("m")
        assert status(view).startswith("loss (1/4)")

        await pilot.press("v")
        assert "· all 8 ranks ·" in status(view)
        await painted(pilot)
        assert len(plotted(view)) == 8
        await pilot.press("v")
        assert "· mean, min–max of 8 ranks ·" in status(view)
        await painted(pilot)
        band, mean = plotted(view)
        assert len(mean) == 21 and len(band) == 2 * 21  # a stroke per step: 21 < the width
        await pilot.press("v")
        assert "· rank 0 ·" in status(view)

        raw = list(plotted(view)[0])
        await pilot.press("s")
        assert "· ema 0.6 ·" in status(view)
        await painted(pilot)
        smooth = plotted(view)[0]
        assert smooth[0] == raw[0] and smooth[5] > raw[5]  # the EMA lags a falling loss
        await pilot.press("s", "s", "s")
        assert "· raw ·" in status(view)

        await pilot.press("y")
        assert "· log10 ·" in status(view)
        await painted(pilot)
        assert plotted(view)[0][0] == pytest.approx(math.log10(raw[0]))
        await pilot.press("y", "x")
        assert "· x: time (s) ·" in status(view)
        await painted(pilot)
        xs = view.query_one(MetricPlot).plt.monitor.x[0]
        assert xs[0] == 0.0 and xs[1] == pytest.approx(0.25)  # seconds from rank 0's start


async def test_streaming_redraws_are_throttled(tmp_path: Path) -> None:
    run = failed_run(tmp_path)
    batch = RunFollower(run).poll()
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MetricsView)
        view.set_run(run.name)
        first = {rank: recs[:5] for rank, recs in batch.records.items()}
        view.add_records(first, set())
        await pilot.pause(REDRAW_S + 0.2)  # the first data shows at the next timer
        assert "5 pts → 5" in status(view)
        await pilot.press("s", "s", "s", "s")  # a key redraws at once (smoothing round trip)
        rest = {rank: recs[5:] for rank, recs in batch.records.items()}
        view.add_records(rest, set())
        await pilot.pause(0.05)
        assert "5 pts → 5" in status(view)  # not yet: the last redraw was just now
        await pilot.pause(REDRAW_S)
        assert "21 pts → 21" in status(view)
        await pilot.pause(REDRAW_S)  # after a quiet spell the next record shows at once
        view.add_records({0: [Record(0, 21, None, {"loss": 1.0})]}, set())
        await pilot.pause(0.3)
        assert "22 pts → 22" in status(view)
        view.add_records({}, {0})  # rank 0's file began again
        view.redraw()
        assert "· rank 1 (rank 0 has no loss) ·" in status(view)


async def test_many_ranks_draw_the_band_and_the_selected_rank() -> None:
    store_records = {
        rank: [Record(rank, s, 100.0 + s, {"loss": 2.0 + rank / 100 - s / 100}) for s in range(50)]
        for rank in range(ALL_RANKS_LIMIT * 16)
    }
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MetricsView)
        view.set_run("big")
        view.add_records(store_records, set())
        view.set_selected_rank(200)
        await pilot.press("v")
        line = status(view)
        assert "mean, min–max of 256 ranks + rank 200 (more than 16 ranks)" in line
        await painted(pilot)
        band, mean, rank = plotted(view)
        assert len(band) == 2 * 50
        assert rank[0] == pytest.approx(4.0) and mean[0] == pytest.approx(2.0 + 1.275)


async def test_a_rank_not_held_is_drawn_once_its_file_is_read(tmp_path: Path) -> None:
    """Past KEEP_ALL_RANKS ranks the store keeps the bands and the shown ranks' series (issue
    34): the selected rank's series is read from its file in a worker, then drawn."""
    run = make_run(
        tmp_path,
        run_id="20261128-113000-000-tp1pp1cp1",
        state="succeeded",
        exit_code=0,
        sizes={},
        ranks=KEEP_ALL_RANKS + 16,
        steps=30,
        created=CREATED,
    )
    batch = RunFollower(run).poll()
    full = MetricStore()
    for rank, columns in batch.records.items():
        full.add(rank, columns)
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MetricsView)
        view.set_run(run.name, run)
        view.add_records(batch.records, batch.metric_restarts)
        view.set_selected_rank(70)
        drawing = view.drawing(view.query_one(MetricPlot).size.width)
        assert view.store is not None and view.store.lean
        assert drawing is not None and drawing.message == "reading rank 70's loss from its file…"
        await app.workers.wait_for_complete()
        await painted(pilot)
        assert "· rank 70 · raw" in status(view)
        assert plotted(view) == [pytest.approx(full.series("loss", 70)[1].tolist())]


class Beside(App[None]):
    """The view beside a sidebar, so it can be made full screen (the app's F key)."""

    CSS = "#side { width: 40; }"

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Static("runs", id="side")
            yield MetricsView(id="metrics")


async def test_full_screen_redraws_for_the_new_width() -> None:
    app = Beside()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MetricsView)
        view.set_run("long")
        loss = [Record(0, s, None, {"loss": math.sin(s / 50) + 2}) for s in range(5000)]
        view.add_records({0: loss}, set())
        view.redraw()
        await painted(pilot)
        narrow = view.query_one(MetricPlot).size.width
        points = len(plotted(view)[0])
        assert narrow == SIZE[0] - 40 and narrow < points <= 2 * narrow
        assert view.ALLOW_MAXIMIZE and app.screen.maximize(view, container=False)
        await painted(pilot)
        wide = view.query_one(MetricPlot).size.width
        assert wide == SIZE[0] and len(plotted(view)[0]) > points
        assert f"5,000 pts → {len(plotted(view)[0])}" in status(view)


async def test_overlays_of_earlier_runs(tmp_path: Path) -> None:
    old = make_run(
        tmp_path,
        run_id="20261122-101500-000-tp1pp1cp1",
        state="succeeded",
        exit_code=0,
        sizes={},
        ranks=2,
        steps=30,
        created=CREATED - 600,
    )
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MetricsView)
        follow(view, failed_run(tmp_path))
        assert view.toggle_overlay(old.name, load_store(old)) is True
        assert f"━ {old.name}" in status(view)
        await painted(pilot)
        assert len(plotted(view)) == 2 and len(plotted(view)[1]) == 30
        assert view.toggle_overlay(old.name, None) is False
        assert old.name not in status(view)
        assert view.toggle_overlay("empty", MetricStore()) is False
        acc = MetricStore()
        acc.add(0, [Record(0, 0, 1.0, {"acc": 0.5})])
        assert view.toggle_overlay("acc-only", acc) is True
        assert "acc-only: no loss" in status(view)


async def test_plot_follows_the_theme(tmp_path: Path) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MetricsView)
        follow(view, failed_run(tmp_path))
        for theme in ("textual-dark", "textual-light", "nord"):
            app.theme = theme
            text = await painted(pilot)
            colours = PlotColours.from_theme(app.theme_variables)
            assert view.colours == colours
            line = colours.lines[0]
            used = {
                span.style.color.triplet
                for span in text.spans
                if not isinstance(span.style, str) and span.style.color is not None
            }
            assert any(c is not None and tuple(c) == line for c in used), theme


async def test_bad_values_never_break_the_draw() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(MetricsView)
        view.set_run("bad")
        values = [math.inf, -math.inf, 1e308, -1e308, 0.0, math.nan, 5e-324]
        view.add_records(
            {0: [Record(0, s, None, {"loss": v, "x": math.nan}) for s, v in enumerate(values)]},
            set(),
        )
        view.redraw()
        text = await painted(pilot)
        assert "⚠ inf on rank 0 from step 0" in status(view)
        assert "failed" not in text.plain
        for key in ("y", "x", "v", "v", "s", "m"):
            await pilot.press(key)
            text = await painted(pilot)
            assert "failed to draw" not in text.plain
        assert status(view).startswith("x (2/2)")
        assert text.plain.startswith("x has no timestamps") or "no finite values" in text.plain


def test_the_widget_module_does_not_import_numpy() -> None:
    """The TUI must start without numpy: the view loads it when the first metrics arrive."""
    probe = "import sys, ezpz_tui.ui.widgets.metrics; print('numpy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_snapshot_band(snap_compare: Snap, tmp_path: Path) -> None:
    """Band mode at 100x30: the min/max band of 4 ranks under their mean, the NaN of rank 2
    marked at step 100, the warning in the status line."""
    run = noisy_run(tmp_path)

    async def band(pilot: Pilot[None]) -> None:
        view = pilot.app.query_one(MetricsView)
        follow(view, run)
        await pilot.press("v", "v")
        await pilot.pause()
        assert "⚠ NaN on rank 2 from step 100 · mean, min–max of 4 ranks" in status(view)

    assert snap_compare(Host(), terminal_size=SIZE, run_before=band)
