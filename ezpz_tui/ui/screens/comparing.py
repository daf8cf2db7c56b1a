"""The Compare tab's side of the main screen: which runs it compares, read in a worker.

The tab compares the opened run with its relatives (the runs it was relaunched from, the other
runs of its sweep: :func:`~ezpz_tui.core.comparing.relatives.relatives_of`) and with every run
marked with ``c`` in the runs list. It is read once in the background whenever that set of runs
changes, so the tab opens on a table already made (switching tabs restyles the screen, and a
read started only then would share the UI thread's time); while the tab shows, it is read again
with the runs list's refresh as long as a compared run is still going.
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

    compare_view: CompareView  # mounted with the run views (``_run_views_mounted``)
    _run_views_mounted: bool

    def __init__(self) -> None:
        super().__init__()
        self._compared_for: tuple[Path | None, tuple[Path, ...]] | None = None  # last read

    def _compared_paths(self) -> tuple[Path | None, tuple[Path, ...]]:
        from ezpz_tui.ui.widgets.runs import RunsPanel

        opened = self.opened.path if self.opened else None
        return opened, tuple(sorted(self.query_one(RunsPanel).compared, key=lambda p: p.name))

    def refresh_comparison(self, only_if_live: bool = False) -> None:
        """Read the comparison again when its set of runs changed, or when the tab shows and a
        run in it is still going (``only_if_live``: only then)."""
        if not self._run_views_mounted:
            return  # nothing to show it in yet: the first run opened reads it
        wanted = self._compared_paths()
        changed = wanted != self._compared_for
        shown = self.compare_view.comparison
        live = shown is not None and any(r.partial for r in shown.runs)
        visible = self.query_one(TabbedContent).active == COMPARE_TAB
        if (changed and not only_if_live) or (visible and live):
            self._compared_for = wanted
            self._compare_worker(*wanted)

    @work(thread=True, exclusive=True, group="compare")
    def _compare_worker(self, opened: Path | None, marked: tuple[Path, ...]) -> None:
        from ezpz_tui.core.comparing.compare import compare
        from ezpz_tui.core.comparing.relatives import relatives_of

        paths = list(relatives_of(opened).together()) if opened else []
        paths += [p for p in marked if p not in paths]
        self.post_message(ComparisonReady(compare(paths)))

    def on_comparison_ready(self, message: ComparisonReady) -> None:
        self.compare_view.show(message.comparison)
