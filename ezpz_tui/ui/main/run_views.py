"""The opened run and the tabs that show it: Run, Metrics, Compare and Heatmap.

The views are mounted the first time a run opens or one of their tabs shows (the follower, the
log and plotext are not paid for by someone who only plans a launch). One run is open at a
time, followed live by :class:`~ezpz_tui.ui.opened_run.OpenedRun` until another opens. Other
runs come onto the plots as overlays (``c`` in the runs list, or a relaunch's parent, unasked);
``ctrl+n``/``ctrl+b`` step through the rank logs in the Run tab and through the runs elsewhere;
Enter on the plot's cursor or on a heatmap cell shows that rank's log.

This is the view side of the screen, driven through Textual's Pilot in the functional tests;
what it shows is decided by the models it is handed (``core.watching``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.widgets import TabbedContent

from ezpz_tui.ui.main.comparison import COMPARE_TAB
from ezpz_tui.ui.messages import GoodputRead, OverlayLoaded
from ezpz_tui.ui.widgets.runs import RunsPanel

if TYPE_CHECKING:
    from textual.screen import Screen

    from ezpz_tui.config import Config
    from ezpz_tui.ui.main.launches import Launches
    from ezpz_tui.ui.opened_run import OpenedRun
    from ezpz_tui.ui.widgets.compare import CompareView
    from ezpz_tui.ui.widgets.heatmap import Heatmap
    from ezpz_tui.ui.widgets.metrics import MetricsView
    from ezpz_tui.ui.widgets.run_panel import RunPanel

HEATMAP_TAB = "tab-heatmap"
RUN_TAB = "tab-run"


def wrap_step(items: Sequence[Any], current: Any, step: int) -> Any:
    """The item ``step`` away from ``current`` in ``items``, wrapping round as vim's
    ``:bnext`` does; from an item not there, the first (forward) or the last (back)."""
    index = items.index(current) + step if current in items else 0 if step > 0 else -1
    return items[index % len(items)]


class RunViews:
    """Owns the opened run and the views of ``screen``'s run tabs; ``opened_changed`` is told
    each time another run opens (the keys, the runs list and the summary follow it)."""

    run_panel: RunPanel
    metrics: MetricsView
    compare_view: CompareView
    heatmap: Heatmap

    def __init__(
        self,
        screen: Screen[None],
        settings: Config,
        clock: Callable[[], float],
        launches: Launches,
        opened_changed: Callable[[], None],
    ) -> None:
        self.screen = screen
        self.settings = settings
        self.clock = clock
        self.launches = launches
        self.opened_changed = opened_changed
        self.opened: OpenedRun | None = None
        self.mounted = False
        self._lock = asyncio.Lock()

    async def mount(self) -> None:
        """The tabs' views, once: the first time a run opens or a run tab is shown."""
        async with self._lock:
            if self.mounted:
                return
            from ezpz_tui.ui.widgets.compare import CompareView
            from ezpz_tui.ui.widgets.heatmap import Heatmap
            from ezpz_tui.ui.widgets.metrics import MetricsView
            from ezpz_tui.ui.widgets.run_panel import RunPanel

            screen = self.screen
            self.run_panel = RunPanel(self.clock, id="run-panel")
            self.metrics = MetricsView(id="metrics")
            self.compare_view = CompareView(id="compare")
            self.heatmap = Heatmap(id="heatmap")
            await screen.query_one(f"#{RUN_TAB}").mount(self.run_panel)
            await screen.query_one("#tab-metrics").mount(self.metrics)
            await screen.query_one(f"#{COMPARE_TAB}").mount(self.compare_view)
            await screen.query_one(f"#{HEATMAP_TAB}").mount(self.heatmap)
            self.mounted = True

    async def open(self, path: Path) -> None:
        """Show ``path``: its ranks, logs and metrics, followed live until another opens."""
        from ezpz_tui.ui.opened_run import OpenedRun

        await self.mount()
        path = Path(path)
        self.close()
        self.opened = OpenedRun(path, self.settings, self.screen, self.run_panel, self.metrics)
        self.opened.start(read_only=self.launches.handle_of(path) is None)
        self.screen.query_one(TabbedContent).active = RUN_TAB
        self.opened_changed()
        self._read_goodput()

    def close(self) -> None:
        if self.opened is not None:
            self.opened.stop()

    def tick(self) -> None:
        """Once a second: the run's clocks (stalls, ages: while the Run tab shows them; the
        rows of a 4,096-rank run cost a core's while to sort) and the heatmap."""
        if self.opened is not None:
            if self.screen.query_one(TabbedContent).active == RUN_TAB:
                self.run_panel.tick()
            self.update_heatmap()
            self._read_goodput()

    def _read_goodput(self) -> None:
        """The opened run's goodput for the summary bar, in a worker, when it is due."""
        run = self.opened
        if run is None or not run.goodput_due(time.monotonic()):
            return

        def read() -> None:
            self.screen.post_message(GoodputRead(run, run.read_goodput(self.settings.stall_after)))

        self.screen.run_worker(read, group="goodput", thread=True)

    def update_heatmap(self) -> None:
        """Every rank one cell, filled only while its tab shows: a 16k-rank job's cells cost
        nothing while the user reads a log."""
        if self.opened is None or not self.mounted:
            return
        if self.screen.query_one(TabbedContent).active == HEATMAP_TAB:
            from ezpz_tui.core.watching.rank_rows import heat_values

            self.heatmap.set_data(*heat_values(self.opened.monitor))

    # --- overlays ----------------------------------------------------------------------------

    async def toggle_overlay(self, path: Path) -> bool:
        """``c`` on a run: take its curves off the plots, or load them (in a worker); whether
        the set of compared runs changed now."""
        await self.mount()
        runs = self.screen.query_one(RunsPanel)
        if path not in runs.compared:
            self._load_overlay(path)
            return False
        self.metrics.toggle_overlay(path.name, None)
        runs.mark_compared(runs.compared - {path})
        return True

    def parent_found(self, run: OpenedRun, parent: Path, resumed: bool) -> None:
        """A relaunch's parent comes onto the plots unasked; one the run resumed from is
        joined to its curve."""
        if run is not self.opened:
            return
        self.metrics.set_joined(parent.name if resumed else None)
        if parent not in self.screen.query_one(RunsPanel).compared:
            self._load_overlay(parent, asked=False)

    def _load_overlay(self, path: Path, asked: bool = True) -> None:
        def load() -> None:
            from ezpz_tui.core.watching.metrics.load import load_store

            self.screen.post_message(OverlayLoaded(path, load_store(path), asked))

        self.screen.run_worker(load, group="overlay", thread=True)

    def overlay_loaded(self, message: OverlayLoaded) -> bool:
        """An overlay's metrics are read: on the plots, marked in the runs list; whether the
        set of compared runs changed."""
        path, asked, screen = message.path, message.asked, self.screen
        if not self.metrics.toggle_overlay(path.name, message.store):
            if asked:
                screen.notify(f"{path.name} has no metrics to overlay.", severity="warning")
            return False
        runs = screen.query_one(RunsPanel)
        runs.mark_compared(runs.compared | {path})
        if asked:  # a parent comes along unasked, and quietly: the runs list marks it
            screen.notify(
                f"Overlaid {path.name} on the plots (Metrics and Compare tabs).", timeout=3
            )
        return True

    # --- a rank's log from elsewhere --------------------------------------------------------

    def show_step(self, rank: int, step: int, span: int) -> None:
        """Enter on the plot's cursor: that rank's log at that step, in the Run tab (ctrl+o
        comes back to the plot: the view history remembers tabs)."""
        self.screen.query_one(TabbedContent).active = RUN_TAB
        said = self.run_panel.show_step(rank, step, span)
        if said:
            self.screen.set_focus(self.run_panel.log)  # at once: see Regions.focus
            self.screen.notify(said, timeout=3)
        else:
            self.screen.app.bell()

    def show_rank(self, rank: int) -> None:
        """Enter on a heatmap cell: that rank's log, in the Run tab."""
        self.screen.query_one(TabbedContent).active = RUN_TAB
        if self.run_panel.ranks.select_rank(rank):
            self.run_panel.log.focus()

    # --- documents: ctrl+n / ctrl+b ----------------------------------------------------------

    async def step_document(self, step: int) -> None:
        """The next rank's log while the Run tab is focused, else the next run of the runs
        list, opened where the view stands (from Metrics the next run shows in Metrics)."""
        screen, focused = self.screen, self.screen.focused
        in_run_tab = (
            self.opened is not None
            and self.mounted
            and focused is not None
            and self.run_panel in focused.ancestors_with_self
        )
        if in_run_tab and self._step_rank(step):
            return
        runs_panel = screen.query_one(RunsPanel)
        paths = [run.path for run in runs_panel.runs]
        if not paths:
            screen.app.bell()
            return
        path = wrap_step(paths, self.opened.path if self.opened else None, step)
        tabs = screen.query_one(TabbedContent)
        tab = tabs.active
        await self.open(path)
        from ezpz_tui.ui.widgets.table import VimTable

        runs_panel.query_one(VimTable).move_cursor(row=paths.index(path))
        if tab != "tab-launch":  # a run view stays the view it was
            tabs.active = tab
            if focused is not None and focused.is_attached:
                screen.set_focus(focused)

    def _step_rank(self, step: int) -> bool:
        """The next rank's log in the log view; False when the run has no rank logs yet."""
        assert self.opened is not None
        ranks = sorted(r for r in self.opened.monitor.ranks if r >= 0)
        if not ranks:
            return False
        panel = self.run_panel
        current = panel.log.rank if panel.log.rank is not None else panel.ranks.selected
        panel.ranks.select_rank(wrap_step(ranks, current, step))
        return True
