"""The Heatmap tab's side of the main screen: every rank one cell, refreshed while it shows.

It is filled once a second (with the screen's tick) and only while its tab is the one shown:
a 16k-rank job's cells cost nothing while the user reads a log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import TabbedContent

from ezpz_tui.ui.screens.sweeping import SweepControl

if TYPE_CHECKING:
    from ezpz_tui.ui.widgets.heatmap import Heatmap

HEATMAP_TAB = "tab-heatmap"


class HeatmapControl(SweepControl):
    """Feeds the heatmap from the opened run's monitor; Enter on a cell reads that rank."""

    heatmap: Heatmap  # mounted with the run views (``_run_views_mounted``)

    def update_heatmap(self) -> None:
        if self.opened is None or not self._run_views_mounted:
            return
        if self.query_one(TabbedContent).active == HEATMAP_TAB:
            from ezpz_tui.core.watching.rank_rows import heat_values

            self.heatmap.set_data(*heat_values(self.opened.monitor))

    def on_heatmap_chosen(self, message: Heatmap.Chosen) -> None:
        """Enter on a cell: that rank's log, in the Run tab."""
        self.query_one(TabbedContent).active = "tab-run"
        if self.run_panel.ranks.select_rank(message.rank):
            self.run_panel.log.focus()
