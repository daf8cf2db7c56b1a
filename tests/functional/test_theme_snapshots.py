"""The plot and the topology grid in a light and a dark theme: catppuccin latte and mocha.

The same fixture job and runs as ``test_app_snapshots``; the theme is set once the screen has
settled, so the pictures differ from those only in colour. What to look for in the light ones:
plot lines and the min/max band stand out from the near-white ground, the grid's groups are
filled cells with dark or light text as each colour needs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from textual.pilot import Pilot

from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.topology import TopologyGrid
from tests.functional.test_app_snapshots import (  # noqa: F401  (polaris is a fixture)
    WIDE,
    Snap,
    metrics,
    open_failed,
    polaris,
    run_before,
    set_field,
    settle,
)

THEMES = pytest.mark.parametrize("theme", ["ezpz-catppuccin-latte", "ezpz-catppuccin-mocha"])


def themed(theme: str) -> Callable[[Pilot[None]], Awaitable[None]]:
    """A ``run_before`` step: switch to ``theme`` and let the screen repaint in it."""

    async def step(pilot: Pilot[None]) -> None:
        pilot.app.theme = theme
        await settle(pilot)
        assert pilot.app.current_theme.name == theme

    return step


async def tp2_grid(pilot: Pilot[None]) -> None:
    await set_field(pilot, "tp", "2")
    await pilot.press("K")
    assert pilot.app.focused is pilot.app.query_one(TopologyGrid)


@THEMES
def test_metrics_tab_themed(snap_compare: Snap, polaris: EzpzApp, theme: str) -> None:  # noqa: F811
    steps = run_before(open_failed, metrics, themed(theme))
    assert snap_compare(polaris, terminal_size=WIDE, run_before=steps)


@THEMES
def test_topology_themed(snap_compare: Snap, polaris: EzpzApp, theme: str) -> None:  # noqa: F811
    assert snap_compare(polaris, terminal_size=WIDE, run_before=run_before(tp2_grid, themed(theme)))
