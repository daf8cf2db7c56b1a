"""The keys that start and stop runs (``r``, ``R``, ``X``) and the workers behind them.

A launch or a stop waits on processes, so it runs in a thread worker and reports back with a
message; a relaunch or a stop of a live run asks first. The main screen provides the launch form,
the session and the opened run this acts on.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual import work

from ezpz_tui.ui.messages import Launched, RelaunchAsked, RunsStopped, StopElsewhereAsked
from ezpz_tui.ui.screens.regions import RegionNavigation

if TYPE_CHECKING:
    from ezpz_tui.core.launch_result import LaunchResult
    from ezpz_tui.core.launching.plan import LaunchPlan
    from ezpz_tui.core.launching.supervisor import RunHandle
    from ezpz_tui.core.session import Session
    from ezpz_tui.keymap.table import Keymap
    from ezpz_tui.ui.opened_run import OpenedRun
    from ezpz_tui.ui.widgets.launch_form import LaunchForm


class RunControl(RegionNavigation):
    """Launch, relaunch and stop on a screen that has a launch form and may have a run open."""

    keymap: Keymap
    session: Session | None
    opened: OpenedRun | None
    form: LaunchForm

    if TYPE_CHECKING:  # provided by the main screen

        async def open_run(self, path: Path) -> None: ...

        def _refresh_runs(self) -> None: ...

    @work(thread=True, group="launch")
    def _launch_worker(self, plan: LaunchPlan, relaunch: bool) -> None:
        assert self.session is not None
        result = self.session.relaunch(plan) if relaunch else self.session.launch(plan)
        self._launched(result)

    def _launched(self, result: LaunchResult) -> None:
        """From a worker: open the run that started, or say why none did."""
        from ezpz_tui.core.launch_result import NotStarted

        if not isinstance(result, NotStarted):
            self.post_message(Launched(result.handle))
        elif result.must_fix:
            self.app.call_from_thread(self._show_error, result.title, result.text)
        else:
            self.app.notify(result.text, title=result.title, severity="error")

    def _show_error(self, title: str, message: str) -> None:
        """A dialog that stays until read: the user must fix something before trying again."""
        from ezpz_tui.ui.screens.message import MessageScreen

        self.app.push_screen(MessageScreen(title, message, self.keymap))

    @work(thread=True, group="stop")
    def stop_runs(self, handles: list[RunHandle], then_exit: bool) -> None:
        """Stop ``handles`` one after the other; ``then_exit``: quit the app afterwards."""
        for handle in handles:
            result = handle.stop()
            if not result.clean:
                left = ", ".join(map(str, result.remaining))
                self.app.notify(f"Processes left after stop: {left}", severity="error")
        self.post_message(RunsStopped(then_exit))

    @work(thread=True, group="stop")
    def _may_stop_elsewhere(self, path: Path) -> None:
        """A run this process did not start: ask its supervisor here to stop it, if it has one
        that can be asked (see :mod:`~ezpz_tui.core.launching.elsewhere`)."""
        from ezpz_tui.core.launching.elsewhere import Refused, stoppable

        pid = stoppable(path)
        if isinstance(pid, Refused):
            self.app.notify(f"Shown read-only, not stopped: {pid.reason}.", severity="warning")
        else:
            self.post_message(StopElsewhereAsked(path, pid))

    def on_stop_elsewhere_asked(self, message: StopElsewhereAsked) -> None:
        from ezpz_tui.ui.screens.confirm import ConfirmScreen

        path = message.run_dir

        def answered(yes: bool | None) -> None:
            if yes:
                self._stop_elsewhere(path)

        question = f"Stop {path.name}? It was not started here: its supervisor (pid {message.pid})"
        question += " is asked to stop it."
        self.app.push_screen(ConfirmScreen(question, self.keymap), answered)

    @work(thread=True, group="stop")
    def _stop_elsewhere(self, path: Path) -> None:
        """Stop a run another process here supervises (a run left running, a CLI launch)."""
        from ezpz_tui.core.launching.elsewhere import Refused, stop_elsewhere

        ended = stop_elsewhere(path)
        if isinstance(ended, Refused):
            self.app.notify(ended.reason, severity="warning", timeout=8)
        else:
            self.app.notify(f"{path.name} {ended.state}", timeout=4)
        self.post_message(RunsStopped(then_exit=False))

    async def on_launched(self, message: Launched) -> None:
        await self.open_run(message.handle.run_dir)
        self.notify(f"Started {message.handle.run_dir.name}", timeout=4)

    def on_runs_stopped(self, message: RunsStopped) -> None:
        if message.then_exit:
            self.app.exit()
        else:
            self._refresh_runs()

    def _handle_of(self, path: Path) -> RunHandle | None:
        """This process's handle of the run in ``path``; None for a run it did not start."""
        if self.session is None:
            return None
        return next((h for h in self.session.supervisor.handles if h.run_dir == path), None)

    def _current(self) -> RunHandle | None:
        return self.session.current if self.session else None

    def action_launch(self) -> None:
        form = self.form
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

    def action_edit_sizes(self) -> None:
        """From anywhere, the launch form in normal mode with its cursor on TP: ``+`` then
        relaunch tries the next layout."""
        from textual.widgets import TabbedContent

        self.query_one(TabbedContent).active = "tab-launch"
        self.form.focus()
        self.form.move_cursor("tp")

    def action_relaunch(self) -> None:
        form = self.form
        handle = self._current()
        if not form.can_launch or form.plan is None or self.session is None:
            self.action_launch()
            return
        plan = form.plan
        if handle is None or handle.wait(0) is not None:
            self._launch_worker(plan, relaunch=handle is not None)
            return
        self._ask_relaunch(handle, plan)

    @work(thread=True, exclusive=True, group="relaunch")
    def _ask_relaunch(self, handle: RunHandle, plan: LaunchPlan) -> None:
        """What the relaunch changes, from the live run's record and the plan's preview."""
        from ezpz_tui.core.launch_result import refusal
        from ezpz_tui.core.launching.change import change_lines, relaunch_change
        from ezpz_tui.core.launching.plan import LaunchRefused
        from ezpz_tui.core.runs.record import RunStoreError, read_run_toml

        assert self.session is not None
        try:
            checked = self.session.check(plan)
            preview = self.session.preview(plan)
            record = read_run_toml(handle.run_dir)
        except LaunchRefused as exc:
            self._launched(refusal(exc, "Not relaunched"))
            return
        except RunStoreError as exc:
            lines = [f"(the run's record cannot be read: {exc})"]
        else:
            argv = preview.command.argv if preview.command else ()
            lines = change_lines(relaunch_change(record, handle.run_dir, checked, argv))
        self.post_message(RelaunchAsked(handle, plan, lines))

    def on_relaunch_asked(self, message: RelaunchAsked) -> None:
        from ezpz_tui.ui.screens.confirm import ConfirmScreen

        plan = message.plan
        question = (
            f"Relaunch? {message.handle.run_dir.name} is running: it is stopped first "
            "(and stays on disk as the new run's parent), then:"
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._launch_worker(plan, relaunch=True)

        self.app.push_screen(ConfirmScreen(question, self.keymap, message.lines), answered)

    def action_stop_run(self) -> None:
        from ezpz_tui.ui.screens.confirm import ConfirmScreen

        opened = self.opened
        if opened is not None and self._handle_of(opened.path) is None:
            self._may_stop_elsewhere(opened.path)
            return
        handle = self._handle_of(opened.path) if opened else self._current()
        if handle is None or handle.wait(0) is not None:
            self.notify("No run of this session is alive.")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.stop_runs([handle], then_exit=False)

        self.app.push_screen(ConfirmScreen(f"Stop {handle.run_dir.name}?", self.keymap), answered)
