"""``ezpz-tui top`` over a 1,024-rank run: the reader in-process and the CLI end to end.

The run directory holds what a live job leaves: a status file, a telemetry file of 30 samples
(a minute at the default interval) and a metrics file of 200 records for every rank, 16 hosts
of 64. (a) :func:`read_top` plus the JSON it prints, in-process, against the floor of reading
the same 3,072 files' last few KB with no parsing (median ms of interleaved repeats, ratio);
(b) ``ezpz-tui top RUN --json`` as a subprocess against ``ezpz-tui runs --json`` on the same
outputs (the CLI's own start-up) and ``python -c pass`` (median ms, ratios).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import PY, REPO, bench_parser, print_rerun, scratch

from ezpz_tui.core.watching.top import RECORDS_TAIL, SAMPLE_TAIL, read_top
from runtime.rundir import RankState, RankStatus, RunDir, RunState, State, write_state, write_status
from runtime.telemetry.record import Sample

NOW = time.time()


def make_run(outputs: Path, ranks: int) -> Path:
    run = outputs / "20261126-120000-000-tp1pp1cp1"
    RunDir(run).make_folders(ranks)
    RunDir(run).telemetry_dir.mkdir(exist_ok=True)
    write_state(run, RunState(state=State.RUNNING, updated=NOW))
    for rank in range(ranks):
        status = RankStatus(rank, rank % 64, ranks, f"x{rank // 64:04d}", state=RankState.RUNNING)
        write_status(run, status)
        samples = (
            Sample(NOW - 2 * i, 100.0 + i, 3 << 30, 1, "nvml:0", 90.0, 40 << 30, 80 << 30, 400, 60)
            for i in range(30, 0, -1)
        )
        RunDir(run).telemetry(rank).write_text("".join(s.to_json() + "\n" for s in samples))
        dt = 0.4 if rank == 77 else 0.2
        lines = (
            json.dumps(
                {
                    "timestamp": NOW - 40 + i * dt,
                    "rank": rank,
                    "step": i,
                    "metrics": {"loss": 2.0, "dt": dt},
                }
            )
            for i in range(200)
        )
        RunDir(run).metrics(rank).write_text("\n".join(lines) + "\n")
    return run


def floor(run: Path) -> None:
    """Every file the reader opens, its tail read and dropped."""
    for folder, tail in (("telemetry", SAMPLE_TAIL), ("metrics", RECORDS_TAIL), ("status", 4096)):
        for path in (run / folder).glob("*/rank-*"):
            with open(path, "rb") as fh:
                size = fh.seek(0, 2)
                fh.seek(max(0, size - tail))
                fh.read(tail)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = bench_parser(__doc__, ("core", "cli"))
    parser.add_argument("--ranks", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    print_rerun("top_bench.py", args)
    with scratch("top-bench-", args.keep) as tmp:
        run = make_run(tmp / "outputs", args.ranks)
        if args.only in (None, "core"):
            ours, base = [], []
            for _ in range(args.reps):
                base.append(timed(lambda: floor(run)))
                ours.append(timed(lambda: json.dumps(read_top(run).to_json(NOW))))
            top = read_top(run)
            assert [r.rank for r in top.rows if r.slow] == [77], "the bench's straggler"
            o, b = statistics.median(ours), statistics.median(base)
            print(
                f"core: read_top + json over {args.ranks} ranks {o:.1f} ms (best {min(ours):.1f})"
            )
            print(f"      floor (tails read, no parsing) {b:.1f} ms; ratio {o / b:.2f}x")
        if args.only in (None, "cli"):
            cli = str(Path(PY).parent / "ezpz-tui")
            outputs = str(run.parent)
            commands = {
                "top --json": [cli, "top", run.name, "--json", "--outputs", outputs],
                "runs --json": [cli, "runs", "--json", "--outputs", outputs],
                "python -c pass": [PY, "-c", "pass"],
            }
            times: dict[str, list[float]] = {name: [] for name in commands}
            for _ in range(args.reps):
                for name, argv in commands.items():
                    start = time.perf_counter()
                    subprocess.run(argv, cwd=REPO, check=True, stdout=subprocess.DEVNULL)
                    times[name].append((time.perf_counter() - start) * 1000)
            medians = {name: statistics.median(t) for name, t in times.items()}
            top_ms = medians["top --json"]
            for name, ms in medians.items():
                print(f"cli:  {name:<15} {ms:7.1f} ms  (top/this {top_ms / ms:.2f}x)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
