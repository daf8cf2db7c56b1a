"""When the opened run failed: why (``w``), and one key to exclude the failing host and relaunch.

Everything that reads or writes a file runs in a thread worker and reports back with a message
(``ezpz_tui.ui.messages``): :func:`~ezpz_tui.core.watching.failure.explain` reads the run's
state, statuses, logs and the launcher's log; planning the relaunch reads the run's record and
``bad_hosts.txt``; excluding writes ``bad_hosts.txt`` (where the run's end did not already list
the host) and launches. The UI thread only shows what they found.

The failure is read once when the opened run is first seen ``failed`` (and again on ``w``). The
dialog opens by itself once per run, and only for a run the person was watching: one this
process started, or one seen live while it was open; an old failed run opened from the list
shows its one-line summary in the Run tab, and ``w`` tells the rest.

What to relaunch, and whether a failure is retried unattended (``[launch] retries``), is
:class:`~ezpz_tui.core.failover.Failover`'s, the flow ``ezpz-tui launch --retries`` drives too:
this object only asks the person and tells what it did. "Exclude host and relaunch" takes the
host a node fault named; with none named it offers the first failing rank's host, and says so
in its question, since the fault may well be the program's.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from ezpz_tui.ui.messages import BadHostsRead, ExclusionPlanned, FailureExplained

if TYPE_CHECKING:
    from ezpz_tui.core.failover import Decision, Exclusion, Failover, Relaunch
    from ezpz_tui.core.launching.plan import LaunchPlan
    from ezpz_tui.core.watching.failure import Failure
    from ezpz_tui.ui.main.host import Host
    from ezpz_tui.ui.main.launches import Launches
    from ezpz_tui.ui.opened_run import OpenedRun

LIVE_STATES = frozenset({"pending", "running"})
FAILURE_ACTIONS = frozenset({"show_failure", "exclude_and_relaunch"})


class Failures:
    """The opened run's failure: read it, show it, retry or relaunch without its host."""

    def __init__(self, host: Host, launches: Launches) -> None:
        self.host = host
        self.launches = launches
        self.failover: Failover | None = None  # made with the session
        self._shown: set[Path] = set()  # runs whose failure opened by itself once

    def on_screen(self) -> Failure | None:
        opened = self.host.opened
        return opened.failure if opened is not None else None

    def seen(self, opened: OpenedRun, state: str, started_here: bool) -> None:
        """The opened run is ``state`` now: remember that it was watched live, and read why
        it failed the first time it is seen failed."""
        if state in LIVE_STATES or started_here:
            opened.watched = True
        if state == "failed" and not opened.explaining:
            opened.explaining = True
            self._explain(opened, show=False)

    def show(self) -> None:
        """``w``: read the failure afresh (ranks may have ended since) and show it."""
        opened = self.host.opened
        if opened is None or opened.failure is None:
            self.host.notify("No failed run is open.", timeout=4)
            return
        self._explain(opened, show=True)

    def _explain(self, opened: OpenedRun, show: bool) -> None:
        self.host.in_thread(lambda: self._explain_worker(opened, show), "explain", holds_keys=show)

    def _explain_worker(self, opened: OpenedRun, show: bool) -> None:
        from dataclasses import replace

        from ezpz_tui.core.watching.collectives import lines_of, run_verdict
        from ezpz_tui.core.watching.failure import explain

        try:
            failure = explain(opened.path)
            if failure is not None:  # what its collectives said at its end, as `why` shows
                found, notes = run_verdict(opened.path, live=False, now=time.time())
                said = lines_of(found, (f"note: {n}" for n in notes))
                failure = replace(failure, collectives=tuple(said))
        except Exception as exc:  # explain never raises on bad input; a bug must not either
            self.host.notify(f"Could not read why the run failed: {exc!r}", severity="error")
            failure = None
        self.host.post_message(FailureExplained(opened, failure, show))

    def explained(self, message: FailureExplained) -> None:
        """The opened run's failure is read: keys, an unattended retry, or the dialog."""
        opened, failure, host = message.run, message.failure, self.host
        opened.failure = failure
        host.refresh_bindings()
        if failure is None:
            if message.show:
                host.notify(f"{opened.path.name} has not failed.", timeout=4)
            return
        if self._retry_unattended(failure):
            return
        first_time = opened.watched and opened.path not in self._shown
        if message.show or first_time:
            self._shown.add(opened.path)
            host.dialogs.show_failure(failure, self.exclude_and_relaunch)

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
        self.host.notify(
            f"Retry {decision.attempt}/{decision.retries}: {failure.node_fault_host} failed; "
            "relaunching without it.",
            timeout=8,
        )
        self.host.in_thread(lambda: self._retry(failure, decision), "launch")
        return True

    def _retry(self, failure: Failure, decision: Decision) -> None:
        assert self.failover is not None
        self._relaunched(self.failover.retry(failure, decision))

    # --- exclude the failing host and relaunch ------------------------------------------------

    def exclude_and_relaunch(self) -> None:
        failure = self.on_screen()
        if failure is None or self.failover is None:
            self.host.notify("No failed run is open: nothing to exclude.", timeout=4)
            return
        plan = self.host.plan
        self.host.in_thread(lambda: self._plan(failure, plan), "exclude", holds_keys=True)

    def _plan(self, failure: Failure, form_plan: LaunchPlan | None) -> None:
        assert self.failover is not None
        self.host.post_message(ExclusionPlanned(self.failover.exclusion(failure, form_plan)))

    def planned(self, message: ExclusionPlanned) -> None:
        """The relaunch is planned: ask the person, saying whom the failure blames."""
        exclusion = message.exclusion
        failure, host = exclusion.failure, exclusion.host
        if exclusion.refused is not None:
            self.host.dialogs.show_error(exclusion.refused.title, exclusion.refused.text)
            return
        why = (
            f"{host} was named by the failure."
            if exclusion.blamed
            else f"No node fault was named: {host} is rank {failure.rank}'s host, and the fault "
            "may be the program's."
        )
        alive = self.launches.current()
        stop = (
            f" {alive.run_dir.name} is still running and will be stopped first."
            if alive is not None and alive.wait(0) is None
            else ""
        )
        hosts = exclusion.hosts
        act = (
            f"{host} is in bad_hosts.txt. Relaunch"
            if exclusion.listed
            else f"Add {host} to bad_hosts.txt and relaunch"
        )
        question = (
            f"{why} {act} {failure.run_id}'s plan on "
            f"{len(hosts)} host(s) without it ({', '.join(h.split('.')[0] for h in hosts)})?"
            f"{stop}"
        )
        relaunch = lambda: self._relaunch(exclusion)  # noqa: E731
        self.host.dialogs.confirm(question, lambda: self.host.in_thread(relaunch, "launch"))

    def _relaunch(self, exclusion: Exclusion) -> None:
        assert self.failover is not None
        self._relaunched(self.failover.relaunch(exclusion))

    def _relaunched(self, relaunch: Relaunch) -> None:
        """From a worker: what a relaunch after a failure did, told; bad_hosts.txt read again
        for the allocation pane."""
        from ezpz_tui.core.runs.bad_hosts import read_bad_hosts

        assert self.failover is not None
        if relaunch.unrecorded is not None:
            self.host.notify(relaunch.unrecorded, title="bad_hosts.txt", severity="warning")
        outputs = self.failover.session.store.outputs
        self.host.post_message(BadHostsRead(read_bad_hosts(outputs)))
        if relaunch.result is not None:
            self.launches.answer(relaunch.result)
