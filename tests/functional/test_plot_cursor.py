"""The Metrics view's step cursor, zoom, events and small multiples, driven through Pilot:
every key of the cursor (h/l and arrows with counts, g/G, 0/$, +/-/=, </>, ]/[, Enter, Esc,
V), what the readout says, that a cursor move repaints without plotext, and snapshots."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Footer, TabbedContent

from ezpz_tui.core.watching.monitor import TEXT
from ezpz_tui.ui.widgets import metric_cursor, metric_plot
from ezpz_tui.ui.widgets.logview import LogView
from ezpz_tui.ui.widgets.metric_cursor import PlotCursor
from ezpz_tui.ui.widgets.metric_plot import MetricPlot
from ezpz_tui.ui.widgets.metrics import MetricsView
from runtime import records
from tests.fixtures.runs import make_run
from tests.functional.test_metrics_view import CREATED, SIZE, Snap, follow, noisy_run, status
from tests.functional.test_run_view import attach, opened
from tests.pilots import until

SPIKE = 60


class Host(App[None]):
    """The view over a footer, focused; keeps what Enter on the cursor asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.chosen: list[tuple[int, int]] = []

    def compose(self) -> ComposeResult:
        yield MetricsView(id="metrics")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(MetricsView).focus()

    def on_plot_cursor_step_chosen(self, message: PlotCursor.StepChosen) -> None:
        self.chosen.append((message.rank, message.step))


def spiky_run(outputs: Path, ranks: int = 2, steps: int = 120) -> Path:
    """A falling loss with a spike on rank 1 at step ``SPIKE``, and lr, grad_norm and
    tokens_per_s: the four metrics small multiples stack."""
    run = outputs / "20261122-120000-000-tp1pp1cp1"
    (run / "metrics").mkdir(parents=True)
    for rank in range(ranks):
        lines = []
        for step in range(steps):
            loss = 3.0 * math.exp(-step / 40) + 0.5 + 0.01 * ((step * 7 + rank) % 5)
            if rank == 1 and step == SPIKE:
                loss *= 4
            metrics = {
                "loss": round(loss, 6),
                "lr": 1e-3 * min(1.0, (step + 1) / 10),
                "grad_norm": 1.0 + 0.1 * math.sin(step / 5),
                "tokens_per_s": 12000.0 + 10 * (step % 7),
            }
            lines.append(records.encode(rank, step, metrics, CREATED + 0.5 * step))
        (run / "metrics" / f"rank-{rank:05d}.jsonl").write_bytes(b"".join(lines))
    return run


async def ready(pilot: Pilot[None], tmp_path: Path) -> MetricsView:
    view = pilot.app.query_one(MetricsView)
    follow(view, spiky_run(tmp_path))
    await pilot.pause()
    return view


def cursor_columns(plot: MetricPlot) -> set[int]:
    """Columns of the picture where the cursor's background is."""
    rendered = plot.render()
    assert isinstance(rendered, Text)
    cursor = plot._view.colours.cursor
    found = set()
    for line in rendered.split("\n"):
        for span in line.spans:
            style = span.style
            colour = None if isinstance(style, str) else style.bgcolor
            if colour is not None and colour.triplet and tuple(colour.triplet) == cursor:
                found.add(span.start)
    return found


async def test_cursor_moves_point_by_point_with_counts(tmp_path: Path) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = await ready(pilot, tmp_path)
        plot = view.query_one(MetricPlot)
        assert not cursor_columns(plot)  # no cursor until a cursor key
        await pilot.press("l")
        assert view.cursor_step == 119  # the first move shows it on the last point
        line = status(view)
        assert line.startswith("step 119 · ") and "rank 0 " in line
        value = view.store.at_step("loss", 0, 119)[0]  # type: ignore[union-attr]
        assert f"rank 0 {value:.6g}" in line
        right = cursor_columns(plot)
        assert len(right) == 1
        await pilot.press("h", "left")
        assert view.cursor_step == 117
        await pilot.press("1", "0", "h")
        assert view.cursor_step == 107
        await pilot.press("3", "right")
        assert view.cursor_step == 110
        await pilot.press("g")
        assert view.cursor_step == 0
        left = cursor_columns(plot)
        assert len(left) == 1 and min(left) < min(right)
        await pilot.press("G")
        assert view.cursor_step == 119
        await pilot.press("escape")
        assert view.cursor_step is None and status(view).startswith("loss (1/4)")
        assert not cursor_columns(plot)


async def test_h_and_l_leave_the_plot_only_from_its_edge(tmp_path: Path) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = await ready(pilot, tmp_path)
        ran: list[str] = []
        app.screen.action_region_left = lambda: ran.append("left")  # type: ignore[method-assign]
        await pilot.press("g", "h")
        assert view.cursor_step == 0 and ran == ["left"]
        await pilot.press("l")
        assert view.cursor_step == 1 and ran == ["left"]


async def test_a_cursor_move_does_not_run_plotext(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = await ready(pilot, tmp_path)
        await pilot.press("l")
        view.query_one(MetricPlot).render()
        painted: list[int] = []
        real = metric_plot.canvas_text
        monkeypatch.setattr(metric_plot, "canvas_text", lambda plt: painted.append(1) or real(plt))
        await pilot.press("h", "h", "h")
        view.query_one(MetricPlot).render()
        assert view.cursor_step == 116 and painted == []
        await pilot.press("plus")
        view.query_one(MetricPlot).render()
        assert painted  # a zoom paints again


async def test_zoom_pan_and_fit(tmp_path: Path) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = await ready(pilot, tmp_path)
        await pilot.press("6", "0", "g")  # a count before g is dropped: g is the first step
        await pilot.press("6", "0", "l")
        assert view.cursor_step == 60
        await pilot.press("plus")
        assert view.window == (30.25, 89.75)
        await pilot.press("escape")  # the status line again, with the zoom in it
        assert "zoom 30.25–89.75 (= all)" in status(view)
        await pilot.press("g")  # the window follows the cursor to the first step...
        assert view.window == (0, 59.5)
        await pilot.press("6", "0", "l")  # ...and back
        assert view.cursor_step == 60
        view.query_one(MetricPlot).render()
        xs = [x for line in view.query_one(MetricPlot).plt.monitor.x for x in line]
        assert xs and min(xs) >= 30.25 and max(xs) <= 89.75
        await pilot.press("plus", "plus")
        low, high = view.window  # type: ignore[misc]
        assert high - low == pytest.approx(119 / 8) and low <= 60 <= high
        await pilot.press("0")
        assert view.cursor_step == math.ceil(low)
        await pilot.press("dollar_sign")
        assert view.cursor_step == math.floor(high)
        await pilot.press("greater_than_sign")
        assert view.window[0] == pytest.approx(low + (high - low) / 2)  # type: ignore[index]
        await pilot.press("less_than_sign", "less_than_sign")
        assert view.window[0] == pytest.approx(low - (high - low) / 2)  # type: ignore[index]
        await pilot.press("minus")
        assert view.window[1] - view.window[0] == pytest.approx(119 / 4)  # type: ignore[index]
        await pilot.press("equals_sign")
        assert view.window is None
        await pilot.press("l", "l")  # past the last point of a zoomed window: it follows
        await pilot.press("plus", "plus", "g")
        assert view.window is not None and view.window[0] == 0


async def test_events_are_jumped_to_and_named(tmp_path: Path) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = await ready(pilot, tmp_path)
        await pilot.press("v", "v")  # the band: mean, min, max and their ranks
        await pilot.press("g", "right_square_bracket")
        assert view.cursor_step == SPIKE
        line = status(view)
        assert "⚑ spike +" in line and "max r1 " in line and "min r0 " in line
        await pilot.press("right_square_bracket")  # no event after the spike
        assert view.cursor_step == SPIKE
        await pilot.press("G", "left_square_bracket")
        assert view.cursor_step == SPIKE
        await pilot.press("enter")
        assert app.chosen == [(1, SPIKE)]  # the rank holding the extreme


async def test_enter_opens_the_rank_drawn(tmp_path: Path) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, tmp_path)
        await pilot.press("enter")
        assert app.chosen == []  # no cursor yet: nothing to open
        await pilot.press("g", "5", "l", "enter")
        assert app.chosen == [(0, 5)]


async def test_small_multiples_share_the_cursor(tmp_path: Path) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = await ready(pilot, tmp_path)
        await pilot.press("V")
        plots = [p for p in view.query(MetricPlot) if p.display]
        assert [view.metric_of(p.slot) for p in plots] == [
            "loss",
            "lr",
            "grad_norm",
            "tokens_per_s",
        ]
        await pilot.press("g", "9", "l")
        line = status(view)
        assert line.startswith("step 9 · ") and "lr 0.001 " in line and "tokens_per_s " in line
        assert all(len(cursor_columns(p)) == 1 for p in plots)
        await pilot.press("V")
        assert [p.slot for p in view.query(MetricPlot) if p.display] == [0]


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> None:
    """The readout's clock in UTC: snapshots must not depend on the machine's time zone."""
    monkeypatch.setattr(metric_cursor, "LOCALTIME", time.gmtime)


@pytest.mark.usefixtures("utc")
def test_snapshot_readout(snap_compare: Snap, tmp_path: Path) -> None:
    async def band_cursor(pilot: Pilot[None]) -> None:
        await ready(pilot, tmp_path)
        await pilot.press("v", "v", "g", "right_square_bracket")

    assert snap_compare(Host(), terminal_size=SIZE, run_before=band_cursor)


@pytest.mark.usefixtures("utc")
def test_snapshot_small_multiples(snap_compare: Snap, tmp_path: Path) -> None:
    async def stacked(pilot: Pilot[None]) -> None:
        await ready(pilot, tmp_path)
        await pilot.press("V", "g", "4", "0", "l")

    assert snap_compare(Host(), terminal_size=(100, 40), run_before=stacked)


async def test_enter_reads_the_rank_log_at_the_step_and_ctrl_o_comes_back(
    tmp_path: Path,
) -> None:
    """In the app: the cursor's Enter shows the rank's log in the Run tab, its cursor on the
    line the rank printed at that step (the fixture logs ``step N/40`` every 5 steps: step 12
    lands on step 10's line); ctrl+o brings the plot back, cursor and all."""
    run = make_run(
        tmp_path,
        run_id="20261122-130000-000-tp1pp1cp1",
        state="succeeded",
        exit_code=0,
        sizes={"tp": 1},
        ranks=2,
        steps=40,
        created=CREATED,
    )
    app = attach(run)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(pilot, 2)
        await pilot.press("t")  # the Metrics tab, its plot focused
        tabs = app.query_one(TabbedContent)
        view = app.query_one(MetricsView)
        await until(pilot, lambda: view.store is not None and view.has_focus, "the plot", 10)
        await pilot.press("g", "1", "2", "l", "enter")
        log = app.query_one(LogView)
        await until(pilot, lambda: tabs.active == "tab-run" and log.has_focus, "the log", 5)
        assert log.rank == 0 and not log.follow
        assert "step 10/40 loss=" in log.lines[log.cursor][TEXT]
        await pilot.pause()  # the screen hears of the focus (the view history) after the log does
        await pilot.press("ctrl+o")
        await until(pilot, lambda: tabs.active == "tab-metrics" and view.has_focus, "the plot", 5)
        assert view.cursor_step == 12


async def test_a_nan_on_one_rank_is_an_event_of_the_band(tmp_path: Path) -> None:
    """The band's mean leaves NaNs out; rank 2's loss turning NaN at step 100 is an event."""
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        view = pilot.app.query_one(MetricsView)
        follow(view, noisy_run(tmp_path))
        await pilot.press("v", "v", "G", "left_square_bracket")
        assert view.cursor_step == 100
        assert "⚑ NaN on r2" in status(view) and "non-finite on 1 ranks, first r2" in status(view)
