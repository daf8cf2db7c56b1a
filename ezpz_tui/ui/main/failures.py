"""When the opened run failed: why (``w``), and one key to exclude the failing host and relaunch.

Everything that reads or writes a file runs in a thread worker and reports back with a message
(``ezpz_tui.ui.messages``): :func:`explain` reads the run's state, statuses, logs and the
launcher's log; planning the relaunch reads the run's record and ``bad_hosts.txt``; excluding
writes ``bad_hosts.txt`` and launches. The UI thread only shows what they found.

The failure is read once when the opened run is first seen ``failed`` (and again on ``w``). The
dialog opens by itself once per run, and only for a run the person was watching: one this
process started, or one seen live while it was open; an old failed run opened from the list
shows its one-line summary in the Run tab, and ``w`` tells the rest.

"Exclude host and relaunch" takes the host a node fault named; with none named it offers the
first failing rank's host, and says so in its question, since the fault may well be the
program's. The relaunch is the failed run's own plan (the launch form's when the run has no
readable record) without that host, refused with the plan's reason when the sizes no longer
fit on what is left, before anything is written; it stops a run of this session still alive
first and names the failed run as its parent.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ezpz_tui.ui.messages import BadHostsRead, ExclusionPlanned, FailureExplained, Launched

if TYPE_CHECKING:
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
        self._shown: set[Path] = set()  # runs whose failure opened by itself once
        self._retry_of: dict[str, int] = {}  # run id -> which unattended retry it is
        self._retried: set[str] = set()  # failed runs already retried: once each

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
        self.host.in_thread(lambda: self._explain_worker(opened, show), "explain")

    def _explain_worker(self, opened: OpenedRun, show: bool) -> None:
        from ezpz_tui.core.watching.failure import explain

        try:
            failure = explain(opened.path)
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
            host.show_failure(failure, self.exclude_and_relaunch)

    def _retry_unattended(self, failure: Failure) -> bool:
        """``[launch] retries``: a run started here that failed with a node fault is relaunched
        without that node, as ``ezpz-tui launch --retries N`` does; whether one is under way."""
        retry, retries = self._retry_of.get(failure.run_id, 0) + 1, self.host.settings.retries
        started_here = self.launches.handle_of(failure.run_dir) is not None
        if failure.node_fault_host is None or not started_here or retry > retries:
            return False
        if failure.run_id in self._retried:
            return True
        self._retried.add(failure.run_id)
        self.host.notify(
            f"Retry {retry}/{retries}: {failure.node_fault_host} failed; relaunching without it.",
            timeout=8,
        )
        self._plan(failure, None, retry)
        return True

    # --- exclude the failing host and relaunch ------------------------------------------------

    def exclude_and_relaunch(self) -> None:
        failure = self.on_screen()
        if failure is None or self.host.session is None:
            self.host.notify("No failed run is open: nothing to exclude.", timeout=4)
            return
        self._plan(failure, self.host.plan)

    def _plan(self, failure: Failure, form_plan: LaunchPlan | None, retry: int = 0) -> None:
        self.host.in_thread(lambda: self._plan_worker(failure, form_plan, retry), "exclude")

    def _plan_worker(self, failure: Failure, form_plan: LaunchPlan | None, retry: int) -> None:
        from ezpz_tui.core.launching.bad_hosts import exclude_listed, read_bad_hosts
        from ezpz_tui.core.launching.failover import without_host
        from ezpz_tui.core.launching.plan import LaunchPlan, LaunchRefused
        from ezpz_tui.core.launching.runstore import RunStoreError, read_run_toml

        session, post = self.host.session, self.host.post_message
        assert session is not None
        host, blamed = failure.node_fault_host, True
        if host is None:
            host, blamed = failure.host, False
        if host is None:
            said = "No host to exclude: the failure names none."
            post(ExclusionPlanned(failure, None, False, None, said))
            return
        try:
            plan = LaunchPlan.from_dict(read_run_toml(failure.run_dir).get("plan", {}))
        except (RunStoreError, ValueError, TypeError):
            plan = form_plan
        if plan is None:
            said = f"{failure.run_id} has no readable plan, and the launch form's has errors."
            post(ExclusionPlanned(failure, host, blamed, None, said))
            return
        try:
            listed = read_bad_hosts(session.store.outputs) if session.exclude_bad else []
            plan = without_host(exclude_listed(plan, session.alloc, listed), session.alloc, host)
        except LaunchRefused as refused:
            post(ExclusionPlanned(failure, host, blamed, None, str(refused)))
            return
        post(ExclusionPlanned(failure, host, blamed, plan, None, retry))

    def planned(self, message: ExclusionPlanned) -> None:
        failure, host, plan = message.failure, message.host, message.plan
        session = self.host.session
        if message.refused is not None or plan is None or host is None or session is None:
            where = f"without {host}" if host else ""
            self.host.show_error(f"Cannot relaunch {failure.run_id} {where}", message.refused or "")
            return
        if message.retry:
            self._relaunch(failure, host, plan, message.retry)
            return
        hosts = plan.hosts_used(session.alloc)
        why = (
            f"{host} was named by the failure."
            if message.blamed
            else f"No node fault was named: {host} is rank {failure.rank}'s host, and the fault "
            "may be the program's."
        )
        alive = self.launches.current()
        stop = (
            f" {alive.run_dir.name} is still running and will be stopped first."
            if alive is not None and alive.wait(0) is None
            else ""
        )
        question = (
            f"{why} Add {host} to bad_hosts.txt and relaunch {failure.run_id}'s plan on "
            f"{len(hosts)} host(s) without it ({', '.join(h.split('.')[0] for h in hosts)})?"
            f"{stop}"
        )
        self.host.confirm(question, lambda: self._relaunch(failure, host, plan))

    def _relaunch(self, failure: Failure, host: str, plan: LaunchPlan, retry: int = 0) -> None:
        work = lambda: self._relaunch_worker(failure, host, plan, retry)  # noqa: E731
        self.host.in_thread(work, "launch")

    def _relaunch_worker(self, failure: Failure, host: str, plan: LaunchPlan, retry: int) -> None:
        from ezpz_tui.core.launching.bad_hosts import add_bad_hosts, bad_hosts_path, read_bad_hosts
        from ezpz_tui.core.launching.outputs import RunStoreError, launch_error
        from ezpz_tui.core.launching.plan import LaunchRefused

        session, ui = self.host.session, self.host
        assert session is not None
        outputs = session.store.outputs
        try:
            add_bad_hosts(outputs, [host], failure.run_id, failure.cause)
        except OSError as exc:
            said = f"Cannot add {host} to {bad_hosts_path(outputs)}: {exc}"
            ui.show_error("Not relaunched", said)
            return
        ui.post_message(BadHostsRead(read_bad_hosts(outputs)))
        alive = session.current
        if alive is not None and alive.wait(0) is None:
            alive.stop()
        try:
            handle = session.launch(plan, parent=failure.run_id)
        except LaunchRefused as exc:
            ui.notify(str(exc), title="Not relaunched", severity="error")
        except (OSError, RunStoreError) as exc:
            ui.show_error("Not relaunched", launch_error(outputs, exc))
        except ValueError as exc:
            ui.notify(str(exc), title="Relaunch failed", severity="error")
        else:
            if retry:
                self._retry_of[handle.run_dir.name] = retry
            ui.post_message(Launched(handle))
