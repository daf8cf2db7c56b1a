"""One person's launches on one allocation: the service the CLI and the TUI both drive.

It joins the pieces in the order that keeps the run-directory contract: validate the plan,
make a fresh run directory that records it, build the launcher argv for that directory, start it
under the supervisor. A relaunch stops the current run completely before the next one starts
and names it as the parent, so the old run stays on disk for comparison.
"""

from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.launcher import LaunchCommand, build_launch
from ezpz_tui.core.launching.plan import LaunchPlan, Problem, validate
from ezpz_tui.core.launching.runstore import RunStore
from ezpz_tui.core.launching.supervisor import DEFAULT_GRACE_S, RunHandle, StopResult, Supervisor

OUTPUTS_VAR = "EZPZ_OUTPUTS"


def default_outputs() -> Path:
    """``$EZPZ_OUTPUTS`` or ``./outputs``: next to the code being run, as ezpz does."""
    return Path(os.environ.get(OUTPUTS_VAR) or "outputs")


class LaunchRefused(ValueError):
    """The plan has errors; ``problems`` holds every one as a sentence."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__(" ".join(p.message for p in problems))


@dataclass(frozen=True)
class Preview:
    """What a launch of a plan would run, without starting anything."""

    problems: list[Problem]
    command: LaunchCommand | None
    hostfile_hosts: list[str]


class Session:
    def __init__(
        self,
        alloc: Allocation,
        outputs: Path | None = None,
        supervisor: Supervisor | None = None,
        python: str = sys.executable,
    ) -> None:
        self.alloc = alloc
        self.store = RunStore(outputs or default_outputs())
        self.supervisor = supervisor or Supervisor()
        self.python = python
        self.current: RunHandle | None = None

    def preview(self, plan: LaunchPlan) -> Preview:
        """The launcher argv for ``plan`` (run directory shown as ``<outputs>/<run-id>``)."""
        problems = validate(plan, self.alloc)
        if any(p.level == "error" for p in problems):
            return Preview(problems, None, [])
        with tempfile.TemporaryDirectory() as tmp:
            placeholder = Path(tmp) / "<run-id>"
            placeholder.mkdir()
            cmd = build_launch(plan, self.alloc, placeholder, python=self.python)
            hosts = cmd.hostfile.read_text().split() if cmd.hostfile else []
            shown = str(self.store.outputs / "<run-id>")
            argv = [a.replace(str(placeholder), shown) for a in cmd.argv]
            notes = [n.replace(str(placeholder), shown) for n in cmd.notes]
            hostfile = cmd.hostfile
            if hostfile is not None and hostfile.parent == placeholder:
                hostfile = self.store.outputs / "<run-id>" / hostfile.name
            # else: PBS's own nodefile, used as it is
        return Preview(problems, LaunchCommand(argv, cmd.env, hostfile, cmd.launcher, notes), hosts)

    def _prepare(self, plan: LaunchPlan, parent: str | None) -> tuple[Path, LaunchCommand]:
        problems = validate(plan, self.alloc)
        if any(p.level == "error" for p in problems):
            raise LaunchRefused([p for p in problems if p.level == "error"])
        alloc = self.alloc
        meta = {
            "scheduler": alloc.scheduler,
            "job_id": alloc.job_id,
            "machine": alloc.machine,
            "hosts": list(plan.hosts_used(alloc)),
            "ranks_per_node": plan.ranks_per_node(alloc),
            "warnings": [p.message for p in problems],
        }
        sizes = {"tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "world_size": plan.world_size(alloc)}
        run_dir = self.store.create(plan.to_dict(), sizes, parent=parent, meta=meta)
        return run_dir, build_launch(plan, alloc, run_dir, python=self.python)

    def launch(self, plan: LaunchPlan, parent: str | None = None) -> RunHandle:
        """Start ``plan`` in a new run directory; :class:`LaunchRefused` if it has errors."""
        run_dir, cmd = self._prepare(plan, parent)
        self.current = self.supervisor.start(run_dir, cmd.argv, cmd.env)
        return self.current

    def relaunch(
        self, plan: LaunchPlan, grace_s: tuple[float, float] = DEFAULT_GRACE_S
    ) -> RunHandle:
        """Stop the current run (waiting until none of its processes is left), start ``plan``."""
        old = self.current
        if old is None:
            return self.launch(plan)
        run_dir, cmd = self._prepare(plan, parent=old.run_dir.name)
        self.current = self.supervisor.relaunch(old, run_dir, cmd.argv, cmd.env, grace_s=grace_s)
        return self.current

    def stop(self, grace_s: tuple[float, float] = DEFAULT_GRACE_S) -> StopResult | None:
        return None if self.current is None else self.current.stop(grace_s)

    def alive(self) -> list[RunHandle]:
        """Runs started here that still have a launcher running."""
        return [h for h in self.supervisor.handles if h.wait(0) is None]
