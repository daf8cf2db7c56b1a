"""The relaunch after a failure, once, for both front ends: ``ezpz-tui launch --retries N``
drives it in a loop (launch, follow, ask it), the TUI from its thread workers, both for
``[launch] retries`` and for the key that excludes a failing host after asking the person.
A relaunch continues from the failed run's newest complete checkpoint when it has one.

It sits beside the :class:`~ezpz_tui.core.session.Session` it relaunches through, above
``core.launching`` (where the host is recorded and the plan checked without it:
:mod:`~ezpz_tui.core.launching.failover`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ezpz_tui.core.launch_result import LaunchResult, NotStarted, Started
from ezpz_tui.core.launching.bad_hosts import add_bad_hosts, exclude_listed
from ezpz_tui.core.launching.failover import without_host
from ezpz_tui.core.launching.plan import LaunchPlan, LaunchRefused
from ezpz_tui.core.launching.resuming import keep_global_batch, parent_resume, with_resume
from ezpz_tui.core.launching.supervisor import RunHandle
from ezpz_tui.core.runs.bad_hosts import bad_hosts_path, is_listed, read_bad_hosts
from ezpz_tui.core.runs.record import RunStoreError, read_run_toml
from ezpz_tui.core.session import Session
from ezpz_tui.core.watching.failure import Failure, explain
from runtime.rundir import BAD_HOSTS, State


@dataclass(frozen=True)
class Decision:
    """Whether a failure is retried unattended: ``attempt`` is the retry to make (1 for the
    first, 0 for none) of ``retries``; ``under_way``: it was claimed before (the TUI reads a
    failure again on ``w``); ``said``: why not, when the person who asked for retries should
    hear it."""

    attempt: int = 0
    retries: int = 0
    under_way: bool = False
    said: str = ""


@dataclass(frozen=True)
class Exclusion:
    """How ``failure``'s run would run again without ``host`` (``blamed``: a node fault named
    it, else it is the first failing rank's): ``plan`` on ``hosts``, or why not (``refused``).
    What a person is asked before anything is written."""

    failure: Failure
    host: str | None
    blamed: bool
    plan: LaunchPlan | None
    hosts: tuple[str, ...] = ()
    refused: NotStarted | None = None
    listed: bool = False  # bad_hosts.txt has the host already (its run's end recorded it)
    spare: bool = False  # a spare host (``spares``) takes the excluded one's place


@dataclass(frozen=True)
class Relaunch:
    """What a relaunch after a failure came to: ``result`` (None: none was tried), ``said``
    (each step, a line each, as ``ezpz-tui launch --retries`` prints them) and ``unrecorded``
    (why the host could not go to bad_hosts.txt: the relaunch goes on without that memory,
    its own plan excludes the host all the same)."""

    result: LaunchResult | None
    said: tuple[str, ...] = ()
    unrecorded: str | None = None


class Failover:
    """One session's relaunches after failures: which failures to retry, how many times, and
    each relaunch made the same way. It counts attempts along each chain of retries (a retry's
    own failure is the next attempt; a person's relaunch starts the count again) and claims a
    failure once, so reading it twice never relaunches twice."""

    def __init__(self, session: Session, retries: int) -> None:
        self.session = session
        self.retries = retries
        self._attempt_of: dict[str, int] = {}  # run id -> which retry made it
        self._retried: set[str] = set()  # failed runs claimed for a retry

    def decide(self, failure: Failure) -> Decision:
        """Whether to retry ``failure`` unattended: only what its class
        (:mod:`~ezpz_tui.core.watching.failure_class`) says to retry, a node fault that did
        not follow the job from its parent's host; a retry decided on is claimed. Reads no
        file, so the UI thread may ask."""
        attempt = self._attempt_of.get(failure.run_id, 0) + 1
        if attempt > self.retries:
            return Decision()
        judged = failure.judged
        if judged is None or not judged.retry or failure.node_fault_host is None:
            why = judged.why if judged is not None else f"{failure.cause} was not classified"
            return Decision(said=f"not retrying: {why}")
        if not any(h.run_dir == failure.run_dir for h in self.session.supervisor.handles):
            return Decision()  # not this process's run: whoever started it decides
        if failure.run_id in self._retried:
            return Decision(under_way=True)
        self._retried.add(failure.run_id)
        return Decision(attempt, self.retries)

    def after(self, handle: RunHandle, fallback: LaunchPlan) -> Relaunch:
        """The retry that follows ``handle``'s end, if any: for a loop that launches, follows
        the run to its end and asks again."""
        if handle.state.state != State.FAILED:
            return Relaunch(None)
        failure = explain(handle.run_dir)
        if failure is None:
            return Relaunch(None)
        decision = self.decide(failure)
        if not decision.attempt:
            return Relaunch(None, (decision.said,) if decision.said else ())
        return self.retry(failure, decision, fallback)

    def retry(
        self, failure: Failure, decision: Decision, fallback: LaunchPlan | None = None
    ) -> Relaunch:
        """The retry ``decision`` claimed. The node fault's host is recorded first, whether or
        not what is left can still hold the plan: a later launch should skip it either way.
        The run's supervisor recorded it when the run ended, so this adds nothing then; it
        says why when the file cannot be written."""
        host = failure.node_fault_host
        assert host is not None, "decide retries node faults only"
        said, unrecorded = self._record(failure, host)
        return self._launch(self.exclusion(failure, fallback), decision.attempt, said, unrecorded)

    def exclusion(self, failure: Failure, fallback: LaunchPlan | None) -> Exclusion:
        """The failed run's recorded plan (``fallback`` when it has no readable one) without
        the host, and without the hosts bad_hosts.txt lists as the session skips them; refused
        with the plan's reason, before anything is written, when the sizes no longer fit."""
        host, blamed = failure.node_fault_host, True
        if host is None:
            host, blamed = failure.host, False
        title = f"Cannot relaunch {failure.run_id}" + (f" without {host}" if host else "")

        def refused(*reasons: str) -> Exclusion:
            return Exclusion(
                failure, host, blamed, None, refused=NotStarted(title, reasons, "refused", True)
            )

        if host is None:
            return refused("No host to exclude: the failure names none.")
        plan = _recorded_plan(failure.run_dir) or fallback
        if plan is None:
            return refused(
                f"{failure.run_id} has no readable plan, and the launch form's has errors."
            )
        session = self.session
        bad = read_bad_hosts(session.store.outputs)
        listed = bad if session.exclude_bad else []
        spare = plan.spares > 0
        if spare:  # one host fewer kept aside: the run keeps its number of hosts
            plan = plan.with_changes(spares=plan.spares - 1)
        try:
            plan = without_host(exclude_listed(plan, session.alloc, listed), session.alloc, host)
        except LaunchRefused as exc:
            return refused(*(p.message for p in exc.problems))
        hosts = plan.hosts_used(session.alloc)
        return Exclusion(
            failure, host, blamed, plan, hosts, listed=is_listed(host, bad), spare=spare
        )

    def relaunch(self, exclusion: Exclusion) -> Relaunch:
        """What a person agreed to: record the host in bad_hosts.txt, stop the session's run if
        one is alive, relaunch the planned plan with the failed run as the parent."""
        if exclusion.host is None or exclusion.plan is None:
            return self._launch(exclusion, 0, [], None)  # refused: nothing is written
        said, unrecorded = self._record(exclusion.failure, exclusion.host)
        return self._launch(exclusion, 0, said, unrecorded)

    def _record(self, failure: Failure, host: str) -> tuple[list[str], str | None]:
        outputs = self.session.store.outputs
        try:
            added = add_bad_hosts(outputs, [host], failure.run_id, failure.cause)
        except OSError as exc:
            unrecorded = f"cannot record {host} in {BAD_HOSTS}: {exc}"
            return [unrecorded], unrecorded
        return ([f"added {host} to {bad_hosts_path(outputs)}"] if added else []), None

    def _launch(
        self, exclusion: Exclusion, attempt: int, said: list[str], unrecorded: str | None
    ) -> Relaunch:
        failure, host, plan = exclusion.failure, exclusion.host, exclusion.plan
        if plan is None:
            refused = exclusion.refused
            assert refused is not None, "an exclusion without a plan says why"
            said.append(f"cannot retry without {host}: {' '.join(refused.reasons)}")
            return Relaunch(refused, tuple(said), unrecorded)
        if attempt:
            said.append(f"retry {attempt} of {self.retries} without {host} (after {failure.cause})")
        if exclusion.spare:
            said.append(f"a spare host takes {host}'s place: the sizes stay")
        else:
            plan = self._resized(failure, plan, said)
        resume = parent_resume(failure.run_dir, alive=False)
        if resume is not None:  # else the failed run's own EZPZ_RESUME_FROM, if it had one
            plan = with_resume(plan, resume)
            said.append(f"the relaunch {resume.describe()}")
        result = self.session.relaunch(plan, parent=failure.run_id)
        if isinstance(result, Started):
            self._attempt_of[result.handle.run_dir.name] = attempt
        else:
            said.append(f"cannot retry without {host}: {' '.join(result.reasons)}")
        return Relaunch(result, tuple(said), unrecorded)

    def _resized(self, failure: Failure, plan: LaunchPlan, said: list[str]) -> LaunchPlan:
        """Say when the relaunch runs on fewer ranks than the failed run (no spare to take
        the host's place), and keep the demo's global batch: its default follows DP."""
        alloc = self.session.alloc
        try:
            old = read_run_toml(failure.run_dir).get("sizes", {}).get("world_size")
        except (RunStoreError, AttributeError):
            return plan
        new = plan.world_size(alloc)
        if not isinstance(old, int) or old == new:
            return plan
        model = plan.tp * plan.pp * plan.cp
        old_dp, new_dp = old // model, new // model
        said.append(
            f"no spare host: the relaunch runs {new} ranks instead of {old} (DP {old_dp} → "
            f"{new_dp})"
        )
        kept = keep_global_batch(plan, old_dp)
        if kept is not plan:
            said.append(f"the demo keeps its global batch: {' '.join(kept.command[-2:])}")
        return kept


def _recorded_plan(run_dir: Path) -> LaunchPlan | None:
    """The plan ``run_dir``'s run.toml records; None when it cannot be read."""
    try:
        return LaunchPlan.from_dict(read_run_toml(run_dir).get("plan", {}))
    except (RunStoreError, ValueError, TypeError):
        return None
