"""Which checkpoint a launch continues from, and how the ranks are told.

A launch resumes by giving every rank ``EZPZ_RESUME_FROM`` (:data:`runtime.checkpoint_dirs.
RESUME_VAR`) in the plan's environment, so the run's ``run.toml`` records where it continued
from. It names a checkpoint folder when the run that saved it has ended, and the run itself
when that run is still alive: a relaunch stops it first, it may complete a save while it stops,
and each rank then takes the newest complete checkpoint when it starts. The demo and any
script that uses :mod:`runtime.checkpoint`'s helper read it; the checkpoints are found with
:mod:`runtime.checkpoint_dirs`, which needs no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ezpz_tui.core.launching.plan import DEMO_MODULE, CheckedPlan, LaunchPlan
from runtime.checkpoint_dirs import RESUME_VAR, Checkpoint, newest, resolve


@dataclass(frozen=True)
class Resume:
    """A launch's continuation: ``given`` goes to the ranks; ``found`` is the checkpoint that
    is newest now (what the question and the log name)."""

    given: Path
    found: Checkpoint

    def describe(self) -> str:
        return f"resumes at step {self.found.step} from {self.found.path}"


def resume_of(target: str | Path) -> Resume:
    """``--resume-from``: a run (its newest complete checkpoint) or a checkpoint folder;
    :class:`~runtime.checkpoint_dirs.CheckpointError` when there is none to load."""
    found = resolve(target)
    return Resume(found.path, found)


def parent_resume(parent: Path, alive: bool) -> Resume | None:
    """The relaunch's default: the parent's newest complete checkpoint, None without one. A
    live parent is named itself, so a save it completes while being stopped is not lost."""
    found = newest(parent)
    if found is None:
        return None
    return Resume(parent if alive else found.path, found)


def with_resume(plan: LaunchPlan, resume: Resume | None) -> LaunchPlan:
    """``plan`` continuing from ``resume``, or starting fresh (None): a relaunched plan may
    carry its parent's own ``EZPZ_RESUME_FROM``, which must not survive a fresh start."""
    env = [(k, v) for k, v in plan.env if k != RESUME_VAR]
    if resume is not None:
        env.append((RESUME_VAR, str(resume.given)))
    return plan.with_changes(env=tuple(env))


def checked_with_resume(checked: CheckedPlan, resume: Resume | None) -> CheckedPlan:
    """:func:`with_resume` of a plan already checked, without a second check: only
    ``EZPZ_RESUME_FROM`` changes, a name the check never refuses (no size's, not one the
    launcher sets), with a value made here."""
    return replace(checked, plan=with_resume(checked.plan, resume))


DEMO_BATCH = 8  # the demo's --batch-size default: sequences per replica


def keep_global_batch(plan: LaunchPlan, old_dp: int) -> LaunchPlan:
    """The demo's plan with the global batch it had on ``old_dp`` replicas made explicit, so
    a relaunch on fewer ranks trains on the same batches (its default is the batch size x
    DP); any other command, or a demo given ``--global-batch``, is left as it is. The demo
    refuses, with the reason, a global batch the new DP does not divide."""
    command = plan.command
    if DEMO_MODULE not in command or "--global-batch" in command:
        return plan
    batch = DEMO_BATCH
    if "--batch-size" in command[:-1]:
        try:
            batch = int(command[command.index("--batch-size") + 1])
        except ValueError:
            return plan
    return plan.with_changes(command=(*command, "--global-batch", str(batch * old_dp)))
