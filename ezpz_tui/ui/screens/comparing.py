"""The Compare tab's side of the main screen: which runs it compares, read in a worker.

The tab compares the opened run with its relatives (the runs it was relaunched from, the other
runs of its sweep: :func:`~ezpz_tui.core.comparing.relatives.relatives_of`) and with every run
marked with ``c`` in the runs list. It is read when the tab is shown, and again with the runs
list's refresh while a compared run is still going, never while the tab is hidden.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.widgets import TabbedContent

from ezpz_tui.ui.messages import ComparisonReady
from ezpz_tui.ui.screens.failing import FailureControl

if TYPE_CHECKING:
    from ezpz_tui.ui.widgets.compare import CompareView

COMPARE_TAB = "tab-compare"


class CompareControl(FailureControl):
    """Keeps the Compare tab's table up to date while it shows."""

    compare_view: CompareView

    def _compared_paths(self) -> tuple[Path | None, list[Path]]:
        from ezpz_tui.ui.widgets.runs import RunsPanel

        opened = self.opened.path if self.opened else None
        marked = sorted(self.query_one(RunsPanel).compared, key=lambda p: p.name)
        return opened, marked

    def refresh_comparison(self, only_if_live: bool = False) -> None:
        """Read the comparison again if the tab shows (``only_if_live``: and a run in it is
        still going, so its figures can have moved)."""
        if self.query_one(TabbedContent).active != COMPARE_TAB:
            return
        shown = self.compare_view.comparison
        if only_if_live and shown is not None and not any(r.partial for r in shown.runs):
            return
        self._compare_worker(*self._compared_paths())

    @work(thread=True, exclusive=True, group="compare")
    def _compare_worker(self, opened: Path | None, marked: list[Path]) -> None:
        from ezpz_tui.core.comparing.compare import compare
        from ezpz_tui.core.comparing.relatives import relatives_of

        paths = list(relatives_of(opened).together()) if opened else []
        paths += [p for p in marked if p not in paths]
        self.post_message(ComparisonReady(compare(paths)))

    def on_comparison_ready(self, message: ComparisonReady) -> None:
        self.compare_view.show(message.comparison)
