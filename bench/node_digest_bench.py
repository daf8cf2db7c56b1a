"""``ezpz-tui top RUN --json`` of a live N-rank run: rows from node digests vs every rank's files.

``python bench/node_digest_bench.py --src RUN [--ranks N] [--ranks-per-node P] [--rounds K]``
(or ``--grown DIR`` for a run grown before)

``RUN`` (a finished run) is grown to N ranks on N / P nodes (12 a node: Aurora's) with
``bench/grow_run.py``, then made live as a reader sees a live run: its ``state.json`` says
``running``, and each node has the digest its writer would keep (``runtime/node_digest.py``'s
format: each rank's newest step, its median step time and its newest telemetry sample, taken from
the grown files), rewritten just before each round as a live writer rewrites it. Rounds alternate:
with the digests, and with ``nodes/`` moved aside (the reader then reads every rank's files, as for
a run from before node digests or one whose writers all died). Two figures each round: the command's
wall time, as a person sees it, and in this process the read of the rows alone (``top.from_digests``
after ``read_node_digests``, vs ``top.from_rank_files``), the part the digests replace; ratios
paired round by round. What is not the digests' part stays in both commands: ``top`` still reads
every rank's Flight Recorder file for arrival lags.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from _common import PY, REPO, bench_parser, print_rerun
from _paired import describe, estimate

from ezpz_tui.core.watching.node_digests import read_node_digests
from ezpz_tui.core.watching.telemetry import read_last
from ezpz_tui.core.watching.top import (
    RECORDS_TAIL,
    SAMPLE_TAIL,
    from_digests,
    from_rank_files,
)
from runtime.record_columns import parse_columns
from runtime.rundir import RunDir, State, read_state, read_statuses, write_state

PARTS = ("digests", "rank-files")


def _grow(src: Path, dst: Path, ranks: int, per_node: int) -> Path:
    grow = [PY, str(REPO / "bench" / "grow_run.py"), str(src), str(dst), str(ranks)]
    subprocess.run(
        [*grow, "--ranks-per-node", str(per_node)],
        check=True,
        cwd=REPO,
    )
    return dst


def _make_live(run: RunDir) -> None:
    state = read_state(run.path)
    write_state(run.path, replace(state, state=State.RUNNING, end=None, exit_code=None))


def _digests(run: RunDir) -> dict[str, dict]:
    """Each host's digest body, from its ranks' newest files."""
    from ezpz_tui.core.watching.telemetry import read_tail

    by_host: dict[str, dict] = {}
    for status in read_statuses(run.path):
        host = status.host or "?"
        sample = read_last(run.telemetry(status.rank), SAMPLE_TAIL)
        data = read_tail(run.metrics(status.rank), RECORDS_TAIL) or b""
        columns = parse_columns(data, status.rank).columns.get(status.rank)
        entry: dict = {"t": time.time(), "pid": status.pid, "state": {"state": "running"}}
        if sample is not None:
            entry["telemetry"] = {k: v for k, v in vars(sample).items() if v is not None}
        if columns is not None and columns.steps:
            metrics = {k: v[-1] for k, v in columns.metrics.items() if v[-1] == v[-1]}
            entry["step"] = {
                "step": columns.steps[-1],
                "time": columns.timestamps[-1],
                "dt": metrics.get("dt"),
                "dt_median": metrics.get("dt"),
                "metrics": metrics,
            }
        by_host.setdefault(host, {})[str(status.rank)] = entry
    return by_host


def _write_digests(run: RunDir, bodies: dict[str, dict]) -> None:
    now = time.time()
    for host, ranks in bodies.items():
        digest = {
            "format": 1,
            "host": host,
            "written": now,
            "writer": {"rank": int(min(ranks))},
            "interval_s": 2.0,
            "heartbeat_s": 10.0,
            "ranks": ranks,
        }
        path = run.node_digest(host)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(digest, separators=(",", ":")))


def _top(run: RunDir) -> tuple[float, dict]:
    env = {**os.environ, "EZPZ_OUTPUTS": str(run.path.parent), "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    done = subprocess.run(
        [PY, "-m", "ezpz_tui", "top", str(run.path), "--json"],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
        check=True,
    )
    return time.perf_counter() - t0, json.loads(done.stdout)


def main() -> int:
    parser = bench_parser(__doc__, PARTS)
    parser.add_argument("--src", type=Path, help="a finished run to grow (or --grown)")
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--ranks-per-node", type=int, default=12, help="12: Aurora's")
    parser.add_argument("--rounds", type=int, default=5, help="pairs of rounds")
    parser.add_argument("--grown", type=Path, help="a run grown before (made live here)")
    args = parser.parse_args()
    if (args.src is None) == (args.grown is None):
        parser.error("name either --src RUN to grow or --grown DIR grown before")
    print_rerun("node_digest_bench.py", args)
    scratch = Path(tempfile.mkdtemp(prefix="digest-bench-"))
    try:
        grown = args.grown or _grow(
            args.src, scratch / "outputs" / args.src.name, args.ranks, args.ranks_per_node
        )
        run = RunDir(grown)
        _make_live(run)
        bodies = _digests(run)
        aside = run.path / "nodes.aside"
        world = sum(len(ranks) for ranks in bodies.values())
        times: dict[str, list[float]] = {name: [] for name in PARTS}
        rows: dict[str, list[float]] = {name: [] for name in PARTS}
        for _ in range(args.rounds):
            if aside.exists():
                aside.rename(run.nodes_dir)
            _write_digests(run, bodies)
            took, said = _top(run)
            assert said["node_digests"] and not said["node_digests"]["stale_hosts"], said
            times["digests"].append(took)
            t0 = time.perf_counter()
            from_digests(run, read_node_digests(run.path, live=True), world)
            rows["digests"].append(time.perf_counter() - t0)
            run.nodes_dir.rename(aside)
            took, said = _top(run)
            assert said["node_digests"] is None
            times["rank-files"].append(took)
            t0 = time.perf_counter()
            from_rank_files(run, ended=False)
            rows["rank-files"].append(time.perf_counter() - t0)
        ranks = len(said["ranks"])
        print(f"\nlive {ranks}-rank run on {len(bodies)} nodes, {args.rounds} pairs")
        for title, figures in (("top --json, wall", times), ("the rows' read alone", rows)):
            print(title)
            for name, values in figures.items():
                med, low = statistics.median(values), min(values)
                print(f"  {name:<11} median {med:7.3f} s  min {low:7.3f} s")
            ratios = [a / b for a, b in zip(figures["digests"], figures["rank-files"], strict=True)]
            if len(ratios) >= 2:
                print("  digests / rank-files, paired by round:")
                for line in describe(estimate(ratios), 0.10):
                    print("    " + line)
    finally:
        if not args.keep or args.grown is not None:  # a grown run named is the caller's
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
