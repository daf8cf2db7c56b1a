"""``ctrl+n`` / ``ctrl+b``: the next / previous document, as on the author's site.

A document is what a view reads: in the Run tab (the rank list or the log focused) the rank
logs, in rank order; everywhere else the runs of the runs list, in its order (newest first).
Stepping past either end wraps round, as vim's ``:bnext`` does. A run is opened where the view
stands: from the Metrics, Compare or Heatmap tab the next run shows in that same tab.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import TabbedContent

from ezpz_tui.ui.screens.submitting import SubmitControl
from ezpz_tui.ui.widgets.runs import RunsPanel
from ezpz_tui.ui.widgets.table import VimTable

if TYPE_CHECKING:
    from ezpz_tui.ui.widgets.run_panel import RunPanel


class DocumentControl(SubmitControl):
    """Steps through the rank logs of the opened run, or through the runs."""

    run_panel: RunPanel  # mounted with the run views

    async def action_next_document(self) -> None:
        await self._step_document(1)

    async def action_previous_document(self) -> None:
        await self._step_document(-1)

    async def _step_document(self, step: int) -> None:
        if self._in_run_tab() and self._step_rank(step):
            return
        await self._step_run(step)

    def _in_run_tab(self) -> bool:
        focused = self.focused
        return (
            self.opened is not None
            and self._run_views_mounted
            and focused is not None
            and self.run_panel in focused.ancestors_with_self
        )

    def _step_rank(self, step: int) -> bool:
        """The next rank's log in the log view; False when the run has no rank logs yet."""
        assert self.opened is not None
        ranks = sorted(r for r in self.opened.monitor.ranks if r >= 0)
        if not ranks:
            return False
        panel = self.run_panel
        current = panel.log.rank if panel.log.rank is not None else panel.ranks.selected
        index = ranks.index(current) + step if current in ranks else 0 if step > 0 else -1
        panel.ranks.select_rank(ranks[index % len(ranks)])
        return True

    async def _step_run(self, step: int) -> None:
        runs_panel = self.query_one(RunsPanel)
        paths = [run.path for run in runs_panel.runs]
        if not paths:
            self.app.bell()
            return
        opened = self.opened.path if self.opened is not None else None
        index = paths.index(opened) + step if opened in paths else 0 if step > 0 else -1
        path = paths[index % len(paths)]
        tabs = self.query_one(TabbedContent)
        tab, focused = tabs.active, self.focused
        await self.open_run(path)
        runs_panel.query_one(VimTable).move_cursor(row=paths.index(path))
        if tab != "tab-launch":  # a run view stays the view it was
            tabs.active = tab
            if focused is not None and focused.is_attached:
                self.set_focus(focused)
