"""One person's launches on one allocation: the service the CLI and the TUI both drive.

It joins the pieces in the order that keeps the run-directory contract: check the plan (the one
validation), make a fresh run directory that records it, build the launch for that directory,
record the launch, start it under the supervisor. The run store and the supervisor never call
each other; this is where their work meets. A relaunch stops the current run completely before
the next one starts and names it as the parent, so the old run stays on disk for comparison.

A launch or a relaunch answers with a :data:`~ezpz_tui.core.launch_result.LaunchResult`, never
an exception for a plan, an outputs directory or a value that cannot make a run: the errors are
told apart and worded here, once, for every caller.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from ezpz_tui.core.launch_result import LaunchResult, NotStarted, Started, not_started
from ezpz_tui.core.launching.allocation import Allocation, probe_node_address
from ezpz_tui.core.launching.bad_hosts import add_bad_hosts, exclude_listed
from ezpz_tui.core.launching.launcher import (
    Launch,
    LaunchConfig,
    Which,
    build_launch,
    launcher_problems,
)
from ezpz_tui.core.launching.making import RunMaker, record_launch, record_shrunk
from ezpz_tui.core.launching.plan import CheckedPlan, LaunchPlan, LaunchRefused, Problem, check
from ezpz_tui.core.launching.processes import DEFAULT_GRACE_S, KILL_WAIT_S
from ezpz_tui.core.launching.rendezvous import resolves
from ezpz_tui.core.launching.supervisor import RunHandle, Shrink, StopResult, Supervisor
from ezpz_tui.core.runs.bad_hosts import bad_hosts_path, read_bad_hosts
from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.outputs import default_outputs
from ezpz_tui.core.runs.record import RunStoreError
from runtime.rundir import BAD_HOSTS

TYPE_CHECKING = False
if TYPE_CHECKING:  # a relaunch's and a staged launch's modules: a plain launch starts without
    from ezpz_tui.core.launching.handover import Handover, Progress

PLACEHOLDER_RUN_ID = "<run-id>"


@dataclass(frozen=True)
class Preview:
    """What a launch of a plan would run, without starting or writing anything; the run
    directory is shown as ``<outputs>/<run-id>``. ``checked`` is the plan as the launch would
    run it (the hosts of ``bad_hosts.txt`` screened out), whose sizes are the launch's."""

    problems: list[Problem]
    command: Launch | None
    hostfile_hosts: list[str]
    checked: CheckedPlan | None = None


def _listed_hosts(hostfile: Path | None) -> list[str]:
    """The hosts a scheduler's own nodefile lists."""
    if hostfile is None:
        return []
    try:
        return hostfile.read_text().split()
    except OSError:
        return []


def _fresh_if_unsaved(
    plan: LaunchPlan | CheckedPlan, run_dir: Path, progress: Progress | None
) -> LaunchPlan | CheckedPlan:
    """``plan`` as it is, unless it continues from ``run_dir``, a run that ended (while the
    question was asked) before it could save: nothing to load, so the new run starts at step 0,
    said through ``progress``, rather than failing on a checkpoint that is not there."""
    from ezpz_tui.core.launching.resuming import checked_with_resume, continues_from, with_resume
    from runtime.checkpoint_dirs import newest

    if not continues_from(plan, run_dir) or newest(run_dir) is not None:
        return plan
    if progress is not None:
        progress(f"{run_dir.name} ended before it saved: the new run starts at step 0")
    if isinstance(plan, CheckedPlan):
        return checked_with_resume(plan, None)
    return with_resume(plan, None)


class Session:
    def __init__(
        self,
        alloc: Allocation,
        outputs: Path | None = None,
        supervisor: Supervisor | None = None,
        python: str | None = None,
        exclude_bad: bool = True,
        which: Which = shutil.which,
        submission: str | None = None,
    ) -> None:
        self.alloc = alloc
        # The ``ezpz-tui submit`` whose batch job this is: its runs record it, which is how the
        # runs list tells that the queued job has started.
        self.submission = submission
        self.which = which  # how launchers are found on this node
        self.exclude_bad = exclude_bad  # skip the hosts in the outputs' bad_hosts.txt
        self.store = RunMaker(outputs or default_outputs())
        self.supervisor = supervisor or Supervisor()
        # The interpreter every rank runs: this one's unless told, read when the session starts
        # (a default bound when the module is imported would be whichever ran first).
        self.python = python or sys.executable
        self.current: RunHandle | None = None
        self.handing_over: Path | None = None  # the run saving for a relaunch, meanwhile
        self._addresses: dict[str, str] = {}
        self._resolved: dict[str, bool] = {}

    def _address(self, host: str) -> str:
        """How the ranks reach ``host``: Slurm's NodeAddr for it, asked once per host."""
        if self.alloc.scheduler != "SLURM":
            return host
        if host not in self._addresses:
            self._addresses[host] = probe_node_address(host) or host
        return self._addresses[host]

    def _resolves(self, name: str) -> bool:
        """Whether a host's high-speed-network name resolves, asked once per name: the preview
        is rebuilt on every keystroke."""
        if name not in self._resolved:
            self._resolved[name] = resolves(name)
        return self._resolved[name]

    def _config(self) -> LaunchConfig:
        return LaunchConfig(self.python, self.which, address=self._address, resolves=self._resolves)

    def _launcher_here(self, plan: LaunchPlan) -> list[Problem]:
        """What only this node can tell: its launcher, and whether its Python can be staged."""
        found = launcher_problems(plan, self.alloc, self.which, self.python)
        if plan.stage == "off":
            return found
        from ezpz_tui.core.launching.staging import stage_problems

        return found + stage_problems(plan, self.python)

    def check(self, plan: LaunchPlan) -> CheckedPlan:
        """``plan`` cleared for launching here, without the hosts failures named in
        ``bad_hosts.txt`` (unless :attr:`exclude_bad` is off): a warning says which were
        skipped; :class:`LaunchRefused` when they were all there was, or when the plan's
        launcher is not on this node."""
        if not self.exclude_bad:
            return check(plan, self.alloc, self._launcher_here)
        screened = exclude_listed(plan, self.alloc, read_bad_hosts(self.store.outputs))
        if screened is plan:
            return check(plan, self.alloc, self._launcher_here)
        path = bad_hosts_path(self.store.outputs)
        skipped = ", ".join(screened.exclude[len(plan.exclude) :])
        if not screened.usable_hosts(self.alloc):
            message = (
                f"Every allocated host is listed in {path} ({skipped}): edit it, or launch "
                "with --no-exclude-bad."
            )
            raise LaunchRefused([Problem("error", "exclude", message)])
        checked = check(screened, self.alloc, self._launcher_here)
        note = Problem("warning", "exclude", f"Skipping {skipped}: listed in {path}.")
        return replace(checked, warnings=(*checked.warnings, note))

    def preview(self, plan: LaunchPlan | CheckedPlan) -> Preview:
        """The launch ``plan`` would make, with every problem it has; a plan :meth:`check`
        cleared is not checked again."""
        if isinstance(plan, CheckedPlan):
            checked = plan
        else:
            try:
                checked = self.check(plan)
            except LaunchRefused as refused:
                return Preview(refused.found, None, [])
        shown = self.store.outputs / PLACEHOLDER_RUN_ID
        launch = build_launch(checked, shown, self._config())
        hosts = list(launch.hostfile_hosts) or _listed_hosts(launch.hostfile)
        return Preview(list(checked.warnings), launch, hosts, checked)

    def _prepare(
        self, plan: LaunchPlan | CheckedPlan, parent: str | None, handover: Handover | None = None
    ) -> tuple[Launch, Shrink]:
        """A recorded launch of ``plan`` in a new run directory, and how it goes on without
        nodes that cannot stage; :class:`LaunchRefused` for a plan with errors, before
        anything is made. A plan :meth:`check` cleared (the one a question showed) is
        launched as it was checked: it is frozen, so nothing edited since can come with it.
        ``handover``: how its parent was saved and stopped for it, recorded as its own."""
        checked = plan if isinstance(plan, CheckedPlan) else self.check(plan)
        meta = checked.meta
        if self.submission:
            meta["submission"] = self.submission
        if handover is not None:
            meta["handover"] = handover.record()
        run_dir = self.store.create(checked.plan.to_dict(), checked.sizes, parent=parent, meta=meta)
        launch = build_launch(checked, run_dir, self._config())
        left = self.alloc.walltime_left()
        if left is not None:
            launch = replace(launch, walltime_end=time.time() + left)
        return launch, self._shrink(checked, launch)

    def _shrink(self, checked: CheckedPlan, launch: Launch) -> Shrink:
        """The launch of ``checked`` without the nodes whose staging failed, recorded in its
        run directory, those nodes added to ``bad_hosts.txt`` (a node's full or read-only disk
        fails the next launch too); or why there is none."""

        def shrink(failed: Mapping[str, str]) -> tuple[Launch, str] | str:
            from ezpz_tui.core.launching.stage_shortfall import without_unstaged

            found = without_unstaged(checked, failed, self._launcher_here)
            if isinstance(found, str):
                return found
            smaller, said = found
            run_dir = launch.run_dir
            try:
                shrunk = build_launch(smaller, run_dir, self._config())
                shrunk = replace(shrunk, walltime_end=launch.walltime_end)
                record_shrunk(run_dir, smaller, failed)
                record_launch(shrunk).record()
            except (RunStoreError, ValueError) as exc:  # LaunchRefused is a ValueError
                return f"the smaller launch cannot be made: {exc}"
            for host, why in failed.items():
                try:
                    add_bad_hosts(self.store.outputs, [host], run_dir.name, f"staging: {why}")
                except OSError as exc:
                    said += f"; cannot record {host} in {BAD_HOSTS}: {exc.strerror or exc}"
            return shrunk, said

        return shrink

    def _start(
        self, launch: Launch, shrink: Shrink, old: RunHandle | None, grace_s: tuple[float, float]
    ) -> RunHandle:
        try:
            provenance = record_launch(launch)
        except RunStoreError as exc:
            return self.supervisor.not_started(launch, str(exc))
        if old is None:
            handle = self.supervisor.start(launch, shrink)
        else:
            handle = self.supervisor.relaunch(old, launch, grace_s, shrink)
        provenance.record()  # while the ranks start
        return handle

    def launch(self, plan: LaunchPlan | CheckedPlan, parent: str | None = None) -> LaunchResult:
        """Start ``plan`` in a new run directory, or say why not."""
        return self._run(plan, parent, None, DEFAULT_GRACE_S, "launch")

    def relaunch(
        self,
        plan: LaunchPlan | CheckedPlan,
        grace_s: tuple[float, float] = DEFAULT_GRACE_S,
        parent: str | None = None,
        progress: Progress | None = None,
        replacing: Path | None = None,
    ) -> LaunchResult:
        """Stop the current run (waiting until none of its processes is left, or only its
        leftovers when it has ended), start ``plan``; its parent is ``parent``, else the run
        stopped. A failover names the failed run, which may no longer be the current one.
        ``replacing``: the run to replace when it is not this session's (the headless
        ``ezpz-tui relaunch RUN``): another process on this node supervises it.

        When ``plan`` continues from the run replaced and that run is alive, the run is first
        asked to save at the step it is at and stop (:func:`~ezpz_tui.core.launching.handover.
        hand_over`, bounded by the supervisor's ``relaunch_save_s``), ``progress`` told how the
        save goes, one line at a time; the new run records the handover's times. A second
        relaunch while a save runs is refused, with what it waits for."""
        from ezpz_tui.core.launching.handover import hand_over
        from ezpz_tui.core.launching.resuming import continues_from

        old = self.current
        if replacing is not None and (old is None or old.run_dir != replacing.absolute()):
            return self._relaunch_elsewhere(plan, replacing.absolute(), grace_s, parent, progress)
        if parent is None and old is not None:
            parent = old.run_dir.name
        if old is not None and old.wait(0) is not None:
            plan = _fresh_if_unsaved(plan, old.run_dir, progress)
        handover = None
        if old is not None and old.wait(0) is None and continues_from(plan, old.run_dir):
            busy = self._busy(old.run_dir)
            if busy is not None:
                return NotStarted("Not relaunched", (busy,), "busy")
            self.handing_over = old.run_dir
            try:
                handover = hand_over(old, self.supervisor.relaunch_save_s, grace_s, progress)
            finally:
                self.handing_over = None
        return self._run(plan, parent, old, grace_s, "relaunch", handover)

    def _relaunch_elsewhere(
        self,
        plan: LaunchPlan | CheckedPlan,
        run_dir: Path,
        grace_s: tuple[float, float],
        parent: str | None,
        progress: Progress | None,
    ) -> LaunchResult:
        """:meth:`relaunch` of a run another process supervises: handed over (or stopped)
        through its directory and its supervisor; nothing starts while it may still run."""
        from ezpz_tui.core.launching.elsewhere import Refused, stop_elsewhere
        from ezpz_tui.core.launching.handover import hand_over
        from ezpz_tui.core.launching.resuming import continues_from

        handover = None
        if run_state(run_dir).live:
            busy = self._busy(run_dir)
            if busy is not None:
                return NotStarted("Not relaunched", (busy,), "busy")
            if continues_from(plan, run_dir):
                self.handing_over = run_dir
                try:
                    wait_s = self.supervisor.relaunch_save_s
                    handover = hand_over(run_dir, wait_s, grace_s, progress)
                finally:
                    self.handing_over = None
                left = handover.left
            else:
                ended = stop_elsewhere(run_dir, timeout_s=sum(grace_s) + KILL_WAIT_S * 2)
                left = ended.reason if isinstance(ended, Refused) else None
            if left is not None:
                return NotStarted(
                    "Not relaunched", (f"{run_dir.name} is not stopped: {left}",), "busy"
                )
        return self._run(plan, parent or run_dir.name, None, grace_s, "relaunch", handover)

    def _busy(self, run_dir: Path) -> str | None:
        """Why the run in ``run_dir`` cannot be asked to save and stop now: a save asked of it
        already runs (asked here, or by another process)."""
        if self.handing_over is not None:
            saving = self.handing_over.name
            return f"{saving} is saving for a relaunch already: wait for it."
        from ezpz_tui.core.launching.handover import pending_stop

        asked = pending_stop(run_dir)
        if asked is not None:
            ago = f" {time.time() - asked:.0f} s ago" if asked else ""
            return f"{run_dir.name} was asked to save and stop{ago} already: wait for it."
        return None

    def _run(
        self,
        plan: LaunchPlan | CheckedPlan,
        parent: str | None,
        old: RunHandle | None,
        grace_s: tuple[float, float],
        verb: str,
        handover: Handover | None = None,
    ) -> LaunchResult:
        try:
            launch, shrink = self._prepare(plan, parent, handover)
            self.current = self._start(launch, shrink, old, grace_s)
        except (OSError, RunStoreError, ValueError) as exc:  # LaunchRefused is a ValueError
            return not_started(exc, self.store.outputs, verb)
        return Started(self.current)

    def stop(self, grace_s: tuple[float, float] = DEFAULT_GRACE_S) -> StopResult | None:
        return None if self.current is None else self.current.stop(grace_s)

    def alive(self) -> list[RunHandle]:
        """Runs started here that still have a launcher running."""
        return [h for h in self.supervisor.handles if h.wait(0) is None]
