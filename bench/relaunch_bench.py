"""What a relaunch that saves now costs: its restart against a fresh launch that loads the same
checkpoint.

``python bench/relaunch_bench.py [--reps 3] [--steps-before 20] [--dim 64]``

Each repetition, on this host's CPU with 2 ranks, through the real Session and mpiexec:

(a) the demo runs (DP 2) until rank 0 has recorded ``--steps-before`` steps; a relaunch with
    TP 2 that continues from it (what ``R`` and ``ezpz-tui relaunch`` do) asks it to save now
    and stop; the child's restart (``compare --json``'s ``restart_s``: from the request to the
    end of the child's first step) and its parts: save, stop, start, load, first step;
(b) right after, a fresh launch of the same TP 2 plan resuming from the checkpoint (a) saved:
    from the launch call to the end of its first step, which holds the same start, load and
    first step but no save and no stop.

The target is (a) ≤ (b) + 1 s: the save and the stop, and whatever else the handover adds,
within a second. Paired figures per repetition (with the load average: a loaded host moves the
start, the largest part, by seconds) and the medians are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from _common import PY, bench_parser, print_rerun, scratch, with_repo_path

TARGET_S = 1.0
WAIT_S = 300.0


def demo(args: argparse.Namespace) -> tuple[str, ...]:
    sizes = ("--dim", str(args.dim), "--layers", "2", "--global-batch", "8")
    return (PY, "-m", "runtime.examples.train", "--steps", "100000", *sizes, "--log-every", "50")


def wait_first_record(handle: object, run: Path) -> float:
    """The end of rank 0's first step (its first record's timestamp)."""
    from ezpz_tui.core.runs.restart import first_record

    deadline = time.monotonic() + WAIT_S
    while (record := first_record(run)) is None:
        if handle.wait(0.1) is not None or time.monotonic() > deadline:  # type: ignore[attr-defined]
            raise SystemExit(f"{run.name} ended or stalled before its first step")
    return float(record["timestamp"])


def wait_steps(handle: object, run: Path, steps: int) -> None:
    from ezpz_tui.core.launching.handover import steps_done

    deadline = time.monotonic() + WAIT_S
    while (steps_done(run) or 0) < steps:
        if handle.wait(0.1) is not None or time.monotonic() > deadline:  # type: ignore[attr-defined]
            raise SystemExit(f"{run.name} ended or stalled before step {steps}")


def one(args: argparse.Namespace, outputs: Path) -> tuple[dict[str, float | None], float]:
    from ezpz_tui.core.comparing.facts import read_facts
    from ezpz_tui.core.launch_result import Started
    from ezpz_tui.core.launching.allocation import detect_allocation
    from ezpz_tui.core.launching.plan import LaunchPlan
    from ezpz_tui.core.launching.resuming import checked_with_resume, parent_resume, resume_of
    from ezpz_tui.core.session import Session

    session = Session(detect_allocation(), outputs)
    try:
        started = session.launch(LaunchPlan(ppn=2, command=demo(args)))
        assert isinstance(started, Started), started
        parent = started.handle
        wait_steps(parent, parent.run_dir, args.steps_before)
        child_plan = LaunchPlan(ppn=2, tp=2, command=demo(args))
        resume = parent_resume(parent.run_dir, alive=True)
        relaunched = session.relaunch(checked_with_resume(session.check(child_plan), resume))
        assert isinstance(relaunched, Started), relaunched
        child = relaunched.handle
        wait_first_record(child, child.run_dir)
        restart = read_facts(child.run_dir).restart
        assert restart is not None, "the child recorded no restart"
        figures = {"restart_s": restart.total_s, **restart.parts()}
        child.stop((2.0, 2.0))

        fresh_plan = checked_with_resume(session.check(child_plan), resume_of(parent.run_dir))
        asked = time.time()
        fresh = session.launch(fresh_plan)
        assert isinstance(fresh, Started), fresh
        baseline = wait_first_record(fresh.handle, fresh.handle.run_dir) - asked
        return figures, baseline
    finally:
        session.supervisor.stop_all(grace_s=(2.0, 2.0))


def main() -> int:
    parser = bench_parser(__doc__, ())
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--steps-before", type=int, default=20, help="parent steps before")
    parser.add_argument("--dim", type=int, default=64)
    args = parser.parse_args()
    os.environ.setdefault("EZPZ_ACCELERATORS_PER_HOST", "cpu:2")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with_repo_path(os.environ)  # type: ignore[arg-type]
    restarts, baselines = [], []
    with scratch("relaunch_bench", args.keep) as root:
        for rep in range(args.reps):
            figures, baseline = one(args, root / f"rep-{rep}")
            restarts.append(figures["restart_s"])
            baselines.append(baseline)
            parts = " · ".join(
                f"{k[:-2]} {v:.2f}" for k, v in figures.items() if k != "restart_s" and v
            )
            gap = (figures["restart_s"] or 0.0) - baseline
            print(
                f"rep {rep + 1}: relaunch restart {figures['restart_s']:.2f} s ({parts}) vs "
                f"fresh launch + load {baseline:.2f} s: {gap:+.2f} s "
                f"(load average {os.getloadavg()[0]:.1f})"
            )
    med_restart = statistics.median(r for r in restarts if r is not None)
    med_base = statistics.median(baselines)
    gap = med_restart - med_base
    verdict = "within" if gap <= TARGET_S else "over"
    print(
        f"median: relaunch restart {med_restart:.2f} s vs fresh launch + load {med_base:.2f} s "
        f"({med_restart / med_base:.2f}x): {gap:+.2f} s, {verdict} the target of +{TARGET_S:g} s"
    )
    print_rerun("relaunch_bench.py", args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
