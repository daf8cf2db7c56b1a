"""The goodput ledger's read: a resumed run and its failed parent, each of ``--ranks`` ranks.

The parent recorded ``--steps`` steps on every rank and failed; its retry resumed from a
checkpoint before its last step and recorded as many again (rank 0's records carry the demo's
metrics and a save's figures every 100 steps). (a) :func:`run_ledger` of the retry (its rank
0's records whole, its parent's ranks' file ends) against :func:`read_numbers` of the same run
(what Compare and ``summary.json`` read of it already: rank 0's records whole), median ms of
interleaved repeats and their ratio; (b) the same ledger as the summary bar reads it again
while the run lives, its parent's lineage remembered (:class:`Ancestry`), and the share of one
core that costs at the interval it then takes (5 s, or 50 times the read); (c)
:func:`allocation_ledger` of the two runs.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

from _common import bench_parser, print_rerun, scratch, versus

from ezpz_tui.core.watching.goodput import Ancestry, allocation_ledger, run_ledger
from ezpz_tui.core.watching.numbers import read_numbers
from ezpz_tui.ui.opened_run import GOODPUT_EVERY_S, GOODPUT_SHARE
from runtime import records
from runtime.rundir import RankState, RankStatus, RunDir, RunState, State, write_state, write_status

T = time.time() - 86400.0
METRICS = {"loss": 2.0, "lr": 3e-4, "grad_norm": 1.0, "dt": 0.2, "tokens_per_s": 4096.0}


def make_run(
    outputs: Path, name: str, ranks: int, first: int, steps: int, start: float, **state: object
) -> Path:
    run = outputs / name
    RunDir(run).make_folders(ranks)
    parent = state.pop("parent", None)
    (run / "run.toml").write_text(
        f'run_id = "{name}"\ncreated_epoch = {start}\n'
        + (f'parent = "{parent}"\n[plan.env]\nEZPZ_RESUME_FROM = "x"\n' if parent else "")
    )
    end = start + 5 + steps * 0.2 + 2
    write_state(run, RunState(created=start, start=start + 1, end=end, **state))  # type: ignore[arg-type]
    for rank in range(ranks):
        write_status(run, RankStatus(rank, state=RankState.SUCCEEDED, start=start, end=end))
        with open(RunDir(run).metrics(rank), "wb") as fh:
            for i in range(steps):
                metrics = dict(METRICS)
                if rank == 0 and i % 100 == 99:
                    metrics |= {"ckpt_step": float(first + i + 1), "ckpt_save_s": 0.05}
                fh.write(records.encode(rank, first + i, metrics, start + 5 + i * 0.2))
    return run


def timed(work: Callable[[], object], reps: int) -> list[float]:
    took = []
    for _ in range(reps):
        start = time.perf_counter()
        work()
        took.append((time.perf_counter() - start) * 1e3)
    return took


def main() -> None:
    parser = bench_parser(__doc__, ("run", "live", "job"))
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    print_rerun("goodput_bench.py", args)
    with scratch("goodput-bench", args.keep) as root:
        outputs = root / "outputs"
        parent = make_run(
            outputs, "run-1", args.ranks, 0, args.steps, T, state=State.FAILED, failed_rank=1
        )
        child = make_run(
            outputs,
            "run-2",
            args.ranks,
            args.steps // 2,
            args.steps,
            T + 10 + args.steps * 0.2,
            state=State.SUCCEEDED,
            parent="run-1",
        )
        print(f"{args.ranks} ranks x {args.steps} steps a run; the retry redoes {args.steps // 2}")
        if args.only in (None, "run"):
            ledger, numbers = [], []
            for _ in range(args.reps):  # interleaved
                ledger += timed(lambda: run_ledger(child), 1)
                numbers += timed(lambda: read_numbers(child), 1)
            a, b = statistics.median(ledger), statistics.median(numbers)
            print(f"(a) run_ledger vs read_numbers of the retry: {versus(a, b, '{:.1f} ms')}")
        if args.only in (None, "live"):
            kept = Ancestry()
            run_ledger(child, ancestry=kept)
            again = statistics.median(timed(lambda: run_ledger(child, ancestry=kept), args.reps))
            every = max(GOODPUT_EVERY_S, GOODPUT_SHARE * again / 1e3)
            print(
                f"(b) the summary bar's read again, the parent remembered: {again:.1f} ms, "
                f"every {every:.1f} s: {again / 1e3 / every * 100:.2f}% of a core"
            )
        if args.only in (None, "job"):
            job = statistics.median(timed(lambda: allocation_ledger([parent, child]), args.reps))
            print(f"(c) allocation_ledger of both runs: {job:.1f} ms")
            print(f"goodput of the retry: {run_ledger(child).goodput:.3f}")


if __name__ == "__main__":
    main()
