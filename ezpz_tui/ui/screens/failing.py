"""When the opened run failed: why (``w``), and one key to exclude the failing host and relaunch.

Everything that reads or writes a file runs in a thread worker and reports back with a message
(``ezpz_tui.ui.messages``): :func:`explain` reads the run's state, statuses, logs and
the launcher's log; planning the relaunch reads the run's record and ``bad_hosts.txt``;
excluding writes ``bad_hosts.txt`` and launches. The UI thread only shows what they found.

The failure is read once when the opened run is first seen ``failed`` (and again on ``w``). The
dialog opens by itself once per run, and only for a run the person was watching: one this
process started, or one seen live while it was open; an old failed run opened from the list
shows its one-line summary in the Run tab, and ``w`` tells the rest.

"Exclude host and relaunch" takes the host a node fault named; with none named it offers the
first failing rank's host, and says so in its question, since the fault may well be the
program's. The relaunch is the failed run's own plan (the launch form's when the run has no
readable record) without that host, refused with the plan's reason when the sizes no longer
fit on what is left, before anything is written; it stops a run of this session still alive
first and names the failed run as its parent. Those decisions, and the unattended retries of
``[launch] retries``, are :class:`~ezpz_tui.core.launching.failover.Failover`'s, the flow
``ezpz-tui launch --retries`` drives too: this only asks the person and shows what it did.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual import work

from ezpz_tui.ui.messages import BadHostsRead, ExclusionPlanned, FailureExplained
from ezpz_tui.ui.screens.launching import RunControl

if TYPE_CHECKING:
    from ezpz_tui.core.failover import Decision, Exclusion, Failover, Relaunch
    from ezpz_tui.core.launching.plan import LaunchPlan
    from ezpz_tui.core.watching.failure import Failure
    from ezpz_tui.ui.opened_run import OpenedRun
    from ezpz_tui.ui.widgets.run_panel import RunPanel

LIVE_STATES = frozenset({"pending", "running"})
FAILURE_ACTIONS = frozenset({"show_failure", "exclude_and_relaunch"})


class FailureControl(RunControl):
    """The failure keys of a screen that shows an opened run in ``run_panel``."""

    run_panel: RunPanel

    def __init__(self) -> None:
        super().__init__()
        self._failures_shown: set[Path] = set()  # runs whose failure opened by itself once
        self.failover: Failover | None = None  # made with the session
        self.bad_hosts: list[str] = []

    # --- the opened run's failure -------------------------------------------------------------

    def failure_on_screen(self) -> Failure | None:
        opened = self.opened
        return opened.failure if opened is not None else None

    def check_failure_action(self, action: str) -> bool:
        """The failure keys act (and show in the footer) only while a failed run is open."""
        return self.failure_on_screen() is not None

    def run_state_seen(self, opened: OpenedRun, state: str, started_here: bool) -> None:
        """The opened run is ``state`` now: remember that it was watched live, and read why
        it failed the first time it is seen failed."""
        if state in LIVE_STATES or started_here:
            opened.watched = True
        if state == "failed" and not opened.explaining:
            opened.explaining = True
            self._explain(opened, show=False)

    @work(thread=True, group="explain")
    def _explain(self, opened: OpenedRun, show: bool) -> None:
        from ezpz_tui.core.watching.failure import explain

        try:
            failure = explain(opened.path)
        except Exception as exc:  # explain never raises on bad input; a bug must not either
            self.app.notify(f"Could not read why the run failed: {exc!r}", severity="error")
            failure = None
        self.post_message(FailureExplained(opened, failure, show))

    def on_failure_explained(self, message: FailureExplained) -> None:
        opened, failure = message.run, message.failure
        if opened is not self.opened:
            return
        opened.failure = failure
        self.run_panel.show_failure(failure, self.keymap)
        self.refresh_bindings()
        if failure is None:
            if message.show:
                self.notify(f"{opened.path.name} has not failed.", timeout=4)
            return
        if self._retry_unattended(failure):
            return
        first_time = opened.watched and opened.path not in self._failures_shown
        if message.show or first_time:
            self._failures_shown.add(opened.path)
            self._show_failure(failure)

    def _retry_unattended(self, failure: Failure) -> bool:
        """``[launch] retries``: a run started here that failed with a node fault is relaunched
        without that node, as ``ezpz-tui launch --retries N`` does; whether one is under way."""
        if self.failover is None:
            return False
        decision = self.failover.decide(failure)
        if decision.under_way:
            return True
        if not decision.attempt:
            return False
        self.notify(
            f"Retry {decision.attempt}/{decision.retries}: {failure.node_fault_host} failed; "
            "relaunching without it.",
            timeout=8,
        )
        self._retry(failure, decision)
        return True

    @work(thread=True, group="launch")
    def _retry(self, failure: Failure, decision: Decision) -> None:
        assert self.failover is not None
        self._relaunched(self.failover.retry(failure, decision))

    def _show_failure(self, failure: Failure) -> None:
        from ezpz_tui.ui.screens.failure import EXCLUDE, FailureScreen

        def closed(answer: str | None) -> None:
            if answer == EXCLUDE:
                self.action_exclude_and_relaunch()

        self.app.push_screen(FailureScreen(failure, self.keymap), closed)

    def action_show_failure(self) -> None:
        opened = self.opened
        if opened is None or opened.failure is None:
            self.notify("No failed run is open.", timeout=4)
            return
        self._explain(opened, show=True)  # read afresh: ranks may have ended since

    # --- exclude the failing host and relaunch ------------------------------------------------

    def action_exclude_and_relaunch(self) -> None:
        failure = self.failure_on_screen()
        if failure is None or self.failover is None:
            self.notify("No failed run is open: nothing to exclude.", timeout=4)
            return
        self._plan_exclusion(failure, self.form.plan)

    @work(thread=True, group="exclude")
    def _plan_exclusion(self, failure: Failure, form_plan: LaunchPlan | None) -> None:
        assert self.failover is not None
        self.post_message(ExclusionPlanned(self.failover.exclusion(failure, form_plan)))

    def on_exclusion_planned(self, message: ExclusionPlanned) -> None:
        from ezpz_tui.ui.screens.confirm import ConfirmScreen

        exclusion = message.exclusion
        failure, host = exclusion.failure, exclusion.host
        if exclusion.refused is not None:
            self._show_error(exclusion.refused.title, exclusion.refused.text)
            return
        why = (
            f"{host} was named by the failure."
            if exclusion.blamed
            else f"No node fault was named: {host} is rank {failure.rank}'s host, and the fault "
            "may be the program's."
        )
        alive = self._current()
        stop = (
            f" {alive.run_dir.name} is still running and will be stopped first."
            if alive is not None and alive.wait(0) is None
            else ""
        )
        hosts = exclusion.hosts
        question = (
            f"{why} Add {host} to bad_hosts.txt and relaunch {failure.run_id}'s plan on "
            f"{len(hosts)} host(s) without it ({', '.join(h.split('.')[0] for h in hosts)})?"
            f"{stop}"
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._exclude_and_relaunch(exclusion)

        self.app.push_screen(ConfirmScreen(question, self.keymap), answered)

    @work(thread=True, group="launch")
    def _exclude_and_relaunch(self, exclusion: Exclusion) -> None:
        assert self.failover is not None
        self._relaunched(self.failover.relaunch(exclusion))

    def _relaunched(self, relaunch: Relaunch) -> None:
        """From a worker: what a relaunch after a failure did, told; bad_hosts.txt read again
        for the allocation pane."""
        from ezpz_tui.core.launching.bad_hosts import read_bad_hosts

        assert self.session is not None
        if relaunch.unrecorded is not None:
            self.app.notify(relaunch.unrecorded, title="bad_hosts.txt", severity="warning")
        self.post_message(BadHostsRead(read_bad_hosts(self.session.store.outputs)))
        if relaunch.result is not None:
            self._launched(relaunch.result)

    # --- bad_hosts.txt in the allocation pane -------------------------------------------------

    @work(thread=True, group="bad-hosts")
    def _read_bad_hosts(self) -> None:
        from ezpz_tui.core.launching.bad_hosts import read_bad_hosts

        if self.session is not None:
            self.post_message(BadHostsRead(read_bad_hosts(self.session.store.outputs)))

    def on_bad_hosts_read(self, message: BadHostsRead) -> None:
        from ezpz_tui.ui.widgets.panels import AllocationPanel

        self.bad_hosts = message.hosts
        self.query_one(AllocationPanel).set_bad_hosts(message.hosts)
