"""A 4,096-rank hang's verdict: from the node digests' progress, beside the ranks' own files.

A real hung gloo job (``tests/ranks/skips_a_collective.py`` on 4 ranks: rank 3 never enters the
600th all_reduce, so every rank's Flight Recorder holds a full ring) runs under ``ezpz-tui
launch``. Once its node digest shows the hang, every rank is asked for its full dump (its FIFO,
as ``stacks`` asks), so both readings have what they need; then its ranks are stopped (SIGSTOP:
the run stays live, its supervisor up, nothing is rewritten) and its directory grown in place to
``--ranks`` ranks (``run.toml``'s world size too): for each new rank a status, a Flight
Recorder file and its progress in a node digest of ``--per-node`` ranks (Aurora's 12 by
default: 341 digests and the real node's for 4,096), copied from the real waiting ranks 0-2,
so rank 3 alone is missing.

Then, in ``--rounds`` rounds whose order turns every round, the verdict of the live run timed
from outside, as a person sees it: ``ezpz-tui why RUN --json``'s wall time with the node digests
(re-dated to now, as their live writers keep them) and with the per-rank files alone (``nodes/``
moved aside: an older run, or digests turned off); and the verdict alone in-process
(``read_collectives``) both ways. Each checks the verdict names rank 3. Prints the medians, the
files/digests ratio of each round, and the target (2 s at 4,096 ranks).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import PY, REPO, bench_parser, clean_env, ezpz_tui, print_rerun, scratch

from runtime import flight
from runtime.rundir import RunDir

SKIPPED = 600  # the all_reduce rank 3 never enters: past the 128 entries a dump keeps
INTERVAL_S = 1.0  # the ranks' Flight Recorder interval
TARGET_S = 2.0
PARTS = ("why", "function")


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.2)


def _progress(run: Path) -> dict[int, dict]:
    """Each rank's default-group progress in the run's node digest (none yet: {})."""
    try:
        [path] = RunDir(run).node_digests()
        ranks = json.loads(path.read_text())["ranks"]
    except (OSError, ValueError):
        return {}
    found = {}
    for rank, entry in ranks.items():
        for group in ((entry.get("flight") or {}).get("groups") or {}).values():
            if group.get("desc") == "default_pg":
                found[int(rank)] = group
    return found


def _hung(run: Path) -> bool:
    ranks = _progress(run)
    return len(ranks) == 4 and [ranks[r]["entered"] for r in range(4)] == [SKIPPED] * 3 + [
        SKIPPED - 1
    ]


def _grow(run: Path, ranks: int, per_node: int) -> None:
    """The live run's directory grown to ``ranks``: statuses, Flight Recorder files and node
    digests of the new ranks, from the real waiting ranks 0-2."""
    rd = RunDir(run)
    toml = rd.run_toml.read_text()
    rd.run_toml.write_text(toml.replace("\nworld_size = 4\n", f"\nworld_size = {ranks}\n"))
    [real_digest] = rd.node_digests()
    digest = json.loads(real_digest.read_text())
    statuses = {r: json.loads(rd.status(r).read_text()) for r in range(3)}
    dumps = {r: json.loads(rd.flight(r).read_text()) for r in range(3)}
    for status in statuses.values():
        status["world_size"] = ranks
    for rank in range(4, ranks):
        source = rank % 3
        node = (rank - 4) // per_node + 1
        status = {**statuses[source], "rank": rank, "host": f"node{node:05d}"}
        rd.status(rank).write_text(json.dumps(status))
        rd.flight(rank).write_text(json.dumps({**dumps[source], "rank": rank}))
    for node in range(1, (ranks - 4 + per_node - 1) // per_node + 1):
        host = f"node{node:05d}"
        first = 4 + (node - 1) * per_node
        members = range(first, min(first + per_node, ranks))
        data = {**digest, "host": host, "writer": {"rank": first, "pid": 1}}
        data["ranks"] = {str(r): digest["ranks"][str(r % 3)] for r in members}
        path = rd.node_digest(host)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))


def _redate(run: Path) -> None:
    """Every node digest written now, as live writers keep them (the ranks are stopped)."""
    now = time.time()
    for path in RunDir(run).node_digests():
        data = json.loads(path.read_text())
        data["written"] = now
        path.write_text(json.dumps(data))


def _why(run: Path, env: dict[str, str]) -> tuple[float, dict]:
    start = time.perf_counter()
    done = subprocess.run(
        [*ezpz_tui(), "why", run.name, "--json"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    took = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"why failed: {done.stderr[-2000:]}")
    return took, json.loads(done.stdout)


def _function(run: Path) -> tuple[float, dict]:
    from ezpz_tui.core.watching.collectives import read_collectives

    start = time.perf_counter()
    reading = read_collectives(run, True, time.time())
    took = time.perf_counter() - start
    found = reading.verdict.to_json() if reading.verdict else {}
    return took, {"collectives": found, "collective_notes": list(reading.notes)}


def _check(said: dict, how: str) -> None:
    found = said.get("collectives") or {}
    if (found.get("kind"), found.get("missing"), found.get("seq")) != ("missing", [3], SKIPPED):
        raise SystemExit(f"{how}: not the hang's verdict: {json.dumps(said)[:2000]}")


def measure(run: Path, env: dict[str, str], rounds: int, parts: tuple[str, ...]) -> None:
    nodes, aside = RunDir(run).nodes_dir, run / "nodes.aside"
    for part in parts:
        times: dict[str, list[float]] = {"digests": [], "files": []}
        for i in range(rounds):
            for way in ("digests", "files") if i % 2 == 0 else ("files", "digests"):
                if way == "files":
                    nodes.rename(aside)
                else:
                    _redate(run)
                try:
                    took, said = _why(run, env) if part == "why" else _function(run)
                finally:
                    if way == "files":
                        aside.rename(nodes)
                _check(said, f"{part} from the {way}")
                times[way].append(took)
            print(
                f"  round {i + 1}/{rounds}: from the digests {times['digests'][-1]:.3f} s, "
                f"from the files {times['files'][-1]:.3f} s: files/digests "
                f"{times['files'][-1] / times['digests'][-1]:.1f}x",
                flush=True,
            )
        digests, files = statistics.median(times["digests"]), statistics.median(times["files"])
        what = "`ezpz-tui why RUN --json`, wall" if part == "why" else "read_collectives"
        print(
            f"{what}: from the node digests {digests:.3f} s, from the per-rank files "
            f"{files:.3f} s (medians): files/digests {files / digests:.1f}x; target "
            f"{TARGET_S:g} s: {'met' if digests <= TARGET_S else 'NOT met'}"
        )
        if part == "why":
            print(f"  of which not the collectives: {_rest(run, rounds)}")


def _rest(run: Path, rounds: int) -> str:
    """What else ``why`` of a live run reads, timed in-process: whether it failed (every
    rank's status), and the interpreter's start with the CLI's imports."""
    from ezpz_tui.core.watching.failure import explain

    took = []
    for _ in range(rounds):
        start = time.perf_counter()
        explain(run)
        took.append(time.perf_counter() - start)
    argv = [PY, "-c", "import ezpz_tui.cli, ezpz_tui.core.watching.why"]
    start = time.perf_counter()
    subprocess.run(argv, cwd=REPO, env=clean_env(run.parent), check=True)
    started = time.perf_counter() - start
    return (
        f"explain() (every rank's status) {statistics.median(took):.3f} s, the start and "
        f"imports {started:.3f} s"
    )


def main() -> None:
    parser = bench_parser(__doc__, PARTS)
    parser.add_argument("--ranks", type=int, default=4096, help="ranks the run is grown to")
    parser.add_argument("--per-node", type=int, default=12, help="ranks a grown node digest holds")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of both readings")
    args = parser.parse_args()
    if args.ranks < 5 or args.per_node < 1 or args.rounds < 1:
        parser.error("--ranks must be 5 or more, --per-node and --rounds 1 or more")
    parts = PARTS if args.only is None else (args.only,)
    with scratch("hang-verdict-bench-", args.keep) as root:
        outputs, marks = root / "outputs", root / "marks"
        marks.mkdir()
        env = clean_env(outputs)
        env.update(EZPZ_FLIGHT_INTERVAL_S=str(INTERVAL_S), EZPZ_SKIPPED=str(SKIPPED))
        script = REPO / "tests" / "ranks" / "skips_a_collective.py"
        argv = [*ezpz_tui(), "launch", "--ppn", "4", "--quiet", "--", PY, str(script), str(marks)]
        launch = subprocess.Popen(
            argv,
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        sys.path.insert(0, str(REPO))
        from tests.procs import processes_of

        stopped: list[int] = []
        try:
            _wait(lambda: outputs.is_dir() and any(outputs.iterdir()), 120, "the run directory")
            [run] = [p for p in outputs.iterdir() if p.is_dir()]
            _wait(lambda: _hung(run), 300, "the hang in the node digest")
            for rank in range(4):
                why_not = flight.ask(str(RunDir(run).flight_request(rank)))
                if why_not:
                    raise SystemExit(f"rank {rank}: {why_not}")
            _wait(lambda: all(RunDir(run).flight(r).exists() for r in range(4)), 60, "dumps")
            time.sleep(3 * INTERVAL_S)  # the others have waited two intervals, digested
            for pid in processes_of(run):
                if pid != launch.pid:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGSTOP)
                        stopped.append(pid)
            start = time.perf_counter()
            _grow(run, args.ranks, args.per_node)
            size = sum(p.stat().st_size for p in RunDir(run).flight_dir.glob("rank-*.json"))
            digests = RunDir(run).node_digests()
            print(
                f"a hung 4-rank gloo run grown to {args.ranks} ranks in "
                f"{time.perf_counter() - start:.1f} s: {len(digests)} node digests "
                f"({sum(p.stat().st_size for p in digests) / 1e6:.2f} MB), {args.ranks} "
                f"Flight Recorder files ({size / 1e6:.0f} MB)"
            )
            measure(run, env, args.rounds, parts)
        finally:
            for pid in stopped:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGCONT)
            launch.send_signal(signal.SIGTERM)
            try:
                launch.wait(60)
            except subprocess.TimeoutExpired:
                launch.kill()
            for run in outputs.iterdir() if outputs.is_dir() else ():
                for pid in processes_of(run):
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                # The finalizer writes the run's report last, after the supervisor has gone:
                # the scratch goes once it has (else it makes the run's folder again).
                with contextlib.suppress(SystemExit):
                    _wait(RunDir(run).report_md.is_file, 300, "the finalizer")
            shutil.rmtree(marks, ignore_errors=True)
    print_rerun("hang_verdict_bench.py", args)


if __name__ == "__main__":
    main()
