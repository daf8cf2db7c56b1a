"""The heatmap widget on its own: a slow host stands out in the snapshot, the cursor keys reach
the right rank, ``o`` changes the figure, and a 16k-rank job repaints only what is on screen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.pilot import Pilot

from ezpz_tui.core.watching import heatmap as core
from ezpz_tui.ui.widgets.heatmap import Heatmap, heat_ramp

HOSTS, PER_HOST = 8, 64
SLOW_HOST = 5  # node06


def job(hosts: int = HOSTS, per_host: int = PER_HOST) -> tuple[dict[int, tuple[str, int]], Any]:
    """``hosts`` x ``per_host`` ranks on node01.., step time ~0.20 s with a little deterministic
    noise, node06's ranks at ~0.40 s; tokens/s the other way round; no telemetry."""
    places = {
        h * per_host + lr: (f"node{h + 1:02d}", lr) for h in range(hosts) for lr in range(per_host)
    }
    step = {
        rank: (0.40 if host == f"node{SLOW_HOST + 1:02d}" else 0.20) + 0.002 * ((rank * 37) % 11)
        for rank, (host, _) in places.items()
    }
    tokens = {rank: 4096 / value for rank, value in step.items()}
    return places, {"step_time": step, "tokens_per_s": tokens}


class Host(App[None]):
    """Only the heatmap, fed with ``job()``; it records what it was told to open."""

    def __init__(self, hosts: int = HOSTS, per_host: int = PER_HOST) -> None:
        super().__init__()
        self.data = job(hosts, per_host)
        self.chosen: list[int] = []

    def compose(self) -> ComposeResult:
        yield Heatmap()

    def on_mount(self) -> None:
        heatmap = self.query_one(Heatmap)
        heatmap.set_data(*self.data)
        heatmap.focus()

    def on_heatmap_chosen(self, message: Heatmap.Chosen) -> None:
        self.chosen.append(message.rank)


def lines(heatmap: Heatmap) -> list[str]:
    return [strip.text for strip in heatmap.render_lines(Region(0, 0, *heatmap.outer_size))]


async def test_rows_legend_and_cursor_line() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        heatmap = app.query_one(Heatmap)
        text = lines(heatmap)
        assert heatmap.size.height == HOSTS + 2, "height auto: legend, hosts, cursor line"
        assert text[0].startswith(" step time  0.2 s ")
        assert "worst host: node06 (median 0.41 s vs 0.21 s)" in text[0]
        assert [line.split()[0] for line in text[1:-1]] == [f"node{h:02d}" for h in range(1, 9)]
        assert text[-1].strip() == "rank 0 · host node01 · local 0 · 0.2 s"


async def test_cursor_keys_and_enter_choose_the_rank() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        heatmap = app.query_one(Heatmap)
        await pilot.press("j", "j", "l", "l", "l")
        assert heatmap.cursor_rank == 2 * 64 + 3
        await pilot.press("enter")
        await pilot.pause()
        assert app.chosen == [2 * 64 + 3]
        assert lines(heatmap)[-1].strip().startswith("rank 131 · host node03 · local 3 · ")
        await pilot.press("down", "right", "left", "left", "up", "k")
        assert heatmap.cursor_rank == 64 + 2
        await pilot.press("G")
        assert heatmap.cursor_rank == 511
        await pilot.press("l", "right")
        assert heatmap.cursor_rank == 511, "the grid's edge: l goes on to the next region"
        await pilot.press("g", "h")
        assert heatmap.cursor_rank == 0


async def test_o_changes_the_figure_in_the_legend() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        heatmap = app.query_one(Heatmap)
        await pilot.press("o")
        assert heatmap.figure == "tokens_per_s"
        legend = lines(heatmap)[0]
        assert legend.startswith(" tokens/s  20.5k tok/s ")
        assert "worst host: node06 (median 9.99k tok/s vs 19.5k" in legend
        await pilot.press("o")
        assert heatmap.figure == "step_time", "figures without data are skipped"
        active = app.screen.active_bindings
        assert active["o"].binding.action == "cycle_figure" and active["o"].binding.show


async def test_slash_goes_to_a_rank_or_a_host() -> None:
    app = Host()
    async with app.run_test(size=(100, 30)) as pilot:
        heatmap = app.query_one(Heatmap)
        heatmap.search("r300")
        assert heatmap.cursor_rank == 300
        heatmap.search("node08")
        assert heatmap.cursor_rank == 7 * 64
        await pilot.pause()


async def test_16k_ranks_repaint_only_the_rows_on_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    """256 hosts x 64: set_data colours nothing; a repaint colours the visible cells only."""
    app = Host(hosts=4)
    async with app.run_test(size=(100, 30)) as pilot:
        heatmap = app.query_one(Heatmap)
        await pilot.pause()
        calls = count_calls(monkeypatch, core.Scale, "bucket")
        places, values = job(256, 64)
        heatmap.set_data(places, values)
        assert calls() == 0
        await pilot.pause()
        assert heatmap.size.height == 30, "as tall as the screen, not 258 lines"
        on_screen = (heatmap.size.height - 2) * 64
        assert 0 < calls() <= 2 * on_screen, "at most two frames of visible cells"
        before = calls()
        heatmap.set_data(places, {"step_time": {r: 0.3 for r in places}})
        await pilot.pause()
        assert 0 < calls() - before <= 2 * on_screen, "the next update costs the same"
        await pilot.press("G")
        assert heatmap.cursor_rank == 16383
        assert lines(heatmap)[-2].split()[0] == "node256"


def count_calls(monkeypatch: pytest.MonkeyPatch, owner: type, name: str) -> Callable[[], int]:
    """Wrap ``owner.name`` to count its calls; returns the counter."""
    original = getattr(owner, name)
    count = [0]

    def counted(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return lambda: count[0]


def test_the_ramp_runs_from_success_through_warning_to_error() -> None:
    ramp = heat_ramp({"success": "#00FF00", "warning": "#FFFF00", "error": "#FF0000"})
    assert [ramp[0].hex, ramp[-1].hex] == ["#00FF00", "#FF0000"]
    assert len({c.hex for c in ramp}) == len(ramp) == core.BUCKETS


async def _settle(pilot: Pilot[None]) -> None:
    await pilot.pause()


def test_snapshot_a_slow_host_is_the_hot_row(snap_compare: Callable[..., bool]) -> None:
    assert snap_compare(Host(), terminal_size=(100, 30), run_before=_settle)
