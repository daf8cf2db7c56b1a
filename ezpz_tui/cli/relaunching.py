"""``ezpz-tui relaunch``: what the TUI's ``R`` does, for a headless user or a test.

RUN's recorded plan with the sizes given changed is checked, then preflighted (its new layout
runs one step alone: :mod:`ezpz_tui.core.launching.preflight`) before RUN is touched. The
question's lines are printed (what changes, where the child starts, the preflight's verdict);
without ``--yes`` it is asked on the terminal. Then the session's relaunch replaces RUN as
``R`` does (a live RUN that answers saves at the step it is at and stops, the save's progress
printed; else it is stopped through its supervisor) and the child starts in RUN's outputs
directory with RUN as its parent, followed as ``launch`` follows a run. Exit status: the
child's, as ``launch``; 2 for bad input, a plan that cannot run, a failed preflight (RUN goes
on), a RUN that cannot be stopped from here or is already saving for a relaunch; 1 when the
person said no.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ezpz_tui.cli.common import fail, run_named, say
from ezpz_tui.cli.launching import follow, session_for

SIZES = ("tp", "pp", "cp", "nodes")


def _plan_of(args: argparse.Namespace, record: dict[str, Any]) -> Any:
    """RUN's recorded plan with what the options change; ``ValueError`` when it cannot be
    read."""
    from ezpz_tui.core.launching.plan import LaunchPlan

    recorded = record.get("plan")
    if not isinstance(recorded, dict):
        raise ValueError("its run.toml records no [plan]")
    changes: dict[str, Any] = {k: getattr(args, k) for k in SIZES if getattr(args, k) is not None}
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if command:
        changes["command"] = tuple(command)
    return LaunchPlan.from_dict(recorded).with_changes(**changes)


def _preflight_lines(checked: Any) -> tuple[list[str], bool]:
    """The preflight's lines, and whether it refuses the relaunch."""
    from ezpz_tui.core.comparing.memory import demo_estimate
    from ezpz_tui.core.launching.preflight import available_a_rank, run_preflight

    plan = checked.plan
    say(f"ezpz-tui: preflight: one step of TP {plan.tp} PP {plan.pp} CP {plan.cp} on this CPU ...")
    found = run_preflight(checked)
    guess = demo_estimate(plan.command, plan.tp, plan.pp, plan.cp, plan.layout(checked.alloc).dp)
    return found.lines(guess.total if guess else None, available_a_rank(checked)), found.refuses


def _asked(yes: bool) -> bool | str:
    """Whether to go ahead: ``--yes``, else the person's answer; a str says why not asked."""
    if yes:
        return True
    if not sys.stdin.isatty():
        return "not relaunched: asking needs a terminal (stdin is not one); --yes answers yes"
    try:
        answer = input("Relaunch? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def cmd_relaunch(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launch_result import NotStarted
    from ezpz_tui.core.launching.change import change_lines, relaunch_change
    from ezpz_tui.core.launching.elsewhere import Refused, stoppable
    from ezpz_tui.core.launching.plan import LaunchRefused
    from ezpz_tui.core.launching.resuming import (
        checked_with_resume,
        no_checkpoint_words,
        parent_resume,
    )
    from ezpz_tui.core.runs.liveness import run_state
    from ezpz_tui.core.runs.record import RunStoreError, read_run_toml

    run = run_named(args)
    if isinstance(run, str):
        return fail(run)
    try:
        record = read_run_toml(run)
        plan = _plan_of(args, record)
    except (RunStoreError, ValueError, TypeError) as exc:
        return fail(f"{run.name} cannot be relaunched: {exc}")
    args.outputs = run.parent  # the child goes beside its parent
    session = session_for(args)
    try:
        checked = session.check(plan)
    except LaunchRefused as exc:
        return fail(f"not relaunched: {exc}")
    preview = session.preview(checked)
    argv = preview.command.argv if preview.command else ()
    alive = run_state(run).live
    supervisor = stoppable(run) if alive else None
    if isinstance(supervisor, Refused):  # said before the preflight's seconds, not after
        return fail(f"not relaunched: {supervisor.reason}")
    resume = None if args.fresh else parent_resume(run, alive=alive)
    if alive and resume is not None and resume.saved_now is not None:
        said = "is running: it saves at the step it is at and stops first"
    else:
        said = "is running: it is stopped first" if alive else "has ended"
    say(f"ezpz-tui: relaunch {run.name}? It {said} (and stays on disk as the new run's parent).")
    for line in change_lines(relaunch_change(record, run, checked, argv)):
        say(f"  {line}")
    if resume is not None:
        starts = resume.describe()
    else:
        starts = "starts fresh (step 0)" if args.fresh else no_checkpoint_words(run)
    say(f"  The new run {starts}.")
    if not args.no_preflight:
        lines, refuses = _preflight_lines(checked)
        for line in lines:
            say(f"  {line}")
        if refuses:
            left = f"{run.name} goes on" if alive else f"{run.name} is left as it is"
            return fail(f"not relaunched: the preflight failed; {left} (--no-preflight skips it)")
    answer = _asked(args.yes)
    if isinstance(answer, str):
        return fail(answer)
    if not answer:
        say("ezpz-tui: not relaunched")
        return 1
    result = session.relaunch(
        checked_with_resume(checked, resume),
        parent=run.name,
        progress=lambda line: say(f"ezpz-tui: {line}"),
        replacing=run,
    )
    if isinstance(result, NotStarted):
        for reason in result.reasons:
            say(f"ezpz-tui: {reason}")
        return 2
    handle = result.handle
    say(f"ezpz-tui: run {handle.run_dir}")
    return follow(handle, quiet=args.quiet)
