"""The Heatmap tab's side of the main screen: every rank one cell, refreshed while it shows.

It is filled once a second (with the screen's tick) and only while its tab is the one shown:
a 16k-rank job's cells cost nothing while the user reads a log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import TabbedContent

from ezpz_tui.ui.screens.tracking import TrackersControl

if TYPE_CHECKING:
    from ezpz_tui.ui.widgets.heatmap import Heatmap
    from ezpz_tui.ui.widgets.metric_cursor import PlotCursor

HEATMAP_TAB = "tab-heatmap"


class HeatmapControl(TrackersControl):
    """Feeds the heatmap from the opened run's monitor; Enter on a cell reads that rank."""

    heatmap: Heatmap  # mounted with the run views (``_run_views_mounted``)

    def update_heatmap(self) -> None:
        if self.opened is None or not self._run_views_mounted:
            return
        if self.query_one(TabbedContent).active == HEATMAP_TAB:
            from ezpz_tui.core.watching.rank_rows import heat_values

            self.heatmap.set_data(*heat_values(self.opened.monitor))

    def on_plot_cursor_step_chosen(self, message: PlotCursor.StepChosen) -> None:
        """Enter on the plot's cursor: that rank's log at that step, in the Run tab (ctrl+o
        comes back to the plot: the view history remembers tabs)."""
        self.query_one(TabbedContent).active = "tab-run"
        said = self.run_panel.show_step(message.rank, message.step, message.span)
        if said:
            self.set_focus(self.run_panel.log)  # at once: see RegionNavigation._focus_region
            self.notify(said, timeout=3)
        else:
            self.app.bell()

    def on_heatmap_chosen(self, message: Heatmap.Chosen) -> None:
        """Enter on a cell: that rank's log, in the Run tab."""
        self.query_one(TabbedContent).active = "tab-run"
        if self.run_panel.ranks.select_rank(message.rank):
            self.run_panel.log.focus()
