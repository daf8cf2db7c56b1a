"""Which checkpoint a launch continues from, and how the ranks are told.

A launch resumes by giving every rank ``EZPZ_RESUME_FROM`` (:data:`runtime.checkpoint_dirs.
RESUME_VAR`) in the plan's environment, so the run's ``run.toml`` records where it continued
from. It names a checkpoint folder when the run that saved it has ended, and the run itself
when that run is still alive: a relaunch asks it to save now and stop first
(:mod:`~ezpz_tui.core.launching.handover`), and each rank then takes the newest complete
checkpoint when it starts: the one just saved, or the newest before it. The demo and any
script that uses :mod:`runtime.checkpoint`'s helper read it; the checkpoints are found with
:mod:`runtime.checkpoint_dirs`, which needs no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ezpz_tui.core.launching.handover import answers, steps_done
from ezpz_tui.core.launching.plan import DEMO_MODULE, CheckedPlan, LaunchPlan
from runtime.checkpoint_dirs import RESUME_VAR, Checkpoint, newest, resolve


@dataclass(frozen=True)
class Resume:
    """A launch's continuation: ``given`` goes to the ranks; ``found`` is the checkpoint that
    is newest now (what the question and the log name). ``saved_now``: the parent is alive
    and answers a request, so the relaunch has it save at the step it is at (this one when
    asked) and the child continues there. ``done``: the steps a live parent that cannot be
    asked has run, of which those after ``found`` are redone."""

    given: Path
    found: Checkpoint | None
    saved_now: int | None = None
    done: int | None = None

    def describe(self) -> str:
        if self.saved_now is not None or self.found is None:
            return f"continues at step {self.saved_now or 0} (saved now)"
        step = self.found.step
        if self.done is not None:
            return f"starts at step {step}, the newest checkpoint ({self.done - step} steps redone)"
        return f"resumes at step {step} from {self.found.path}"


def no_checkpoint_words(parent: Path) -> str:
    """Where the child of a run that neither has a checkpoint nor can save one starts."""
    return f"starts at step 0: {parent.name} saves no checkpoints (see runtime.checkpoint)"


def resume_of(target: str | Path) -> Resume:
    """``--resume-from``: a run (its newest complete checkpoint) or a checkpoint folder;
    :class:`~runtime.checkpoint_dirs.CheckpointError` when there is none to load."""
    found = resolve(target)
    return Resume(found.path, found)


def parent_resume(parent: Path, alive: bool) -> Resume | None:
    """The relaunch's default: continue from the parent, None when there is nothing to
    continue from. A live parent is named itself, so that the save it is asked to make now
    (one that answers: :func:`~ezpz_tui.core.launching.handover.answers`), or one it completes
    while being stopped, is what the child loads; an ended one, its newest complete
    checkpoint."""
    found = newest(parent)
    done = steps_done(parent) if alive else None
    if alive and answers(parent):
        return Resume(parent, found, saved_now=done or 0)
    if found is None:
        return None
    if not alive:
        return Resume(found.path, found)
    return Resume(parent, found, done=max(done or 0, found.step))


def continues_from(plan: LaunchPlan | CheckedPlan, run_dir: Path) -> bool:
    """Whether ``plan`` continues from the run in ``run_dir`` itself (its newest checkpoint
    when it starts): what a relaunch of a live run gives, and why it asks that run to save."""
    given = dict((plan.plan if isinstance(plan, CheckedPlan) else plan).env).get(RESUME_VAR)
    if not given:
        return False
    try:
        return Path(given).resolve() == Path(run_dir).resolve()
    except (OSError, RuntimeError):
        return False


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
