"""The ezpz-tui application: regions, keys, workers.

Layout: a summary bar on top; the left sidebar holds the allocation and the doctor; the main
column holds the topology grid (the "top" region) over tabs for the launch form, the opened run
and metrics; the right sidebar holds the runs list. Everything that touches a process, a file or a
probe runs in a thread worker and reports back; the UI thread only renders models.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

from textual import events, on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.command import Provider
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Footer, TabbedContent, TabPane

from ezpz_tui import config
from ezpz_tui.core.checking.doctor import Check, run_checks
from ezpz_tui.core.launching.allocation import Allocation, detect_allocation
from ezpz_tui.core.launching.plan import LaunchPlan, default_plan
from ezpz_tui.core.launching.runstore import RunSummary, read_run_toml
from ezpz_tui.core.launching.supervisor import RunHandle
from ezpz_tui.core.session import LaunchRefused, Preview, Session, default_outputs
from ezpz_tui.core.watching.followers import Progress, RunFollower
from ezpz_tui.core.watching.monitor import Prepared, RunMonitor
from ezpz_tui.keymap import DEFAULT_KEYMAP, apply_overrides
from ezpz_tui.ui.palette import ActionsProvider, ChordKeys, PaletteCommand, bindings_for
from ezpz_tui.ui.screens.confirm import ConfirmScreen
from ezpz_tui.ui.screens.help import HelpScreen
from ezpz_tui.ui.screens.theme_picker import ThemePicker
from ezpz_tui.ui.themes import register_themes
from ezpz_tui.ui.widgets.launch_form import LaunchForm
from ezpz_tui.ui.widgets.metrics import MetricsView
from ezpz_tui.ui.widgets.panels import AllocationPanel, DoctorPanel, SummaryBar
from ezpz_tui.ui.widgets.ranks import RankList
from ezpz_tui.ui.widgets.run_panel import RunPanel
from ezpz_tui.ui.widgets.runs import RunDetails, RunsPanel, read_run_details
from ezpz_tui.ui.widgets.topology import TopologyGrid

REGIONS = ("left", "top", "main", "right")
RUNS_REFRESH_S = 2.0
NARROW = 110  # below this width the right sidebar starts hidden
NARROW_LEFT = 100  # below this width the left sidebar and the grid shrink
FOLLOW_INTERVAL_S = 0.1  # how often the follower hands a batch to the UI (DESIGN: 50-250 ms)
READ_BYTES = 1 << 20  # per file and poll
BACKLOG_BYTES_PER_LINE = 200  # a generous training log line, to start a log near its end


def unless_closing(handler: Callable[..., None]) -> Callable[..., None]:
    """Skip ``handler`` once the app is closing.

    Worker callbacks, timers, late focus changes and messages still arrive while the app quits;
    they would query widgets that are gone and fail the exit.
    """

    @functools.wraps(handler)
    def guarded(self: App[None], *args: Any, **kwargs: Any) -> None:
        if self.is_running:
            handler(self, *args, **kwargs)

    return guarded


class RunStateChanged(Message):
    """Posted from the supervisor's watcher thread whenever a run records a state."""

    def __init__(self, handle: RunHandle, state: dict[str, Any]) -> None:
        super().__init__()
        self.handle = handle
        self.state = state


class EzpzApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "ezpz-tui"
    BINDINGS: ClassVar[list[Binding]] = bindings_for("global")  # type: ignore[assignment]
    COMMANDS: ClassVar[set[type[Provider]]] = {ActionsProvider}  # type: ignore[assignment]

    def __init__(
        self,
        outputs: Path | None = None,
        alloc: Allocation | None = None,
        clock: Callable[[], float] = time.time,
        checks: list[Check] | None = None,
        attach: Path | None = None,
    ) -> None:
        """``alloc``, ``clock`` and ``checks`` replace detection, time and the doctor's probes
        (fixtures for snapshots and tests); by default all three are real. ``attach`` opens a
        run at start, read-only unless this process started it."""
        super().__init__()
        self.outputs = outputs or default_outputs()
        self._attach = attach
        self.clock = clock
        self._given_alloc = alloc
        self._given_checks = checks
        settings, self.problems = config.load_config()
        self.keymap, more = apply_overrides(DEFAULT_KEYMAP, settings.keys)
        self.problems += more
        self.chords = ChordKeys(self, self.keymap)
        self._wanted_theme = settings.theme
        self.stall_after = settings.stall_after
        self.session: Session | None = None
        self.doctor_checks: list[Check] | None = None
        self.progress = Progress()
        self.monitor: RunMonitor | None = None
        self._follow_stop = threading.Event()
        self._opened: Path | None = None
        self._opened_state: str | None = None
        self._history: list[str] = []
        self._future: list[str] = []

    # --- layout -----------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield SummaryBar(id="summary")
        with Horizontal(id="body"):
            with Vertical(id="left", classes="region"):
                yield AllocationPanel(self.clock, id="allocation")
                yield DoctorPanel(id="doctor")
            with Vertical(id="center"):
                yield TopologyGrid(id="topology", classes="region")
                with TabbedContent(id="main", classes="region"):
                    with TabPane("Launch", id="tab-launch"):
                        yield LaunchForm(id="form")
                    with TabPane("Run", id="tab-run"):
                        yield RunPanel(self.clock, id="run-panel")
                    with TabPane("Metrics", id="tab-metrics"):
                        yield MetricsView(id="metrics")
            with Vertical(id="right", classes="region"):
                yield RunsPanel(id="runs")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        self.set_keymap(self.keymap.textual_overrides())
        self.problems += register_themes(self)
        if self._wanted_theme in self.available_themes:
            self.theme = self._wanted_theme
        for problem in self.problems:
            self.notify(problem, severity="warning", timeout=8)
        if self.size.width < NARROW:
            self.query_one("#right").display = False
        self.screen.set_class(self.size.width < NARROW_LEFT, "narrow")
        self._update_summary()
        if self._given_alloc is not None:
            self._allocation_ready(self._given_alloc)
        else:
            self._detect_allocation()
        self.set_interval(1.0, self._tick)
        self.set_interval(RUNS_REFRESH_S, self._refresh_runs)
        if self._attach is not None:
            self._open_run(self._attach)
            # After the tab switch has settled: it would otherwise pass the focus on again.
            self.call_after_refresh(self._focus_rank_list)
        else:
            self.query_one(LaunchForm).focus()

    @unless_closing
    def _focus_rank_list(self) -> None:
        self.query_one(RankList).focus()

    def on_unmount(self) -> None:
        self._follow_stop.set()

    def on_resize(self, event: events.Resize) -> None:
        self.screen.set_class(event.size.width < NARROW_LEFT, "narrow")

    # --- workers: everything that waits ------------------------------------------------------

    @work(thread=True, exclusive=True, group="allocation")
    def _detect_allocation(self) -> None:
        alloc = detect_allocation()
        self.call_from_thread(self._allocation_ready, alloc)

    @unless_closing
    def _allocation_ready(self, alloc: Allocation) -> None:
        self.session = Session(alloc, self.outputs)
        self.session.supervisor.add_listener(
            lambda handle, state: self.post_message(RunStateChanged(handle, state))
        )
        self.query_one(AllocationPanel).set_allocation(alloc)
        self.query_one(LaunchForm).set_plan(alloc, default_plan(alloc))
        if self._given_checks is not None:
            self._doctor_done(self._given_checks)
        else:
            self.action_rerun_doctor()
        self._refresh_runs()

    @work(thread=True, exclusive=True, group="doctor")
    def _doctor_worker(self, alloc: Allocation, plan: LaunchPlan | None) -> None:
        checks = run_checks(alloc, plan, outputs=self.outputs)
        self.call_from_thread(self._doctor_done, checks)

    @unless_closing
    def _doctor_done(self, checks: list[Check]) -> None:
        self.doctor_checks = checks
        self.query_one(DoctorPanel).set_checks(checks)
        self._update_summary()

    @work(thread=True, exclusive=True, group="preview")
    def _preview_worker(self, plan: LaunchPlan) -> None:
        assert self.session is not None
        try:
            preview: Preview | None = self.session.preview(plan)
        except (OSError, ValueError) as exc:
            self.call_from_thread(self.notify, f"Preview failed: {exc}", severity="error")
            preview = None
        self.call_from_thread(self._preview_ready, preview)

    @unless_closing
    def _preview_ready(self, preview: Preview | None) -> None:
        self.query_one(LaunchForm).set_preview(preview)

    @work(thread=True, exclusive=True, group="runs")
    def _runs_worker(self) -> None:
        assert self.session is not None
        runs = self.session.store.list_runs()
        details = read_run_details(self._opened) if self._opened else None
        self.call_from_thread(self._runs_ready, runs, details)

    @unless_closing
    def _runs_ready(self, runs: list[RunSummary], details: RunDetails | None) -> None:
        assert self.session is not None
        mine = {h.run_dir for h in self.session.supervisor.handles}
        self.query_one(RunsPanel).set_runs(runs, self.clock(), mine)
        if details is not None and details.path == self._opened:
            self._opened_state = details.state.get("state")
            self.query_one(RunPanel).show_details(details)
        self._update_summary()

    def _follow(self, monitor: RunMonitor, stop: threading.Event) -> None:
        """Reads the opened run until another is opened or the app ends, one batch every
        FOLLOW_INTERVAL_S at most; waiting for the UI to take each batch bounds what queues.

        A plain daemon thread, not a Textual worker: it lives as long as the run is open, and
        "wait for the workers" must keep meaning "wait for the short jobs".
        """
        try:
            sizes = read_run_toml(monitor.run_dir).get("sizes", {})
        except Exception:  # a foreign run: the ranks appear as their files do
            sizes = {}
        world = sizes.get("world_size")
        try:
            if isinstance(world, int) and 0 < world <= 1 << 20:
                self.call_from_thread(self._expect_ranks, monitor, world)
            # Existing logs start near their ends (older lines are read back on demand) and
            # one poll reads at most READ_BYTES of a file: opening a 256-rank run with hours
            # of logs must not read gigabytes before the first frame.
            follower = RunFollower(
                monitor.run_dir,
                read_bytes=READ_BYTES,
                log_backlog=monitor.keep_per_rank * BACKLOG_BYTES_PER_LINE,
            )
            for batch in follower.watch(stop, interval_s=FOLLOW_INTERVAL_S):
                prepared = monitor.prepare(batch)
                if stop.is_set():
                    break
                self.call_from_thread(self._batch_ready, monitor, prepared)
        except RuntimeError:  # the app closed while a batch was on its way
            stop.set()
        except Exception as exc:  # a bug must not take the UI down: say so and stop following
            message = f"Stopped following {monitor.run_dir.name}: {exc!r}"
            with contextlib.suppress(RuntimeError):  # the app may be gone too
                self.call_from_thread(self.notify, message, severity="error", timeout=30)

    @unless_closing
    def _expect_ranks(self, monitor: RunMonitor, world: int) -> None:
        if monitor is self.monitor:
            monitor.expect_ranks(world)
            self.query_one(RankList).update_rows()

    @unless_closing
    def _batch_ready(self, monitor: RunMonitor, prepared: Prepared) -> None:
        if monitor is not self.monitor:
            return
        changes = monitor.apply(prepared, self.clock())
        self.query_one(RunPanel).apply(changes)
        batch = prepared.batch
        if batch.records or batch.metric_restarts:
            self.query_one(MetricsView).add_records(batch.records, batch.metric_restarts)
            lowest = min(batch.records, default=None)
            if lowest is not None:
                self.progress.update(batch.records[lowest])
                self._update_summary()

    @on(RankList.Selected)
    @unless_closing
    def _rank_selected(self, message: RankList.Selected) -> None:
        self.query_one(MetricsView).set_selected_rank(message.rank)

    @on(RunsPanel.Compare)
    @unless_closing
    def _compare_requested(self, message: RunsPanel.Compare) -> None:
        runs = self.query_one(RunsPanel)
        if message.path in runs.compared:
            self.query_one(MetricsView).toggle_overlay(message.path.name, None)
            runs.mark_compared(runs.compared - {message.path})
        else:
            self._load_overlay(message.path)

    @work(thread=True, group="overlay")
    def _load_overlay(self, path: Path) -> None:
        from ezpz_tui.core.watching.metrics import load_store

        store = load_store(path)
        self.call_from_thread(self._overlay_ready, path, store)

    @unless_closing
    def _overlay_ready(self, path: Path, store: object) -> None:
        if not self.query_one(MetricsView).toggle_overlay(path.name, store):  # type: ignore[arg-type]
            self.notify(f"{path.name} has no metrics to overlay.", severity="warning")
            return
        runs = self.query_one(RunsPanel)
        runs.mark_compared(runs.compared | {path})
        self.notify(f"Overlaid {path.name} on the plots (Metrics tab).", timeout=3)

    @work(thread=True, group="launch")
    def _launch_worker(self, plan: LaunchPlan, relaunch: bool) -> None:
        assert self.session is not None
        try:
            handle = self.session.relaunch(plan) if relaunch else self.session.launch(plan)
        except LaunchRefused as exc:
            self.call_from_thread(self.notify, str(exc), title="Not launched", severity="error")
            return
        except (OSError, ValueError) as exc:
            self.call_from_thread(self.notify, str(exc), title="Launch failed", severity="error")
            return
        self.call_from_thread(self._launched, handle)

    def _launched(self, handle: RunHandle) -> None:
        self._open_run(handle.run_dir)
        self.notify(f"Started {handle.run_dir.name}", timeout=4)

    @work(thread=True, group="stop")
    def _stop_worker(self, handles: list[RunHandle], then_exit: bool) -> None:
        for handle in handles:
            result = handle.stop()
            if not result.clean:
                left = ", ".join(map(str, result.remaining))
                self.call_from_thread(
                    self.notify, f"Processes left after stop: {left}", severity="error"
                )
        if then_exit:
            self.call_from_thread(self.exit)
        else:
            self.call_from_thread(self._refresh_runs)

    # --- reactions ---------------------------------------------------------------------------

    @unless_closing
    def _tick(self) -> None:
        self.query_one(AllocationPanel).tick()
        self.query_one(RunPanel).tick()
        self._update_summary()

    def _refresh_runs(self) -> None:
        if self.session is not None:
            self._runs_worker()

    @on(RunStateChanged)
    def _run_state_changed(self, message: RunStateChanged) -> None:
        self._refresh_runs()

    @on(LaunchForm.Changed)
    @unless_closing
    def _plan_changed(self, message: LaunchForm.Changed) -> None:
        form = self.query_one(LaunchForm)
        if form.plan is not None and form.alloc is not None:
            self.query_one(TopologyGrid).update_plan(form.plan, form.alloc)
        if message.plan is None or self.session is None:
            form.set_preview(None)
        else:
            self._preview_worker(message.plan)

    @on(TabbedContent.TabActivated)
    @unless_closing
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """The grid shows the plan being edited; the Run and Metrics tabs need the height."""
        self.query_one(TopologyGrid).display = event.pane.id == "tab-launch"

    @on(RunsPanel.Open)
    @unless_closing
    def _open_requested(self, message: RunsPanel.Open) -> None:
        """Enter in the runs list: read the run. On a narrow screen the list gives its room
        back to the run (zl shows it again)."""
        self._open_run(message.path)
        if self.size.width < NARROW:
            self.query_one("#right").display = False
        self.query_one(RankList).focus()

    def _open_run(self, path: Path) -> None:
        """Monitor ``path``: its ranks, logs and metrics, followed live until another opens."""
        path = Path(path)
        self._follow_stop.set()
        self._follow_stop = threading.Event()
        self._opened = path
        self._opened_state = None
        self.progress = Progress()
        self.monitor = RunMonitor(path, stall_after=self.stall_after)
        self.query_one(RunPanel).open(self.monitor, read_only=self._handle_of(path) is None)
        self.query_one(MetricsView).set_run(path.name)
        self.query_one(TabbedContent).active = "tab-run"
        threading.Thread(
            target=self._follow,
            args=(self.monitor, self._follow_stop),
            name=f"follow {path.name}",
            daemon=True,
        ).start()
        self._refresh_runs()
        self._update_summary()

    def _handle_of(self, path: Path) -> RunHandle | None:
        """This process's handle of the run in ``path``; None for a run it did not start."""
        if self.session is None:
            return None
        return next((h for h in self.session.supervisor.handles if h.run_dir == path), None)

    def _current(self) -> RunHandle | None:
        return self.session.current if self.session else None

    def _update_summary(self) -> None:
        handle = self._handle_of(self._opened) if self._opened else self._current()
        state = handle.state.get("state") if handle else self._opened_state
        alloc = self.session.alloc if self.session else None
        errors = None
        if self.doctor_checks is not None:
            errors = sum(c.level == "error" for c in self.doctor_checks)
        name = self._opened.name if self._opened else handle.run_dir.name if handle else None
        self.query_one(SummaryBar).show(
            run=name,
            state=state,
            step=self.progress.step,
            loss=self.progress.loss,
            steps_per_s=self.progress.steps_per_s,
            walltime=alloc.walltime_left(self.clock()) if alloc else None,
            doctor_errors=errors,
        )

    async def on_event(self, event: events.Event) -> None:
        if await self.chords.handle(event):
            return
        await super().on_event(event)

    @unless_closing
    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        region = self._region_of(event.widget)
        if region and (not self._history or self._history[-1] != region):
            self._history.append(region)
            self._future.clear()

    # --- actions -----------------------------------------------------------------------------

    def action_launch(self) -> None:
        form = self.query_one(LaunchForm)
        if self.session is None:
            self.notify("Still detecting the allocation.", severity="warning")
        elif not form.can_launch or form.plan is None:
            self.notify(
                "Fix the plan first: "
                + " ".join(p.message for p in form.problems if p.level == "error"),
                severity="error",
            )
        else:
            self._launch_worker(form.plan, relaunch=False)

    def action_relaunch(self) -> None:
        form = self.query_one(LaunchForm)
        handle = self._current()
        if not form.can_launch or form.plan is None or self.session is None:
            self.action_launch()
            return
        plan = form.plan
        if handle is None or handle.wait(0) is not None:
            self._launch_worker(plan, relaunch=handle is not None)
            return
        sizes = f"tp={plan.tp} pp={plan.pp} cp={plan.cp}"
        question = f"Stop {handle.run_dir.name} and relaunch with {sizes}?"

        def answered(yes: bool | None) -> None:
            if yes:
                self._launch_worker(plan, relaunch=True)

        self.push_screen(ConfirmScreen(question, self.keymap), answered)

    def action_stop_run(self) -> None:
        if self._opened is not None and self._handle_of(self._opened) is None:
            self.notify(
                f"{self._opened.name} was not started by this ezpz-tui: it is shown read-only "
                "and cannot be stopped from here.",
                severity="warning",
            )
            return
        handle = self._handle_of(self._opened) if self._opened else self._current()
        if handle is None or handle.wait(0) is not None:
            self.notify("No run of this session is alive.")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self._stop_worker([handle], then_exit=False)

        self.push_screen(ConfirmScreen(f"Stop {handle.run_dir.name}?", self.keymap), answered)

    async def action_quit(self) -> None:
        alive = self.session.alive() if self.session else []
        if not alive:
            self.exit()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.notify("Stopping runs before quitting …")
                self._stop_worker(alive, then_exit=True)

        question = f"{len(alive)} run(s) still running. Stop them and quit?"
        self.push_screen(ConfirmScreen(question, self.keymap), answered)

    def action_rerun_doctor(self) -> None:
        if self.session is None or self._given_checks is not None:
            return
        self.doctor_checks = None
        self.query_one(DoctorPanel).set_running()
        self._update_summary()
        self._doctor_worker(self.session.alloc, self.query_one(LaunchForm).plan)

    def action_show_help(self) -> None:
        self.push_screen(HelpScreen(self.keymap))

    def action_toggle_fullscreen(self) -> None:
        """The focused view (a log, the plot, a list) alone on the screen, or back."""
        if self.screen.maximized is not None:
            self.screen.minimize()
        elif self.focused is not None:
            target = self.focused
            if isinstance(target.parent, MetricsView):
                target = target.parent
            self.screen.maximize(target, container=False)

    def _step_tab(self, step: int) -> None:
        tabs = self.query_one(TabbedContent)
        ids = [pane.id for pane in tabs.query(TabPane) if pane.id]
        tabs.active = ids[(ids.index(tabs.active) + step) % len(ids)]
        self._focus_region("main")

    def action_next_tab(self) -> None:
        self._step_tab(1)

    def action_previous_tab(self) -> None:
        self._step_tab(-1)

    def action_pick_theme(self) -> None:
        self.push_screen(ThemePicker(self.keymap))

    def action_toggle_left_sidebar(self) -> None:
        self._toggle("#left")

    def action_toggle_right_sidebar(self) -> None:
        self._toggle("#right")

    def _toggle(self, selector: str) -> None:
        region = self.query_one(selector)
        region.display = not region.display
        if not region.display and self.focused and region in self.focused.ancestors_with_self:
            self._focus_region("main")

    def _region_widget(self, region: str) -> Widget:
        return self.query_one(
            {"left": "#left", "top": "#topology", "main": "#main", "right": "#right"}[region]
        )

    def _region_of(self, widget: Widget) -> str | None:
        for region in REGIONS:
            if self._region_widget(region) in widget.ancestors_with_self:
                return region
        return None

    def _focus_region(self, region: str) -> None:
        container = self._region_widget(region)
        if not container.display:
            container.display = True
        if region == "main":
            pane = self.query_one(TabbedContent).active_pane
            targets = [w for w in (pane.query("*") if pane else []) if w.focusable]
        else:
            targets = [w for w in container.query("*") if w.focusable]
            if container.focusable:
                targets.insert(0, container)
        if targets:
            targets[0].focus()

    def action_focus_left(self) -> None:
        self._focus_region("left")

    def action_focus_main(self) -> None:
        self._focus_region("main")

    def action_focus_top(self) -> None:
        self._focus_region("top")

    def action_focus_right(self) -> None:
        self._focus_region("right")

    def _step_region(self, step: int) -> None:
        visible = [r for r in ("left", "main", "right") if self._region_widget(r).display]
        current = self._region_of(self.focused) if self.focused else None
        current = "main" if current in (None, "top") else current
        index = visible.index(current) if current in visible else 0
        self._focus_region(visible[max(0, min(len(visible) - 1, index + step))])

    def action_region_left(self) -> None:
        self._step_region(-1)

    def action_region_right(self) -> None:
        self._step_region(1)

    # The history is updated here, before the focus moves: on_descendant_focus then finds the
    # region already last and leaves the forward list alone (it clears it for any other move).

    def action_history_back(self) -> None:
        if len(self._history) > 1:
            self._future.append(self._history.pop())
            self._focus_region(self._history[-1])

    def action_history_forward(self) -> None:
        if self._future:
            self._history.append(self._future.pop())
            self._focus_region(self._history[-1])

    def action_search(self) -> None:
        from ezpz_tui.ui.screens.search import SearchScreen

        target = self.focused
        if target is None or not hasattr(target, "search"):
            self.notify("Search works in lists: focus one first (H, L).")
            return

        def answered(term: str | None) -> None:
            if term:
                target.search(term)  # type: ignore[attr-defined]

        self.push_screen(SearchScreen(), answered)

    def palette_commands(self) -> Iterable[PaletteCommand]:
        km = self.keymap
        yield PaletteCommand.for_action(km, "launch", self.action_launch)
        yield PaletteCommand.for_action(km, "relaunch", self.action_relaunch)
        yield PaletteCommand.for_action(km, "stop_run", self.action_stop_run)
        yield PaletteCommand.for_action(km, "rerun_doctor", self.action_rerun_doctor)
        yield PaletteCommand.for_action(km, "pick_theme", self.action_pick_theme)
        yield PaletteCommand.for_action(km, "show_help", self.action_show_help)
        yield PaletteCommand.for_action(km, "toggle_left_sidebar", self.action_toggle_left_sidebar)
        yield PaletteCommand.for_action(
            km, "toggle_right_sidebar", self.action_toggle_right_sidebar
        )
        runs = self.query_one(RunsPanel).runs
        for run in runs[:50]:
            yield PaletteCommand(
                f"Open run {run.run_id}",
                f"{run.state}",
                lambda path=run.path: self._open_run(path),
            )
        yield PaletteCommand.for_action(km, "quit", self.action_quit)


def run_app(outputs: Path | None = None, attach: Path | None = None) -> int:
    EzpzApp(outputs=outputs, attach=attach).run()
    return 0
