"""``ezpz-tui goodput [JOB|RUN] [--json]``: where the wall time of a run, or of an allocation,
went (:mod:`ezpz_tui.core.watching.goodput`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ezpz_tui.cli.common import fail, outputs_of, run_named, say


def _stall_after() -> float:
    """``[monitor] stall_after``: how long without progress a run counts as hung."""
    from ezpz_tui.config import load_config

    settings, problems = load_config()
    for problem in problems:
        say(f"ezpz-tui: {problem}")
    return settings.stall_after


def _allocation(args: argparse.Namespace) -> tuple[str, list[Path]] | str:
    """The job a bare ``goodput`` means (this one, else this machine's runs outside a job)
    with its runs, or why none."""
    from ezpz_tui.core.watching.goodput import THIS_MACHINE, allocation_runs
    from runtime.env import job_id

    outputs = outputs_of(args)
    job = job_id()
    runs = allocation_runs(outputs, job)
    if not runs:
        where = f"of job {job}" if job else "outside a job"
        return f"no runs {where} in {outputs}"
    return (job or THIS_MACHINE), runs


def cmd_goodput(args: argparse.Namespace) -> int:
    from ezpz_tui.core.watching.goodput import (
        allocation_ledger,
        allocation_runs,
        jobs_named,
        ledger_lines,
        percent,
        run_ledger,
    )

    outputs = outputs_of(args)
    stall_after = _stall_after()
    if args.target is None:
        found = _allocation(args)
        if isinstance(found, str):
            return fail(found)
        job, runs = found
    elif (named := jobs_named(outputs, args.target)) is not None:
        job, runs = named, allocation_runs(outputs, named)
    else:
        run_dir = run_named(args, args.target)
        if isinstance(run_dir, str):
            return fail(f"{run_dir}, nor a job of its runs")
        ledger = run_ledger(run_dir, stall_after=stall_after)
        if args.json:
            print(json.dumps(ledger.to_json(), indent=2))
        else:
            print("\n".join([f"run {run_dir.name}", *ledger_lines(ledger)]))
        return 0
    ledger = allocation_ledger(runs, stall_after=stall_after)
    if args.json:
        print(json.dumps({"job": job, **ledger.to_json(), "runs": list(ledger.runs)}, indent=2))
        return 0
    head = f"job {job}: {len(runs)} run{'s' * (len(runs) != 1)}"
    each = [f"  {run.name}  goodput {percent(run_ledger(run).goodput)}" for run in runs]
    print("\n".join([head, *ledger_lines(ledger), "runs, oldest first:", *each]))
    return 0
