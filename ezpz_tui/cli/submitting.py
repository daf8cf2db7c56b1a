"""``ezpz-tui submit``: the plan that worked, as a PBS or Slurm batch job."""

from __future__ import annotations

import argparse
import sys

from ezpz_tui.cli.common import fail, outputs_of, say


def cmd_submit(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launching.allocation import detect_allocation
    from ezpz_tui.core.launching.batch_script import DEFAULT_WALLTIME_S, render
    from ezpz_tui.core.launching.submission import (
        BatchRequest,
        SubmitError,
        plan_source,
        prepare,
        resumed_run,
        submit,
    )
    from ezpz_tui.core.runs.store import RunStore

    store = RunStore(outputs_of(args))
    walltime = args.walltime or DEFAULT_WALLTIME_S
    request = BatchRequest(
        args.nodes, walltime, args.queue, args.account, args.filesystems, args.scheduler
    )
    try:
        source, record = plan_source(store, args.run)
        resume = resumed_run(store, args.run) if args.resume else None
        job = prepare(record, source, request, detect_allocation(), store.outputs, resume=resume)
        script = render(job)
        if args.dry_run:
            sys.stdout.write(script)
            return 0
        done = submit(job, script)
    except SubmitError as exc:
        return fail(str(exc))
    print(done.job_id)
    say(
        f"ezpz-tui: submitted the plan of {source} as {job.scheduler} job {done.job_id} "
        f"({job.submission}); `ezpz-tui runs` lists it as queued until its run starts; "
        f"the script is {done.script}"
    )
    return 0
