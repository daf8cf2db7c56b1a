"""The main screen: the regions, what fills them, and the Messages between them.

Layout: a summary bar on top; the left sidebar holds the allocation and the doctor; the main
column holds the topology grid (the "top" region) over tabs for the launch form, the opened run
and metrics; the right sidebar holds the runs list. Everything that touches a process, a file or
a probe runs in a thread worker and reports back with a message (``ezpz_tui.ui.messages``); the
UI thread only renders models.

The screen composes widgets and routes Messages. Each concern is an object it owns, with its own
state, that sees the screen only through :class:`~ezpz_tui.ui.main.host.Host`: launching and
stopping (:mod:`.launches`), the opened run's failure (:mod:`.failures`), the Compare tab
(:mod:`.comparison`), sweeps (:mod:`.sweeps`), batch submissions (:mod:`.submissions`), the
opened run's stacks and trackers (:mod:`.run_tools`) and moving between regions
(:mod:`.regions`); they ask the person through :mod:`.dialogs`. The opened run and the tabs that
show it are :mod:`.run_views`; what the command palette offers is :mod:`.commands`.

The first frame is the frame of the regions alone: their widgets (the form, the lists, the grid)
are imported and mounted right after it has been painted, the Run and Metrics views the first
time a run opens or their tab shows. The next frame is the plan's: nothing is painted between
the two (for ``PLAN_WAIT_S`` at most), so the regions and the plan filling them are laid out
and painted once, and the session's worker is not slowed by paints of a form still empty; the
runs list and the doctor start after that frame. Keys typed before the screen can act on them
(the regions, the attached run and the allocation in the form not yet there) are kept by the
app's :class:`~ezpz_tui.ui.typeahead.TypeAhead` and applied in order once
:class:`MainScreen.Ready` is posted; a worker whose answer opens a dialog or a run holds them
too (``in_thread(..., holds_keys=True)``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual import events, on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import TabbedContent, TabPane

from ezpz_tui.ui.main.comparison import COMPARE_TAB, Comparison
from ezpz_tui.ui.main.dialogs import ScreenDialogs
from ezpz_tui.ui.main.doctor_start import DoctorStart
from ezpz_tui.ui.main.failures import FAILURE_ACTIONS, Failures
from ezpz_tui.ui.main.launches import Launches
from ezpz_tui.ui.main.regions import Regions
from ezpz_tui.ui.main.run_tools import RunTools
from ezpz_tui.ui.main.run_views import HEATMAP_TAB, RunViews, wrap_step
from ezpz_tui.ui.main.submissions import Submissions
from ezpz_tui.ui.main.summary import show_summary
from ezpz_tui.ui.main.sweeps import Sweeps
from ezpz_tui.ui.messages import (
    BadHostsRead,
    BatchRead,
    ComparisonReady,
    DigestRead,
    ExclusionPlanned,
    FailureExplained,
    FirstReadPart,
    GoodputRead,
    KeysReleased,
    Launched,
    OverlayLoaded,
    ParentFound,
    PreviewReady,
    RanksExpected,
    RelaunchAsked,
    RunsStopped,
    RunStateChanged,
    SessionStarted,
    StopElsewhereAsked,
    SweepProgress,
    TuneProgress,
)
from ezpz_tui.ui.palette import APP_ACTIONS, PaletteCommand, global_bindings
from ezpz_tui.ui.widgets.footer import KeyHints
from ezpz_tui.ui.widgets.panels import AllocationPanel, DoctorPanel, SummaryBar
from ezpz_tui.ui.widgets.runs import RunsPanel

if TYPE_CHECKING:
    from ezpz_tui.config import Config
    from ezpz_tui.core.checking.check import Check
    from ezpz_tui.core.launching.allocation import Allocation
    from ezpz_tui.core.launching.plan import LaunchPlan
    from ezpz_tui.core.session import Preview, Session
    from ezpz_tui.keymap.table import Keymap
    from ezpz_tui.ui.opened_run import OpenedRun
    from ezpz_tui.ui.typeahead import TypeAhead
    from ezpz_tui.ui.widgets.heatmap import Heatmap
    from ezpz_tui.ui.widgets.launch_form import LaunchForm
    from ezpz_tui.ui.widgets.metric_cursor import PlotCursor
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
PLAN_WAIT_S = 3.0  # the longest the mounted regions wait for the plan before being painted
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


class MainScreen(Screen[None]):
    BINDINGS = global_bindings()

    class Ready(Message):
        """Start-up is over: the keys typed ahead can act."""

    # Mounted after the first frame.
    form: LaunchForm
    grid: TopologyGrid

    def __init__(self, start: StartUp, keymap: Keymap, typeahead: TypeAhead) -> None:
        super().__init__()
        self.start = start
        self.keymap = keymap
        self.typeahead = typeahead
        # What start-up waits for before Ready: keys typed ahead for the runs list act on it.
        self._arriving = {"regions", "allocation", "runs"}
        self.settings = start.settings
        self.clock = start.clock
        self.session: Session | None = None
        self.doctor_checks: list[Check] | None = None
        self.doctor_start = DoctorStart(
            start.attach is None,
            lambda: self.call_after_refresh(self._run_doctor, True),
            self.set_timer,
            PLAN_WAIT_S,
        )
        # The plan whose preview came with the session: the Changed its filling posts asks
        # for no second one.
        self._preview_given: LaunchPlan | None = None
        self._unpainted = ExitStack()  # holds the paints while the regions wait for the plan
        self.started = False  # every region mounted and the start-up run (if any) opened
        self._ui_thread = threading.get_ident()  # the app's: it builds its screens
        self._bad_hosts_seen: tuple[int, int] | None = None  # bad_hosts.txt's mark, last read
        self.dialogs = ScreenDialogs(self, keymap, self._on_ui)
        self.regions = Regions(self)
        self.launches = Launches(self)
        self.failures = Failures(self, self.launches)
        self.comparison = Comparison(self)
        self.sweeps = Sweeps(self)
        self.submissions = Submissions(self)
        self.run_tools = RunTools(self)
        self.views = RunViews(self, self.settings, self.clock, self.launches, self._opened_changed)

    @property
    def opened(self) -> OpenedRun | None:
        """The run the Run and Metrics tabs show."""
        return self.views.opened

    @property
    def run_panel(self) -> RunPanel:
        return self.views.run_panel

    # --- layout and start-up ----------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield SummaryBar(id="summary")
        with Horizontal(id="body"):
            with Vertical(id="left", classes="region"):
                yield AllocationPanel(self.clock, id="allocation")
            yield Vertical(id="center")
            yield Vertical(id="right", classes="region")
        yield KeyHints(show_command_palette=False)

    def on_mount(self) -> None:
        self._ui_thread = threading.get_ident()
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
        if start.attach is None:  # an attached run's rows paint as they come: the form is hidden
            self._unpainted.enter_context(self.app.batch_update())
            self.set_timer(PLAN_WAIT_S, self._unpainted.close)
        self._start_session(start.alloc)  # first: the probes run while the widgets mount
        tabs = TabbedContent(id="main", classes="region")
        for title, pane in TABS:
            tabs.compose_add_child(TabPane(title, id=pane))
        self.grid = TopologyGrid(id="topology", classes="region")
        await self.query_one("#left").mount(DoctorPanel(id="doctor"))
        await self.query_one("#center").mount_all([self.grid, tabs])
        await self.query_one("#right").mount(RunsPanel(id="runs"))
        self.form = LaunchForm(self.settings.launch_more, id="form")
        await self.query_one("#tab-launch").mount(self.form)
        # What Textual's auto focus does once a screen is composed; without a run to attach,
        # the form takes the focus once the plan is painted (each focus change restyles the
        # region around it, and moves the footer's keys).
        if start.attach is not None and self.focus_chain:
            self.focus_chain[0].focus()
        self.set_interval(1.0, self._tick)
        # The runs list, the bad hosts and the opened run's header, each read again only where
        # it can have changed: an idle outputs directory costs a few stats, and nothing on screen.
        self.set_interval(RUNS_REFRESH_S, lambda: self._refresh_runs(whole=False))
        if start.attach is not None:
            await self.open_run(start.attach)
            # After the tab switch has settled: it would otherwise pass the focus on again.
            self.call_after_refresh(self._attached)
        else:
            self._arrived("regions")
        self.started = True
        self.refresh_bindings()

    def _attached(self) -> None:
        self.run_panel.ranks.focus()
        self._arrived("regions")

    def _arrived(self, part: str) -> None:
        """A part of start-up is there; with the last, the keys typed ahead act."""
        if self._arriving:
            self._arriving.discard(part)
            if not self._arriving:
                self.post_message(self.Ready())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The screen's own actions act once its regions are there (a palette command cannot
        run before them; keys typed ahead are kept by the app until Ready), and show in the
        footer from the first frame, dimmed until then; the failure keys act (and show in the
        footer) while a failed run is open."""
        if action in FAILURE_ACTIONS:
            return self.started and self.failures.on_screen() is not None
        return True if self.started or action in APP_ACTIONS else None

    def on_unmount(self) -> None:
        self._unpainted.close()
        self.views.close()

    def _fit_width(self) -> None:
        """Narrow sidebars, and a compact footer (every key still shows at 80 columns)."""
        narrow = self.app.size.width < NARROW_LEFT
        self.set_class(narrow, "narrow")
        self.query_one(KeyHints).compact = narrow

    def on_resize(self) -> None:
        self._fit_width()
        if self.started:
            run_view = self.query_one(TabbedContent).active != "tab-launch"
            self.call_after_refresh(self.regions.make_room_for_runs, run_view)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self.regions.focused(event.widget)

    # --- the Host interface: what the controllers may ask ------------------------------------

    @property
    def plan(self) -> LaunchPlan | None:
        return self.form.plan if self.form.can_launch else None

    @property
    def plan_errors(self) -> list[str]:
        return [p.message for p in self.form.problems if p.level == "error"]

    def _on_ui(self, call: Callable[..., object], *args: object) -> None:
        """``call(*args)`` on the UI thread, from whichever thread asks."""
        if threading.get_ident() == self._ui_thread:
            call(*args)
        else:
            self.app.call_from_thread(call, *args)

    def in_thread(
        self,
        work: Callable[[], None],
        group: str,
        exclusive: bool = False,
        holds_keys: bool = False,
    ) -> None:
        if holds_keys:
            work = self._holding_keys(work)
        run = lambda: self.run_worker(work, group=group, exclusive=exclusive, thread=True)  # noqa: E731
        self._on_ui(run)

    def _holding_keys(self, work: Callable[[], None]) -> Callable[[], None]:
        """``work``, with the keys typed from now on kept until what it posted (a question, a
        run to open) has been handled: the release is posted behind it, to the same queue."""
        why = object()
        self._on_ui(self.typeahead.hold, why)

        def holding() -> None:
            try:
                work()
            finally:
                self.post_message(KeysReleased(why))

        return holding

    def on_keys_released(self, message: KeysReleased) -> None:
        # After a refresh: what the worker's answer deferred to then (room for a run's log)
        # comes before the keys.
        self.call_after_refresh(self.typeahead.release, message.why)

    def show_tab(self, pane: str) -> None:
        self.query_one(TabbedContent).active = pane

    def refresh_runs(self) -> None:
        self._on_ui(self._refresh_runs)

    def refresh_comparison(self, only_if_live: bool = False) -> None:
        if not self.views.mounted:
            return  # nothing to show it in yet: the first run opened reads it
        opened = self.opened.path if self.opened else None
        marked = tuple(sorted(self.query_one(RunsPanel).compared, key=lambda p: p.name))
        shown = self.views.compare_view.comparison
        live = shown is not None and any(r.partial for r in shown.runs)
        visible = self.query_one(TabbedContent).active == COMPARE_TAB
        self.comparison.refresh((opened, marked), visible, live, only_if_live)

    def show_race(self, lines: list[str]) -> None:
        if self.views.mounted:
            self.views.compare_view.show_race(lines)

    def use_plan(self, plan: LaunchPlan) -> None:
        if self.session is not None:
            self.form.set_plan(self.session.alloc, plan)

    def exit_app(self) -> None:
        self.app.exit()

    # --- workers: everything that waits ------------------------------------------------------

    @work(thread=True, exclusive=True, group="allocation")
    def _start_session(self, alloc: Allocation | None) -> None:
        """The allocation (detected, unless the start-up gave one), the session over it and the
        default plan's preview, together: the form is filled once, with its preview, and the
        imports they need (about 90 ms) stay off the UI thread."""
        from ezpz_tui.core.launching.allocation import detect_allocation
        from ezpz_tui.core.launching.plan import default_plan
        from ezpz_tui.core.launching.supervisor import Supervisor
        from ezpz_tui.core.session import Session
        from ezpz_tui.core.watching.efficiency import PeakSettings

        launch = self.settings
        supervisor = Supervisor(
            launch.kill_on_bad_exit,
            launch.raised_grace_s,
            launch.telemetry_s,
            launch.before_walltime_s,
            launch.flight_recorder,
            PeakSettings(launch.peak_tflops, launch.peak_dtype),
            launch.slow_factor,
            relaunch_save_s=launch.relaunch_save_s,
        )
        session = Session(alloc or detect_allocation(), self.start.outputs, supervisor)
        plan = default_plan(session.alloc)
        self.post_message(SessionStarted(session, plan, self._preview(session, plan)))

    def _preview(self, session: Session, plan: LaunchPlan) -> Preview | None:
        try:
            return session.preview(plan)
        except (OSError, ValueError) as exc:
            self.app.notify(f"Preview failed: {exc}", severity="error")
            return None

    @work(thread=True, exclusive=True, group="preview")
    def _preview_worker(self, plan: LaunchPlan) -> None:
        assert self.session is not None
        self.post_message(PreviewReady(plan, self._preview(self.session, plan)))

    @work(thread=True, exclusive=True, group="bad-hosts")
    def _read_bad_hosts(self, whole: bool = True) -> None:
        """The outputs directory's bad hosts; not ``whole``: only when the file changed."""
        from ezpz_tui.core.runs.bad_hosts import bad_hosts_path, read_bad_hosts
        from ezpz_tui.core.runs.outputs_watch import mark, unchanged

        if self.session is not None:
            path = bad_hosts_path(self.session.store.outputs)
            seen, self._bad_hosts_seen = self._bad_hosts_seen, mark(path)
            if not whole and unchanged(seen, self._bad_hosts_seen):
                return
            self.post_message(BadHostsRead(read_bad_hosts(self.session.store.outputs)))

    # --- what the workers report --------------------------------------------------------------

    def on_session_started(self, message: SessionStarted) -> None:
        from ezpz_tui.core.failover import Failover

        self.session = session = message.session
        self.failures.failover = Failover(session, self.settings.retries)
        session.supervisor.add_listener(
            lambda handle, state: self.post_message(RunStateChanged(handle, state))
        )
        self.query_one(AllocationPanel).set_allocation(session.alloc)
        self._preview_given = message.plan
        self.form.set_plan(session.alloc, message.plan)
        if self.start.checks is not None:
            self.query_one(DoctorPanel).post_message(DoctorPanel.Checked(self.start.checks))
        else:
            self.doctor_start.wanted()
        self._show_preview(message.plan, message.preview)
        if self.form.plan is not None:  # in the same frame as the form, not one later
            self.grid.update_plan(self.form.plan, session.alloc)
        self._unpainted.close()
        self.call_after_refresh(self._session_shown)

    def _session_shown(self) -> None:
        """The plan is painted: the form takes the focus, before Ready, so that the keys typed
        ahead go to it; the runs list is read (its worker would have slowed that frame)."""
        if self.start.attach is None:
            self.form.focus()
        self._refresh_runs()
        self._arrived("allocation")

    def on_doctor_panel_checked(self, message: DoctorPanel.Checked) -> None:
        self.doctor_checks = message.checks
        self._update_summary()

    def on_preview_ready(self, message: PreviewReady) -> None:
        self._show_preview(message.plan, message.preview)

    def _show_preview(self, plan: LaunchPlan, preview: Preview | None) -> None:
        """The preview of the form's plan; one of a plan edited away since is dropped (the
        preview of the plan now in the form is on its way)."""
        if plan != self.form.plan:
            return
        self.form.set_preview(preview)
        self.doctor_start.preview_shown()

    def _rows_painted(self) -> None:
        """The opened run's rows are in: once painted, the doctor may go (:class:`DoctorStart`)."""
        if not self.doctor_start.rows_shown:
            self.call_after_refresh(self.doctor_start.rows_arrived)

    def on_bad_hosts_read(self, message: BadHostsRead) -> None:
        self.query_one(AllocationPanel).set_bad_hosts(message.hosts)

    def on_runs_panel_listed(self, message: RunsPanel.Listed) -> None:
        assert self.session is not None
        mine = {h.run_dir for h in self.session.supervisor.handles}
        self.query_one(RunsPanel).set_runs(message.runs, self.clock(), mine)
        self._arrived("runs")
        details, opened = message.details, self.opened
        if details is not None and opened is not None and details.path == opened.path:
            opened.state = details.state.state
            opened.monitor.run_state = details.state
            self.run_panel.show_details(details)
            self.failures.seen(opened, opened.state, opened.path in mine)
        self._update_summary()

    def on_run_state_changed(self, message: RunStateChanged) -> None:
        opened = self.opened
        if opened is not None and opened.path == message.handle.run_dir:
            opened.monitor.run_state = message.state
            self.failures.seen(opened, message.state.state, started_here=True)
        self._refresh_runs()

    def on_ranks_expected(self, message: RanksExpected) -> None:
        try:
            if message.run is self.opened:
                message.run.expect_ranks(message.world)
        finally:
            message.done()

    def on_digest_read(self, message: DigestRead) -> None:
        try:
            if message.run is self.opened:
                message.run.settle(message.found)
                self._update_summary()
                self._rows_painted()
        finally:
            message.done()

    def on_batch_read(self, message: BatchRead) -> None:
        try:
            if message.run is self.opened and message.run.apply(message.prepared, self.clock()):
                self._update_summary()
            self._rows_painted()
        finally:
            message.done()

    def on_first_read_part(self, message: FirstReadPart) -> None:
        try:
            if message.run is self.opened:
                message.run.adopt(message.item, self.clock())
                self._update_summary()
            self._rows_painted()
        finally:
            message.done()

    def on_overlay_loaded(self, message: OverlayLoaded) -> None:
        if self.views.overlay_loaded(message):
            self.refresh_comparison()

    def on_goodput_read(self, message: GoodputRead) -> None:
        if message.run is self.opened:
            message.run.goodput = message.goodput
            self._update_summary()

    def on_parent_found(self, message: ParentFound) -> None:
        self.views.parent_found(message.run, message.parent, message.resumed)

    def on_failure_explained(self, message: FailureExplained) -> None:
        if message.run is self.opened:
            self.run_panel.show_failure(message.failure, self.keymap)
            self.failures.explained(message)

    def on_exclusion_planned(self, message: ExclusionPlanned) -> None:
        self.failures.planned(message)

    async def on_launched(self, message: Launched) -> None:
        await self.launches.launched(message)

    def on_relaunch_asked(self, message: RelaunchAsked) -> None:
        self.launches.relaunch_asked(message)

    def on_stop_elsewhere_asked(self, message: StopElsewhereAsked) -> None:
        self.launches.stop_elsewhere_asked(message)

    def on_runs_stopped(self, message: RunsStopped) -> None:
        self.launches.runs_stopped(message)

    def on_comparison_ready(self, message: ComparisonReady) -> None:
        self.views.compare_view.show(message.comparison)

    async def on_sweep_progress(self, message: SweepProgress) -> None:
        await self.sweeps.progress(message)

    async def on_tune_progress(self, message: TuneProgress) -> None:
        await self.sweeps.tune_progress(message)

    # --- what the widgets report -------------------------------------------------------------

    def on_rank_list_selected(self, message: RankList.Selected) -> None:
        if message.rank >= 0:  # not the launcher's row: it has no metrics
            self.views.metrics.set_selected_rank(message.rank)

    @on(RunsPanel.Compare)
    async def _compare_requested(self, message: RunsPanel.Compare) -> None:
        if await self.views.toggle_overlay(message.path):
            self.refresh_comparison()

    @on(RunsPanel.SubmitAsked)
    def _submit_asked(self, message: RunsPanel.SubmitAsked) -> None:
        self.submissions.submit(message.path)

    @on(RunsPanel.Open)
    async def _open_requested(self, message: RunsPanel.Open) -> None:
        """Enter in the runs list: read the run (the list steps aside where the run's log
        needs its room: :meth:`Regions.make_room_for_runs`)."""
        await self.open_run(message.path)
        self.run_panel.ranks.focus()

    def on_launch_form_changed(self, message: LaunchForm.Changed) -> None:
        form = self.form
        if form.plan is not None and form.alloc is not None:
            self.grid.update_plan(form.plan, form.alloc)
        given, self._preview_given = self._preview_given, None
        if message.plan is None or self.session is None:
            form.set_preview(None)
            self.doctor_start.preview_shown()
        elif message.plan != given:
            self._preview_worker(message.plan)

    def on_launch_form_folded(self, message: LaunchForm.Folded) -> None:
        self._keep_fold(message.shown)

    @work(thread=True, exclusive=True, group="keep-fold")
    def _keep_fold(self, shown: bool) -> None:
        """The fold as the person left it, for the next start (config.toml's [ui])."""
        from ezpz_tui.config import save_setting

        for sentence in save_setting("ui", "launch_more", shown):
            self.app.notify(sentence, severity="warning", timeout=10)

    def on_run_panel_filter_wanted(self, message: RunPanel.FilterWanted) -> None:
        panel = self.run_panel
        self.dialogs.prompt(message.prompt, message.current, panel.filter_by, allow_empty=True)

    def on_run_panel_whole_line(self, message: RunPanel.WholeLine) -> None:
        from ezpz_tui.ui.screens.line import LineScreen

        self.app.push_screen(LineScreen(message.title, message.text))

    def on_plot_cursor_step_chosen(self, message: PlotCursor.StepChosen) -> None:
        self.views.show_step(message.rank, message.step, message.span)

    def on_heatmap_chosen(self, message: Heatmap.Chosen) -> None:
        self.views.show_rank(message.rank)

    @on(TabbedContent.TabActivated)
    async def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """The grid shows the plan being edited; the Run and Metrics tabs need the height."""
        launch = event.pane.id == "tab-launch"
        self.grid.display = launch
        if not launch:
            await self.views.mount()
        self.call_after_refresh(self.regions.make_room_for_runs, not launch)
        self.refresh_comparison()
        self.views.tick()  # the clocks of the tab shown, not ticked while it was hidden

    # --- the opened run ----------------------------------------------------------------------

    async def open_run(self, path: Path) -> None:
        """Show ``path``: its ranks, logs and metrics, followed live until another opens."""
        await self.views.open(path)

    def _opened_changed(self) -> None:
        self.refresh_bindings()  # the failure keys belong to the run that was open
        self.refresh_comparison()  # in the background, ready when the Compare tab is asked for
        self._refresh_runs()
        self._update_summary()

    def _tick(self) -> None:
        """Once a second: what shows time (the walltime, the runs' ages, the opened run's
        clocks); each widget repaints only when its words change."""
        self.query_one(AllocationPanel).tick()
        self.query_one(RunsPanel).tick(self.clock())
        self.views.tick()
        self._update_summary()

    def _refresh_runs(self, whole: bool = True) -> None:
        if self.session is not None:
            opened = self.opened.path if self.opened else None
            self.query_one(RunsPanel).list_runs(self.session.store, opened, whole)
            self._read_bad_hosts(whole)
            self.refresh_comparison(only_if_live=True)

    def _update_summary(self) -> None:
        opened = self.opened
        handle = self.launches.handle_of(opened.path) if opened else self.launches.current()
        alloc = self.session.alloc if self.session else None
        max_age_s, saving = self.settings.checkpoint_max_age_s, self.launches.saving
        bar = self.query_one(SummaryBar)
        show_summary(bar, opened, handle, alloc, self.doctor_checks, self.clock, max_age_s, saving)

    async def _step_tab(self, step: int) -> None:
        tabs = self.query_one(TabbedContent)
        ids = [pane.id for pane in tabs.query(TabPane) if pane.id]
        pane = wrap_step(ids, tabs.active, step)
        if pane != "tab-launch":
            await self.views.mount()
        tabs.active = pane
        self.regions.focus("main")

    # --- actions: the key table's names, each handed to the object that does it ---------------

    def action_launch(self) -> None:
        if not self.sweeps.refuses_launch():
            self.launches.launch()

    def action_relaunch(self) -> None:
        if not self.sweeps.refuses_launch():
            self.launches.relaunch()

    def action_stop_run(self) -> None:
        if not self.sweeps.stop():
            self.launches.stop()

    def action_edit_sizes(self) -> None:
        """From anywhere, the launch form in normal mode with its cursor on TP: ``+`` then
        relaunch tries the next layout."""
        self.show_tab("tab-launch")
        self.form.focus()
        self.form.move_cursor("tp")

    def action_sweep(self) -> None:
        self.sweeps.start()

    def action_show_failure(self) -> None:
        self.failures.show()

    def action_exclude_and_relaunch(self) -> None:
        self.failures.exclude_and_relaunch()

    def action_show_stacks(self) -> None:
        self.run_tools.show_stacks()

    def action_profile_steps(self) -> None:
        self.run_tools.profile_steps()

    def action_copy_trackers(self) -> None:
        self.run_tools.copy_trackers()

    def action_rerun_doctor(self) -> None:
        self._run_doctor(reuse=False)

    def _run_doctor(self, reuse: bool) -> None:
        """The doctor's checks; ``reuse`` (at start) shows the probes' kept answers at once,
        labelled cached, and probes again behind them."""
        session = self.session
        if session is None or self.start.checks is not None:
            return
        self.doctor_start.started()
        self.doctor_checks = None
        self._update_summary()
        panel = self.query_one(DoctorPanel)
        panel.run(session.alloc, self.form.plan, session.store.outputs, reuse)

    async def action_next_tab(self) -> None:
        await self._step_tab(1)

    async def action_previous_tab(self) -> None:
        await self._step_tab(-1)

    async def action_next_document(self) -> None:
        await self.views.step_document(1)

    async def action_previous_document(self) -> None:
        await self.views.step_document(-1)

    def action_focus_left(self) -> None:
        self.regions.focus("left")

    def action_focus_main(self) -> None:
        self.regions.focus("main")

    def action_focus_top(self) -> None:
        self.regions.focus("top")

    def action_focus_right(self) -> None:
        self.regions.focus("right")

    def action_region_left(self) -> None:
        self.regions.step(-1)

    def action_region_right(self) -> None:
        self.regions.step(1)

    def action_toggle_left_sidebar(self) -> None:
        self.regions.toggle("#left")

    def action_toggle_right_sidebar(self) -> None:
        self.regions.toggle("#right")

    def action_history_back(self) -> None:
        self.regions.back()

    def action_history_forward(self) -> None:
        self.regions.forward()

    def action_toggle_fullscreen(self) -> None:
        self.regions.toggle_fullscreen()

    def action_search(self) -> None:
        self.regions.search()

    def palette_commands(self) -> Iterable[PaletteCommand]:
        if not self.started:
            return ()
        from ezpz_tui.ui.main.commands import main_commands

        return main_commands(self, self.keymap, self.query_one(RunsPanel).runs, self.open_run)
