"""The main screen: the regions, what fills them, and the run opened in the Run tab.

Layout: a summary bar on top; the left sidebar holds the allocation and the doctor; the main
column holds the topology grid (the "top" region) over tabs for the launch form, the opened run
and metrics; the right sidebar holds the runs list. Everything that touches a process, a file or
a probe runs in a thread worker and reports back with a message (``ezpz_tui.ui.messages``); the
UI thread only renders models.

The first frame is the frame of the regions alone: their widgets (the form, the lists, the grid)
are imported and mounted right after it has been painted, the Run and Metrics views the first
time a run opens or their tab shows. Until the regions are there the screen's keys wait.

The keys that launch and stop runs are ``screens.launching``, the failure keys (why, exclude the
host and relaunch) ``screens.failing``; moving between the regions is ``screens.regions``,
between documents (``ctrl+n``/``ctrl+b``: rank logs, runs) ``screens.documents``; what the
command palette offers is ``screens.commands``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, TabbedContent, TabPane

from ezpz_tui.ui.messages import (
    AllocationDetected,
    BatchRead,
    OverlayLoaded,
    ParentFound,
    PreviewReady,
    RanksExpected,
    RunStateChanged,
    StacksCollected,
)
from ezpz_tui.ui.palette import APP_ACTIONS, PaletteCommand, global_bindings
from ezpz_tui.ui.screens.comparing import COMPARE_TAB
from ezpz_tui.ui.screens.documents import DocumentControl
from ezpz_tui.ui.screens.failing import FAILURE_ACTIONS
from ezpz_tui.ui.screens.heat import HEATMAP_TAB
from ezpz_tui.ui.widgets.panels import AllocationPanel, DoctorPanel, SummaryBar
from ezpz_tui.ui.widgets.runs import RunsPanel

if TYPE_CHECKING:
    from ezpz_tui.config import Config
    from ezpz_tui.core.checking.check import Check
    from ezpz_tui.core.launching.allocation import Allocation
    from ezpz_tui.core.launching.plan import LaunchPlan
    from ezpz_tui.core.session import Session
    from ezpz_tui.keymap.table import Keymap
    from ezpz_tui.ui.opened_run import OpenedRun
    from ezpz_tui.ui.widgets.launch_form import LaunchForm
    from ezpz_tui.ui.widgets.metrics import MetricsView
    from ezpz_tui.ui.widgets.ranks import RankList
    from ezpz_tui.ui.widgets.run_panel import RunPanel
    from ezpz_tui.ui.widgets.topology import TopologyGrid

TABS = (
    ("Launch", "tab-launch"),
    ("Run", "tab-run"),
    ("Metrics", "tab-metrics"),
    ("Compare", COMPARE_TAB),
    ("Heatmap", HEATMAP_TAB),
)
RUNS_REFRESH_S = 2.0
NARROW = 110  # below this width the right sidebar starts hidden
NARROW_LEFT = 100  # below this width the left sidebar and the grid shrink


@dataclass(frozen=True)
class StartUp:
    """What the main screen starts from. ``outputs`` None: the default, found when the session
    starts. ``alloc``, ``checks`` and ``clock`` replace detection, the doctor's probes and time
    (fixtures for snapshots and tests). ``attach`` opens a run at start, read-only unless this
    process started it."""

    clock: Callable[[], float]
    settings: Config  # the user's config.toml: stall_after, the [launch] settings
    outputs: Path | None = None
    alloc: Allocation | None = None
    checks: list[Check] | None = None
    attach: Path | None = None


class MainScreen(DocumentControl):
    BINDINGS = global_bindings()

    # Mounted after the first frame; the run views the first time a run opens or a tab shows.
    grid: TopologyGrid
    run_panel: RunPanel
    metrics: MetricsView

    def __init__(self, start: StartUp, keymap: Keymap) -> None:
        super().__init__()
        self.start = start
        self.keymap = keymap
        self.clock = start.clock
        self.session: Session | None = None
        self.doctor_checks: list[Check] | None = None
        self.opened: OpenedRun | None = None
        self.started = False  # every region mounted and the start-up run (if any) opened
        self._run_views_lock = asyncio.Lock()
        self._run_views_mounted = False

    # --- layout and start-up ----------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield SummaryBar(id="summary")
        with Horizontal(id="body"):
            with Vertical(id="left", classes="region"):
                yield AllocationPanel(self.clock, id="allocation")
            yield Vertical(id="center")
            yield Vertical(id="right", classes="region")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        if self.app.size.width < NARROW:
            self.query_one("#right").display = False
        self._fit_width()
        self._update_summary()
        self.call_after_refresh(self._mount_regions)

    async def _mount_regions(self) -> None:
        """After the first frame: the regions' widgets, then the allocation they show."""
        from ezpz_tui.ui.widgets.launch_form import LaunchForm
        from ezpz_tui.ui.widgets.topology import TopologyGrid

        start = self.start
        if start.alloc is None:
            self._detect_allocation()  # first: the probes run while the widgets mount
        tabs = TabbedContent(id="main", classes="region")
        for title, pane in TABS:
            tabs.compose_add_child(TabPane(title, id=pane))
        self.grid = TopologyGrid(id="topology", classes="region")
        await self.query_one("#left").mount(DoctorPanel(id="doctor"))
        await self.query_one("#center").mount_all([self.grid, tabs])
        await self.query_one("#right").mount(RunsPanel(id="runs"))
        self.form = LaunchForm(id="form")
        await self.query_one("#tab-launch").mount(self.form)
        if self.focus_chain:  # what Textual's auto focus does once a screen is composed
            self.focus_chain[0].focus()
        if start.attach is None:
            self.form.focus()
        if start.alloc is not None:
            self.post_message(AllocationDetected(start.alloc))
        self.set_interval(1.0, self._tick)
        self.set_interval(RUNS_REFRESH_S, self._refresh_runs)
        if start.attach is not None:
            await self.open_run(start.attach)
            # After the tab switch has settled: it would otherwise pass the focus on again.
            self.call_after_refresh(lambda: self.run_panel.ranks.focus())
        self.started = True
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The screen's own keys wait for its regions (a key typed ahead at start-up); the
        failure keys act (and show in the footer) while a failed run is open."""
        if action in FAILURE_ACTIONS:
            return self.started and self.check_failure_action(action)
        return self.started or action in APP_ACTIONS

    async def _mount_run_views(self) -> None:
        """The Run and Metrics tabs' views (the follower, the log, plotext), mounted the first
        time a run opens or either tab is shown."""
        async with self._run_views_lock:
            if self._run_views_mounted:
                return
            from ezpz_tui.ui.widgets.compare import CompareView
            from ezpz_tui.ui.widgets.heatmap import Heatmap
            from ezpz_tui.ui.widgets.metrics import MetricsView
            from ezpz_tui.ui.widgets.run_panel import RunPanel

            self.run_panel = RunPanel(self.clock, id="run-panel")
            self.metrics = MetricsView(id="metrics")
            self.compare_view = CompareView(id="compare")
            await self.query_one("#tab-run").mount(self.run_panel)
            await self.query_one("#tab-metrics").mount(self.metrics)
            await self.query_one(f"#{COMPARE_TAB}").mount(self.compare_view)
            self.heatmap = Heatmap(id="heatmap")
            await self.query_one(f"#{HEATMAP_TAB}").mount(self.heatmap)
            self._run_views_mounted = True

    def on_unmount(self) -> None:
        if self.opened is not None:
            self.opened.stop()

    def _fit_width(self) -> None:
        """Narrow sidebars, and a compact footer (every key still shows at 80 columns)."""
        narrow = self.app.size.width < NARROW_LEFT
        self.set_class(narrow, "narrow")
        self.query_one(Footer).compact = narrow

    def on_resize(self) -> None:
        self._fit_width()
        if self.started:
            run_view = self.query_one(TabbedContent).active != "tab-launch"
            self.call_after_refresh(self.make_room_for_runs, run_view)

    # --- workers: everything that waits ------------------------------------------------------

    @work(thread=True, exclusive=True, group="allocation")
    def _detect_allocation(self) -> None:
        from ezpz_tui.core.launching.allocation import detect_allocation

        alloc = detect_allocation()
        # What the handler builds the session from, imported here off the UI thread (about
        # 60 ms of imports that would otherwise hold up the first prefilled frame).
        import ezpz_tui.core.session  # noqa: F401

        self.post_message(AllocationDetected(alloc))

    @work(thread=True, exclusive=True, group="preview")
    def _preview_worker(self, plan: LaunchPlan) -> None:
        assert self.session is not None
        try:
            preview = self.session.preview(plan)
        except (OSError, ValueError) as exc:
            self.app.notify(f"Preview failed: {exc}", severity="error")
            preview = None
        self.post_message(PreviewReady(preview))

    @work(thread=True, group="overlay")
    def _load_overlay(self, path: Path, asked: bool = True) -> None:
        from ezpz_tui.core.watching.metrics.load import load_store

        self.post_message(OverlayLoaded(path, load_store(path), asked))

    @work(thread=True, exclusive=True, group="stacks")
    def _collect_stacks(self, run_dir: Path) -> None:
        from ezpz_tui.core.watching.stacks import format_report, request_stacks

        try:
            lines = format_report(request_stacks(run_dir))
        except OSError as exc:
            lines = [f"cannot ask the ranks of {run_dir.name}: {exc.strerror or exc}"]
        self.post_message(StacksCollected(run_dir, lines))

    # --- what the workers report --------------------------------------------------------------

    def on_stacks_collected(self, message: StacksCollected) -> None:
        from ezpz_tui.ui.screens.stacks import StacksScreen

        title = f"Python stacks of {message.run_dir.name}"
        self.app.push_screen(StacksScreen(title, message.lines, self.keymap))

    def on_allocation_detected(self, message: AllocationDetected) -> None:
        from ezpz_tui.core.failover import Failover
        from ezpz_tui.core.launching.plan import default_plan
        from ezpz_tui.core.launching.supervisor import Supervisor
        from ezpz_tui.core.session import Session

        alloc = message.alloc
        launch = self.start.settings
        supervisor = Supervisor(launch.kill_on_bad_exit, launch.raised_grace_s, launch.telemetry_s)
        self.session = Session(alloc, self.start.outputs, supervisor)
        self.failover = Failover(self.session, launch.retries)
        self.session.supervisor.add_listener(
            lambda handle, state: self.post_message(RunStateChanged(handle, state))
        )
        self.query_one(AllocationPanel).set_allocation(alloc)
        self.form.set_plan(alloc, default_plan(alloc))
        self._read_bad_hosts()
        if self.start.checks is not None:
            self.query_one(DoctorPanel).post_message(DoctorPanel.Checked(self.start.checks))
        else:
            self.action_rerun_doctor()
        self._refresh_runs()

    def on_doctor_panel_checked(self, message: DoctorPanel.Checked) -> None:
        self.doctor_checks = message.checks
        self._update_summary()

    def on_preview_ready(self, message: PreviewReady) -> None:
        self.form.set_preview(message.preview)

    def on_runs_panel_listed(self, message: RunsPanel.Listed) -> None:
        assert self.session is not None
        mine = {h.run_dir for h in self.session.supervisor.handles}
        self.query_one(RunsPanel).set_runs(message.runs, self.clock(), mine)
        details, opened = message.details, self.opened
        if details is not None and opened is not None and details.path == opened.path:
            opened.state = details.state.state
            opened.monitor.run_state = details.state
            self.run_panel.show_details(details)
            self.run_state_seen(opened, opened.state, opened.path in mine)
        self._update_summary()

    def on_run_state_changed(self, message: RunStateChanged) -> None:
        opened = self.opened
        if opened is not None and opened.path == message.handle.run_dir:
            opened.monitor.run_state = message.state
            self.run_state_seen(opened, message.state.state, started_here=True)
        self._refresh_runs()

    def on_ranks_expected(self, message: RanksExpected) -> None:
        try:
            if message.run is self.opened:
                message.run.expect_ranks(message.world)
        finally:
            message.done()

    def on_batch_read(self, message: BatchRead) -> None:
        try:
            if message.run is self.opened and message.run.apply(message.prepared, self.clock()):
                self._update_summary()
        finally:
            message.done()

    def on_overlay_loaded(self, message: OverlayLoaded) -> None:
        path, asked = message.path, message.asked
        if not self.metrics.toggle_overlay(path.name, message.store):
            if asked:
                self.notify(f"{path.name} has no metrics to overlay.", severity="warning")
            return
        runs = self.query_one(RunsPanel)
        runs.mark_compared(runs.compared | {path})
        self.refresh_comparison()
        if asked:  # a parent comes along unasked, and quietly: the runs list marks it
            self.notify(f"Overlaid {path.name} on the plots (Metrics and Compare tabs).", timeout=3)

    def on_parent_found(self, message: ParentFound) -> None:
        if message.run is self.opened and message.parent not in self.query_one(RunsPanel).compared:
            self._load_overlay(message.parent, asked=False)

    # --- what the widgets report -------------------------------------------------------------

    def on_rank_list_selected(self, message: RankList.Selected) -> None:
        if message.rank >= 0:  # not the launcher's row: it has no metrics
            self.metrics.set_selected_rank(message.rank)

    @on(RunsPanel.Compare)
    async def _compare_requested(self, message: RunsPanel.Compare) -> None:
        await self._mount_run_views()
        runs = self.query_one(RunsPanel)
        if message.path in runs.compared:
            self.metrics.toggle_overlay(message.path.name, None)
            runs.mark_compared(runs.compared - {message.path})
            self.refresh_comparison()
        else:
            self._load_overlay(message.path)

    def on_launch_form_changed(self, message: LaunchForm.Changed) -> None:
        form = self.form
        if form.plan is not None and form.alloc is not None:
            self.grid.update_plan(form.plan, form.alloc)
        if message.plan is None or self.session is None:
            form.set_preview(None)
        else:
            self._preview_worker(message.plan)

    @on(TabbedContent.TabActivated)
    async def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """The grid shows the plan being edited; the Run and Metrics tabs need the height."""
        launch = event.pane.id == "tab-launch"
        self.grid.display = launch
        if not launch:
            await self._mount_run_views()
        self.call_after_refresh(self.make_room_for_runs, not launch)
        self.refresh_comparison()
        self.update_heatmap()

    async def _step_tab(self, step: int) -> None:
        tabs = self.query_one(TabbedContent)
        ids = [pane.id for pane in tabs.query(TabPane) if pane.id]
        pane = ids[(ids.index(tabs.active) + step) % len(ids)]
        if pane != "tab-launch":
            await self._mount_run_views()
        tabs.active = pane
        self._focus_region("main")

    async def action_next_tab(self) -> None:
        await self._step_tab(1)

    async def action_previous_tab(self) -> None:
        await self._step_tab(-1)

    @on(RunsPanel.Open)
    async def _open_requested(self, message: RunsPanel.Open) -> None:
        """Enter in the runs list: read the run (the list steps aside where the run's log
        needs its room: :meth:`make_room_for_runs`)."""
        await self.open_run(message.path)
        self.run_panel.ranks.focus()

    # --- the opened run ----------------------------------------------------------------------

    async def open_run(self, path: Path) -> None:
        """Show ``path``: its ranks, logs and metrics, followed live until another opens."""
        from ezpz_tui.ui.opened_run import OpenedRun

        await self._mount_run_views()
        path = Path(path)
        if self.opened is not None:
            self.opened.stop()
        self.opened = OpenedRun(path, self.start.settings, self, self.run_panel, self.metrics)
        self.opened.start(read_only=self._handle_of(path) is None)
        self.refresh_bindings()  # the failure keys belong to the run that was open
        self.query_one(TabbedContent).active = "tab-run"
        self.refresh_comparison()  # in the background, ready when the Compare tab is asked for
        self._refresh_runs()
        self._update_summary()

    def _tick(self) -> None:
        self.query_one(AllocationPanel).tick()
        if self.opened is not None:
            self.run_panel.tick()
            self.update_heatmap()
        self._update_summary()

    def _refresh_runs(self) -> None:
        if self.session is not None:
            opened = self.opened.path if self.opened else None
            self.query_one(RunsPanel).list_runs(self.session.store, opened)
            self._read_bad_hosts()
            self.refresh_comparison(only_if_live=True)

    def _update_summary(self) -> None:
        opened = self.opened
        handle = self._handle_of(opened.path) if opened else self._current()
        alloc = self.session.alloc if self.session else None
        checks, progress = self.doctor_checks, opened.progress if opened else None
        name = opened.path.name if opened else handle.run_dir.name if handle else None
        state = handle.state.state if handle else opened.state if opened else None
        slow = 0
        if state == "running" and opened and opened.monitor.hung(self.clock()) is not None:
            state = "hung"  # every rank silent: S shows where each one waits
        elif state == "running" and opened:
            monitor, now = opened.monitor, self.clock()
            slow = sum(monitor.state_of(r, now) == "slow" for r in monitor.steps.slow)
        self.query_one(SummaryBar).show(
            run=name,
            state=state,
            step=progress.step if progress else None,
            loss=progress.loss if progress else None,
            steps_per_s=progress.steps_per_s if progress else None,
            walltime=alloc.walltime_left(self.clock()) if alloc else None,
            doctor_errors=None if checks is None else sum(c.level == "error" for c in checks),
            slow=slow,
        )

    # --- actions -----------------------------------------------------------------------------

    def action_show_stacks(self) -> None:
        if self.opened is None:
            self.app.notify("Open a run first: its ranks are asked for their stacks.")
            return
        self.app.notify("Asking every rank for its Python stacks …")
        self._collect_stacks(self.opened.path)

    def action_rerun_doctor(self) -> None:
        session = self.session
        if session is None or self.start.checks is not None:
            return
        self.doctor_checks = None
        self._update_summary()
        self.query_one(DoctorPanel).run(session.alloc, self.form.plan, session.store.outputs)

    def palette_commands(self) -> Iterable[PaletteCommand]:
        if not self.started:
            return ()
        from ezpz_tui.ui.screens.commands import main_commands

        return main_commands(self)
