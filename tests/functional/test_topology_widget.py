"""The topology grid widget, driven through Pilot: ranks on screen, colour cycling, scrolling,
hover details, theme colours, and snapshots at 80x24 and 120x40."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import Footer

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import LaunchPlan
from ezpz_tui.ui.themes import register_themes
from ezpz_tui.ui.widgets.topology import TopologyGrid, group_palette, group_style
from tests.fixtures.allocations import aurora

SMALL = (LaunchPlan(tp=2), aurora(2, 4))
LARGE = (LaunchPlan(tp=4, pp=2), aurora(64, 12))


class Host(App[None]):
    """The grid as the app places it: height auto under a max-height, over the footer."""

    CSS = """
    TopologyGrid { max-height: 20; border-bottom: hkey $primary 30%; }
    """

    def __init__(self, plan: LaunchPlan, alloc: Allocation) -> None:
        super().__init__()
        self.plan, self.alloc = plan, alloc

    def compose(self) -> ComposeResult:
        yield TopologyGrid(id="topology")
        yield Footer()

    def on_mount(self) -> None:
        grid = self.query_one(TopologyGrid)
        grid.update_plan(self.plan, self.alloc)
        grid.focus()


class ShortHost(Host):
    """A fixed height too small for even the summary, so the grid has to scroll."""

    CSS = "TopologyGrid { height: 3; }"


def screen_text(grid: TopologyGrid) -> list[str]:
    """What the widget shows right now, line by line."""
    return [strip.text for strip in grid.render_lines(Region(0, 0, *grid.outer_size))]


async def test_ranks_and_hosts_are_on_screen() -> None:
    app = Host(*SMALL)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        grid = app.query_one(TopologyGrid)
        text = screen_text(grid)
        assert text[0].strip() == "8 ranks = 2 hosts × 4 · tp 2 · pp 1 · cp 1 · dp 4"
        assert text[1].split() == ["0", "x4000c0s0b0n0", "0", "1", "2", "3"]
        assert text[2].split() == ["1", "x4000c0s0b0n1", "4", "5", "6", "7"]
        assert "colour = TP group (ranks sharing pp/dp/cp) · cells = rank" in text[3]
        assert text[4].split() == ["TP", "groups", "(4):", "0-1", "2-3", "4-5", "6-7"]
        assert grid.size.height == 5, "height auto: as tall as the grid"


async def test_update_plan_redraws() -> None:
    app = Host(*SMALL)
    async with app.run_test(size=(80, 24)) as pilot:
        grid = app.query_one(TopologyGrid)
        grid.update_plan(LaunchPlan(tp=3), SMALL[1])
        await pilot.pause()
        text = "\n".join(screen_text(grid))
        assert "World size 8 is not divisible by tp*pp*cp = 3." in text
        assert "placement only" in text
        grid.update_plan(LaunchPlan(ppn=2), SMALL[1])
        await pilot.pause()
        assert screen_text(grid)[1].split()[-2:] == ["·", "·"]


async def test_o_cycles_the_colour_and_the_legend() -> None:
    app = Host(LaunchPlan(tp=2, pp=2), aurora(4, 4))
    async with app.run_test(size=(80, 24)) as pilot:
        grid = app.query_one(TopologyGrid)
        seen = []
        for _ in range(3):
            legend = next(line for line in screen_text(grid) if "colour" in line)
            seen.append((grid.colour_by, legend.strip()))
            await pilot.press("o")
        assert grid.colour_by == "tp", "three presses go all the way round"
        assert seen == [
            ("tp", "colour = TP group (ranks sharing pp/dp/cp) · cells = rank"),
            ("pp", "colour = PP group (ranks sharing dp/cp/tp) · cells = rank"),
            ("dp", "colour = DP group (ranks sharing pp/cp/tp) · cells = rank"),
        ], "cp = 1 colours nothing, so o skips it"


async def test_o_recolours_the_cells() -> None:
    app = Host(*SMALL)
    async with app.run_test(size=(80, 24)) as pilot:
        grid = app.query_one(TopologyGrid)
        before = [s.group for s in grid.lines[1] if s.kind == "cell"]
        await pilot.press("o")
        after = [s.group for s in grid.lines[1] if s.kind == "cell"]
        assert (before, after) == ([0, 0, 1, 1], [0, 1, 0, 1]), "TP pairs, then DP stripes"


async def test_footer_shows_the_colour_key() -> None:
    app = Host(*SMALL)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        active = app.screen.active_bindings
        assert active["o"].binding.action == "cycle_colour"
        assert active["o"].binding.description == "colour" and active["o"].binding.show
        assert active["j"].binding.action == "cursor_down"


async def test_large_allocation_is_summarised_to_the_max_height() -> None:
    app = Host(*LARGE)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        grid = app.query_one(TopologyGrid)
        assert grid.outer_size.height <= 20
        assert grid.max_scroll_y == 0, "summarised, not scrolled"
        text = screen_text(grid)
        assert any("⋮ hosts" in line and "pp 1" in line for line in text)
        assert any(line.split()[-1:] == ["767"] for line in text)


async def test_j_k_g_G_scroll_a_grid_taller_than_the_widget() -> None:
    app = ShortHost(*LARGE)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        grid = app.query_one(TopologyGrid)
        assert grid.max_scroll_y >= 2
        await pilot.press("j")
        assert grid.scroll_y == 1
        await pilot.press("down", "k")
        assert grid.scroll_y == 1
        await pilot.press("G")
        assert grid.scroll_y == grid.max_scroll_y
        await pilot.press("g")
        assert grid.scroll_y == 0


async def test_hover_names_the_rank_and_its_group() -> None:
    app = Host(*SMALL)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        grid = app.query_one(TopologyGrid)
        row = grid.lines[2]
        x = sum(len(s.text) for s in row[: [s.kind for s in row].index("cell") + 1]) - 2
        assert grid.cell_at(x, 2) is not None and grid.cell_at(x, 2).rank == 4
        await pilot.hover(TopologyGrid, offset=(x + 1, 2))  # +1: the left padding
        await pilot.pause()
        assert grid.tooltip == (
            "rank 4 on x4000c0s0b0n1 slot 0 · tp 0 pp 0 cp 0 dp 2 · TP group 2: ranks 4-5"
        )
        await pilot.hover(TopologyGrid, offset=(1, 0))
        assert grid.tooltip is None


async def test_colours_follow_the_theme() -> None:
    app = Host(*SMALL)
    async with app.run_test(size=(80, 24)) as pilot:
        grid = app.query_one(TopologyGrid)
        register_themes(app)

        def first_cell_background() -> Any:
            strip = grid.render_lines(Region(0, 1, 80, 1))[0]
            _index, rank = [seg for seg in strip if seg.text.strip() == "0"]
            return rank.style.bgcolor

        app.theme = "textual-dark"
        await pilot.pause()
        dark = first_cell_background()
        app.theme = "ezpz-nord-dark"
        await pilot.pause()
        nord = first_cell_background()
        assert dark != nord
        assert nord.triplet.hex.upper() == app.get_css_variables()["primary"].upper()


def test_palette_has_eight_distinct_colours_for_every_theme() -> None:
    app: App[None] = App()
    register_themes(app)
    for name in app.available_themes:
        app.theme = name
        palette = group_palette(app.get_css_variables())
        assert len(palette) == 8, name
        assert len({c.hex for c in palette}) == 8, name


def test_repeated_colours_change_style() -> None:
    palette = group_palette({"primary": "#0178D4", "warning": "#FEA62B"})
    first, again = group_style(0, palette), group_style(len(palette), palette)
    assert first.bgcolor == again.bgcolor
    assert not first.underline and again.underline and again.bold


Snap = Callable[..., bool]
Run = Callable[[Pilot[None]], Awaitable[None]]


async def _settle(pilot: Pilot[None]) -> None:
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize("case", ["2x4-tp2", "64x12-tp4-pp2"])
def test_snapshot(snap_compare: Snap, case: str, size: tuple[int, int]) -> None:
    plan, alloc = SMALL if case == "2x4-tp2" else LARGE
    assert snap_compare(Host(plan, alloc), terminal_size=size, run_before=_settle)
