"""Starting and stopping runs from the main screen (``r``, ``R``, ``X``), and what is alive.

A launch or a stop waits on processes, so each runs in a thread worker and reports back with a
message (``Launched``, ``RunsStopped``, ...); a relaunch or a stop of a live run asks first. A
run another process supervises (a CLI launch, a run left running) is stopped through that
supervisor (:mod:`~ezpz_tui.core.launching.elsewhere`), after a question of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ezpz_tui.ui.messages import Launched, RelaunchAsked, RunsStopped, StopElsewhereAsked

if TYPE_CHECKING:
    from ezpz_tui.core.launch_result import LaunchResult
    from ezpz_tui.core.launching.plan import CheckedPlan, LaunchPlan
    from ezpz_tui.core.launching.supervisor import RunHandle
    from ezpz_tui.ui.main.host import Host


class Launches:
    """Launch, relaunch and stop the runs of the host's session."""

    def __init__(self, host: Host) -> None:
        self.host = host
        # While a relaunch waits for the run it replaces to save: how the save goes, in one
        # line (the summary bar shows it); written by the worker, read by the UI's tick.
        self.saving: str | None = None

    # --- what is alive ------------------------------------------------------------------------

    def handle_of(self, path: Path) -> RunHandle | None:
        """This process's handle of the run in ``path``; None for a run it did not start."""
        session = self.host.session
        if session is None:
            return None
        return next((h for h in session.supervisor.handles if h.run_dir == path), None)

    def current(self) -> RunHandle | None:
        """The session's latest run (alive or not); None before the first launch."""
        session = self.host.session
        return session.current if session else None

    # --- the keys -----------------------------------------------------------------------------

    def launch(self) -> None:
        host = self.host
        if host.session is None:
            host.notify("Still detecting the allocation.", severity="warning")
        elif host.plan is None:
            host.notify("Fix the plan first: " + " ".join(host.plan_errors), severity="error")
        else:
            self._start(host.plan, relaunch=False)

    def relaunch(self) -> None:
        """Replace the session's latest run with the form's plan. It continues from that run's
        newest checkpoint unless the person switches to a fresh start: a run with a
        checkpoint, or one alive, is asked about first."""
        from runtime.checkpoint_dirs import newest

        plan, handle, session = self.host.plan, self.current(), self.host.session
        if session is not None and session.handing_over is not None:
            name = session.handing_over.name
            said = f"{name} is saving for a relaunch already: {self.saving or 'wait for it'}"
            self.host.notify(said, severity="warning")
        elif plan is None or session is None:
            self.launch()
        elif handle is None or (handle.wait(0) is not None and newest(handle.run_dir) is None):
            self._start(plan, relaunch=handle is not None)
        else:  # the preflight takes seconds: the keys go on acting meanwhile
            first = lambda: self._preflight_first(handle, plan)  # noqa: E731
            self.host.in_thread(first, "relaunch", exclusive=True)

    def stop(self) -> None:
        """Stop the opened run (or the session's latest), after a yes."""
        host, opened = self.host, self.host.opened
        if opened is not None and self.handle_of(opened.path) is None:
            host.in_thread(lambda: self._may_stop_elsewhere(opened.path), "stop", holds_keys=True)
            return
        handle = self.handle_of(opened.path) if opened else self.current()
        if handle is None or handle.wait(0) is not None:
            host.notify("No run of this session is alive.")
            return
        host.dialogs.confirm(
            f"Stop {handle.run_dir.name}?", lambda: self.stop_runs([handle], False)
        )

    def stop_runs(self, handles: list[RunHandle], then_exit: bool) -> None:
        """Stop ``handles`` one after the other in a worker; ``then_exit``: quit afterwards."""
        self.host.in_thread(lambda: self._stop_all(handles, then_exit), "stop")

    # --- workers --------------------------------------------------------------------------------

    def _start(self, plan: LaunchPlan | CheckedPlan, relaunch: bool) -> None:
        """Launch ``plan`` in a worker; one already checked (the one a question showed) is not
        checked again."""
        launch = lambda: self._launch_worker(plan, relaunch)  # noqa: E731
        # The keys act on the run it opens; not while a save of the run it replaces is waited
        # for (up to [checkpoint] relaunch_save_s): they act on what is on screen meanwhile.
        self.host.in_thread(launch, "launch", holds_keys=not self._hands_over(plan, relaunch))

    def _hands_over(self, plan: LaunchPlan | CheckedPlan, relaunch: bool) -> bool:
        """Whether the relaunch of ``plan`` asks the live run it replaces to save first."""
        from ezpz_tui.core.launching.resuming import continues_from

        handle = self.current()
        if not relaunch or handle is None or handle.wait(0) is not None:
            return False
        return continues_from(plan, handle.run_dir)

    def _launch_worker(self, plan: LaunchPlan | CheckedPlan, relaunch: bool) -> None:
        session = self.host.session
        assert session is not None
        if not relaunch:
            self.answer(session.launch(plan))
            return

        def saving(line: str) -> None:
            self.saving = line

        try:
            result = session.relaunch(plan, progress=saving)
        finally:
            said, self.saving = self.saving, None
        if said is not None:  # the handover's outcome: what the new run continues from
            self.host.notify(said, timeout=10)
        self.answer(result)

    def answer(self, result: LaunchResult) -> None:
        """Open the run that started, or say why none did: in a dialog that stays when
        something must be fixed first, else in a notification (the form lists a plan's
        errors already)."""
        from ezpz_tui.core.launch_result import NotStarted

        if not isinstance(result, NotStarted):
            self.host.post_message(Launched(result.handle))
        elif result.must_fix:
            self.host.dialogs.show_error(result.title, result.text)
        else:
            self.host.notify(result.text, title=result.title, severity="error")

    def _preflight_first(self, handle: RunHandle, plan: LaunchPlan) -> None:
        """Run the new layout's preflight (:mod:`~ezpz_tui.core.launching.preflight`), then ask:
        the question holds the keys typed from then on, not through the preflight's seconds."""
        from ezpz_tui.core.launch_result import refusal
        from ezpz_tui.core.launching.plan import LaunchRefused

        session = self.host.session
        assert session is not None
        try:  # once: the question and the launch take this plan as it was checked here
            checked = session.check(plan)
        except LaunchRefused as exc:
            self.answer(refusal(exc, "Not relaunched"))
            return
        said = self._preflight(checked)
        ask = lambda: self._ask_relaunch(handle, checked, *said)  # noqa: E731
        self.host.in_thread(ask, "relaunch-ask", exclusive=True, holds_keys=True)

    def _preflight(self, checked: CheckedPlan) -> tuple[list[str], str | None]:
        """The preflight's lines for the question, and why yes is refused (None: it is not)."""
        from ezpz_tui.core.comparing.memory import demo_estimate
        from ezpz_tui.core.launching.preflight import available_a_rank, run_preflight

        p = checked.plan
        self.host.notify(f"Preflight: one step of TP {p.tp} PP {p.pp} CP {p.cp} on this CPU…")
        found = run_preflight(checked)
        guess = demo_estimate(p.command, p.tp, p.pp, p.cp, p.layout(checked.alloc).dp)
        lines = found.lines(guess.total if guess else None, available_a_rank(checked))
        return lines, (f"the preflight failed: {found.cause}" if found.refuses else None)

    def _ask_relaunch(
        self,
        handle: RunHandle,
        plan: LaunchPlan | CheckedPlan,
        preflight: list[str] | None = None,
        refused: str | None = None,
    ) -> None:
        """What the relaunch changes, from the live run's record and the plan's preview. The
        plan is checked here, once: the question carries it checked to the launch, which
        launches that plan (not the form's, edited since) without checking it again.
        ``preflight`` and ``refused`` are what the preflight said."""
        from ezpz_tui.core.launch_result import refusal
        from ezpz_tui.core.launching.change import change_lines, relaunch_change
        from ezpz_tui.core.launching.plan import CheckedPlan, LaunchRefused
        from ezpz_tui.core.launching.resuming import parent_resume
        from ezpz_tui.core.runs.record import RunStoreError, read_run_toml

        host, session = self.host, self.host.session
        assert session is not None
        try:
            checked = plan if isinstance(plan, CheckedPlan) else session.check(plan)
            preview = session.preview(checked)
            record = read_run_toml(handle.run_dir)
        except LaunchRefused as exc:
            self.answer(refusal(exc, "Not relaunched"))
            return
        except RunStoreError as exc:
            lines = [f"(the run's record cannot be read: {exc})"]
        else:
            argv = preview.command.argv if preview.command else ()
            lines = change_lines(relaunch_change(record, handle.run_dir, checked, argv))
        resume = parent_resume(handle.run_dir, alive=handle.wait(0) is None)
        host.post_message(RelaunchAsked(handle, checked, lines, resume, preflight or [], refused))

    def _stop_all(self, handles: list[RunHandle], then_exit: bool) -> None:
        for handle in handles:
            result = handle.stop()
            if not result.clean:
                left = ", ".join(map(str, result.remaining))
                self.host.notify(f"Processes left after stop: {left}", severity="error")
        self.host.post_message(RunsStopped(then_exit))

    def _may_stop_elsewhere(self, path: Path) -> None:
        """A run this process did not start: ask its supervisor here to stop it, if it has one
        that can be asked."""
        from ezpz_tui.core.launching.elsewhere import Refused, stoppable

        pid = stoppable(path)
        if isinstance(pid, Refused):
            self.host.notify(f"Shown read-only, not stopped: {pid.reason}.", severity="warning")
        else:
            self.host.post_message(StopElsewhereAsked(path, pid))

    def _stop_elsewhere(self, path: Path) -> None:
        from ezpz_tui.core.launching.elsewhere import Refused, stop_elsewhere

        ended = stop_elsewhere(path)
        if isinstance(ended, Refused):
            self.host.notify(ended.reason, severity="warning", timeout=8)
        else:
            self.host.notify(f"{path.name} {ended.state}", timeout=4)
        self.host.post_message(RunsStopped(then_exit=False))

    # --- what the workers reported -----------------------------------------------------------

    def relaunch_asked(self, message: RelaunchAsked) -> None:
        from ezpz_tui.core.launching.resuming import checked_with_resume, no_checkpoint_words

        name, alive = message.handle.run_dir.name, message.handle.wait(0) is None
        checked, resume = message.checked, message.resume
        saves = resume is not None and resume.saved_now is not None
        if alive and saves:
            question = (
                f"Relaunch? {name} is running: it saves at the step it is at and stops first "
                "(and stays on disk as the new run's parent), then:"
            )
        elif alive:
            question = (
                f"Relaunch? {name} is running: it is stopped first "
                "(and stays on disk as the new run's parent), then:"
            )
        else:
            question = f"Relaunch? {name} has ended (it stays on disk as the new run's parent):"
        lines, refused = [*message.lines, *message.preflight], message.refused
        if resume is None:
            start = f"The new run {no_checkpoint_words(message.handle.run_dir)}."
            start_fresh = lambda: self._start(checked, True)  # noqa: E731
            said = [*message.lines, start, *message.preflight]
            self.host.dialogs.confirm(question, start_fresh, said, refused)
            return
        resumes = resume.describe()
        if alive and not saves:
            resumes += " (or a newer one it completes while stopping)"

        def start_it(resuming: bool) -> None:
            self._start(checked_with_resume(checked, resume if resuming else None), relaunch=True)

        self.host.dialogs.confirm_relaunch(question, resumes, start_it, lines, refused)

    def stop_elsewhere_asked(self, message: StopElsewhereAsked) -> None:
        path = message.run_dir
        question = f"Stop {path.name}? It was not started here: its supervisor (pid {message.pid})"
        question += " is asked to stop it."
        stop = lambda: self._stop_elsewhere(path)  # noqa: E731
        self.host.dialogs.confirm(question, lambda: self.host.in_thread(stop, "stop"))

    async def launched(self, message: Launched) -> None:
        handle = message.handle
        await self.host.open_run(handle.run_dir)
        if handle.staging_note:  # it went on without nodes that could not stage
            note = f"Started {handle.run_dir.name}: {handle.staging_note}"
            self.host.notify(note, severity="warning", timeout=12)
        else:
            self.host.notify(f"Started {handle.run_dir.name}", timeout=4)

    def runs_stopped(self, message: RunsStopped) -> None:
        if message.then_exit:
            self.host.exit_app()
        else:
            self.host.refresh_runs()
