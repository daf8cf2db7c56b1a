"""What the Flight Recorder costs, to 1%: the demo with it on and off in pairs of runs, the
ring's cost per collective, a rank's dump, and the analysis of a 1,024-rank run's files.

- demo: ``runtime.examples.train`` on 2 gloo ranks (NCCL, one rank per GPU, where torch has
  CUDA: the demo picks its device) under the real mpiexec and capture wrapper, in pairs of runs
  ``EZPZ_FLIGHT_RECORDER=0`` (which empties torch's own ring too) and ``=1`` back to back, the
  order swapped every pair (off on, on off, ...) so a drifting load cancels; ``--together``
  runs a pair's two at once instead, paced over the time both were stepping, so both see the
  same load (a loaded machine; it needs twice ``--ranks`` cores). torch reads
  ``TORCH_FR_BUFFER_SIZE`` once, when the process's recorder is first used, so the ring cannot
  be switched within a run: each run is one side of a pair. A run is ``--run-s`` seconds of
  steps after the warm-up (the step count from an unmeasured run's pace), so its dumps come at
  their rate, one an interval. Its pace is its wall time a step from the records' timestamps
  (everything a step costs, the recorder thread's dumps holding the GIL included; the median
  ``dt`` is printed too, and hides a dump's stall). The cost is the median of the pairs' on/off
  ratios with a bootstrap 95% interval and a sign test; 1% is resolved when the interval is
  narrower than 1% either side (``bench/_paired.py``). ``--control`` runs the same pairs with
  the recorder off in both and a sleep of 1% of a step in one: a known +1%, to see what this
  machine lets the bench resolve.
- ring: what torch's ring adds to one collective, in-process: ``all_reduce`` of 2 doubles (the
  demo's loss reduction; the record does not depend on the size) on a 1-rank gloo group, called
  30 frames deep (torch captures the Python stack of each), in processes with
  ``TORCH_FR_BUFFER_SIZE=0``, the default and torch's own 2,000 (its ring when the variable is
  unset) in turn; the paired difference in us of the
  calling thread's CPU time (where torch records the entry; others' load moves it far less than
  wall time) and of wall time, each with its interval; NCCL on a CUDA tensor too where torch
  has CUDA.
- dump: what the recorder thread costs its rank with a full ring: the progress it computes every
  interval for the node digest (torch's pickled dump without Python stacks, condensed), the
  same from torch's JSON dump, the look while nothing changed (torch's status alone), and a
  full dump (``_dump_fr_trace_json`` cut to the newest 128 entries and written, as when asked),
  each in wall and CPU time and as a share of a core at the interval.
- the demo's collectives a step (from an "on" run's flight file) turn ring and dump into an
  expected cost a step, printed beside the measured one when every part ran.
- analysis: ``flight/`` of a made-up 1,024-rank run (128 entries each, one rank missing from the
  last collective), written once; then reading it, the verdict and the arrival lags, as ``why``
  and ``top`` do, against reading the same number of bytes of plain JSON (``json.loads`` only).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import PY, REPO, bench_parser, mpiexec, print_rerun, scratch, with_repo_path
from _paired import describe, estimate, median_ci, sign_test

from runtime import flight
from runtime.rundir import RunDir

PARTS = ("demo", "ring", "dump", "analysis")
TORCH_DEFAULT_BUFFER = "2000"  # torch 2.13's ring when TORCH_FR_BUFFER_SIZE is unset
WARMUP = 50  # steps left out of a run's pace: compilation of the first steps, the first buckets


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _records(run_dir: Path) -> list[list[dict[str, Any]]]:
    """Each rank's records after the warm-up."""
    ranks = []
    for path in sorted((run_dir / "metrics").glob("b*/rank-*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        ranks.append([r for r in records if r.get("step", 0) >= WARMUP])
    return ranks


def _span(run_dir: Path) -> tuple[float, float]:
    """When the run's ranks stepped after the warm-up: from the first record to the last."""
    ranks = [r for r in _records(run_dir) if r]
    if not ranks:
        raise SystemExit(f"{run_dir}: no step after the {WARMUP} of warm-up: more --steps")
    return min(r[0]["timestamp"] for r in ranks), max(r[-1]["timestamp"] for r in ranks)


def _pace(run_dir: Path, window: tuple[float, float] | None = None) -> tuple[float, float]:
    """Seconds a step after the warm-up (within ``window``, when given), from the records'
    timestamps averaged over the ranks, and the median ``dt`` of those steps."""
    paces, dts = [], []
    for records in _records(run_dir):
        kept = [r for r in records if window is None or window[0] <= r["timestamp"] <= window[1]]
        if len(kept) < 2:
            raise SystemExit(f"{run_dir}: under 2 steps to measure: more --steps or --run-s")
        paces.append((kept[-1]["timestamp"] - kept[0]["timestamp"]) / (len(kept) - 1))
        dts += [r["metrics"]["dt"] for r in kept]
    return statistics.mean(paces), statistics.median(dts)


def _collectives_a_step(run_dir: Path) -> float | None:
    """How many collectives a step of the demo makes: the entries of rank 0's flight file
    against the steps whose records fall in the span of those entries."""
    try:
        entries = json.loads(RunDir(run_dir).flight(0).read_text())["entries"]
    except (OSError, ValueError, KeyError):
        return None
    times = [e["time_created_ns"] / 1e9 for e in entries if e.get("time_created_ns")]
    lines = RunDir(run_dir).metrics(0).read_text().splitlines()
    stamps = [json.loads(line)["timestamp"] for line in lines]
    if len(times) < 2:
        return None
    inside = [s for s in stamps if times[0] <= s <= times[-1]]
    if len(inside) < 2:
        return None
    calls = sum(inside[0] < t <= inside[-1] for t in times)
    return calls / (len(inside) - 1)


def _start_demo(
    run_dir: Path, on: bool, ranks: int, steps: int, sleep_s: float
) -> subprocess.Popen[str]:
    """One demo run started, the recorder ``on`` or off; ``sleep_s`` more a step (the
    control's)."""
    env = with_repo_path({**os.environ, flight.ENABLE_VAR: "1" if on else "0"})
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    argv = [mpiexec(), "-n", str(ranks), PY, "-m", "runtime.capture", "--run-dir", str(run_dir)]
    argv += ["--", PY, "-m", "runtime.examples.train", "--steps", str(steps)]
    argv += ["--log-every", str(steps)]  # the log is not what is measured
    if sleep_s:
        argv += ["--sleep", f"{sleep_s:.6f}"]
    return subprocess.Popen(
        argv,
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _finish_demo(proc: subprocess.Popen[str], run_dir: Path, on: bool) -> None:
    """Wait for the run; its ranks' logs if it failed, and a check that the recorder was as
    asked (``runtime.cleanup()`` has it write its file at the end of every run it is on in)."""
    if proc.wait() != 0:
        logs = sorted((run_dir / "logs").glob("b*/rank-*.log"))
        said = "\n".join(p.read_text()[-1500:] for p in logs)
        raise SystemExit(f"the demo failed ({proc.returncode}):\n{said}")
    wrote = RunDir(run_dir).flight(0).exists()
    if wrote != on:
        raise SystemExit(
            f"{run_dir}: the recorder was {'on' if on else 'off'}; flight file {wrote}"
        )


def _demo_run(run_dir: Path, on: bool, ranks: int, steps: int, sleep_s: float) -> None:
    _finish_demo(_start_demo(run_dir, on, ranks, steps, sleep_s), run_dir, on)


def _steps_for(root: Path, ranks: int, run_s: float) -> tuple[int, float]:
    """Steps that last ``run_s`` after the warm-up, from an unmeasured run's pace: a run should
    see the recorder's dumps (one every interval) at their rate, whatever the machine's speed."""
    run_dir = root / "calibration"
    _demo_run(run_dir, False, ranks, 4 * WARMUP, 0.0)
    pace, _ = _pace(run_dir)
    shutil.rmtree(run_dir, ignore_errors=True)
    return WARMUP + max(2, round(run_s / pace)), pace


def demo(
    root: Path,
    pairs: int,
    steps: int,
    steps_pace: float,
    ranks: int,
    control: bool,
    together: bool,
    found: dict[str, float],
) -> None:
    """Pairs of runs off and on, one after the other or ``together``; with ``control``, both
    off and the "on" run slept 1% of ``steps_pace`` (an unmeasured run's) a step: a known +1%
    that shows what the bench resolves."""
    ratios, median_ratios = [], []
    paces: dict[bool, list[float]] = {False: [], True: []}
    sleep_s = 0.0
    what = "recorder off, and off with a known +1% (the control)" if control else "off/on"
    how = "at the same time" if together else "one after the other, order swapped a pair"
    print(f"demo: {pairs} pairs of {steps}-step runs on {ranks} ranks, {what}, {how}")
    if control:
        sleep_s = steps_pace / 100
        print(f"  control: {sleep_s * 1e3:.3f} ms of sleep a step, 1% of the unmeasured run's")
    for i in range(pairs):
        pace, dt = {}, {}
        order = (False, True) if i % 2 == 0 else (True, False)
        dirs = {on: root / f"demo-{i}-{int(on)}" for on in order}
        if together:  # both at once: the same load on both; paced where both were stepping
            procs = {
                on: _start_demo(dirs[on], on and not control, ranks, steps, sleep_s * on)
                for on in order
            }
            for on in order:
                _finish_demo(procs[on], dirs[on], on and not control)
            spans = [_span(dirs[on]) for on in order]
            window = (max(a for a, _ in spans), min(b for _, b in spans))
            for on in order:
                pace[on], dt[on] = _pace(dirs[on], window)
        else:
            for on in order:
                _demo_run(dirs[on], on and not control, ranks, steps, sleep_s * on)
                pace[on], dt[on] = _pace(dirs[on])
        for on in order:
            paces[on].append(pace[on])
            if on and not control and "collectives" not in found:
                per_step = _collectives_a_step(dirs[on])
                if per_step is not None:
                    found["collectives"] = per_step
            shutil.rmtree(dirs[on], ignore_errors=True)
        ratios.append(pace[True] / pace[False])
        median_ratios.append(dt[True] / dt[False])
        print(
            f"  pair {i + 1:>2}/{pairs}: off {pace[False] * 1e3:.3f} ms, on {pace[True] * 1e3:.3f}"
            f" ms a step: on/off {ratios[-1]:.4f} (median dt {median_ratios[-1]:.4f})",
            flush=True,
        )
    if not control:
        found["step_s"] = statistics.median(paces[False])
    print(
        f"demo pace, off {statistics.median(paces[False]) * 1e3:.3f} ms and on "
        f"{statistics.median(paces[True]) * 1e3:.3f} ms a step (medians of the runs)"
    )
    if pairs < 2:
        print("  one pair gives no interval: --pairs 2 or more")
        return
    for line in describe(estimate(ratios)):
        print("  " + line)
    low, high = median_ci(median_ratios)
    mid = statistics.median(median_ratios)
    print(
        f"  by the median dt (blind to the dumps' stalls): {(mid - 1) * 100:+.2f}%, "
        f"95% CI {(low - 1) * 100:+.2f}% .. {(high - 1) * 100:+.2f}%"
    )


RING_CODE = """
import json, os, statistics, sys, time
import torch, torch.distributed as dist
backend, port = sys.argv[1], sys.argv[2]
device = "cuda" if backend == "nccl" else "cpu"
dist.init_process_group(backend, rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{port}")
t = torch.ones(2, dtype=torch.float64 if device == "cpu" else torch.float32, device=device)
def deep(n, fn):
    return deep(n - 1, fn) if n else fn()
def block():
    w, c = time.perf_counter(), time.thread_time()
    for _ in range(200):
        dist.all_reduce(t)
    if device == "cuda":
        torch.cuda.synchronize()
    return (time.perf_counter() - w) / 200, (time.thread_time() - c) / 200
for _ in range(3):
    deep(30, block)
walls, cpus = zip(*(deep(30, block) for _ in range(30)))
print(json.dumps({"wall": statistics.median(walls), "cpu": statistics.median(cpus)}))
dist.destroy_process_group()
"""


def _ring_once(backend: str, size: str) -> dict[str, float]:
    env = with_repo_path({**os.environ, flight.BUFFER_VAR: size})
    argv = [PY, "-c", RING_CODE, backend, str(_free_port())]
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the ring probe failed ({backend}, ring {size}):\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def ring(pairs: int, found: dict[str, float]) -> None:
    """The ring's cost a collective, by the caller's CPU time (torch records the entry, its
    Python stack included, in the calling thread; a busy machine moves CPU time far less than
    wall time) and by wall time: ours, and torch's own 2,000 (what it keeps when
    ``TORCH_FR_BUFFER_SIZE`` is unset), each against none, in rounds of one process each
    whose order turns every round."""
    backends = ["gloo"]
    probe = [PY, "-c", "import torch; print(torch.cuda.is_available())"]
    if subprocess.run(probe, capture_output=True, text=True).stdout.strip() == "True":
        backends.append("nccl")
    sizes = ["0", str(flight.DEFAULT_BUFFER), TORCH_DEFAULT_BUFFER]
    for backend in backends:
        runs: dict[str, list[dict[str, float]]] = {size: [] for size in sizes}
        for i in range(pairs):
            for size in sizes[i % 3 :] + sizes[: i % 3]:
                runs[size].append(_ring_once(backend, size))
        print(
            f"ring ({backend}): all_reduce of 2 numbers on 1 rank, 30 frames deep, {pairs} rounds "
            f"of processes with rings of {', '.join(sizes)} entries:"
        )
        for size in sizes[1:]:
            for kind in ("cpu", "wall"):
                offs = [r[kind] for r in runs["0"]]
                ons = [r[kind] for r in runs[size]]
                diffs = [(on - off) * 1e6 for on, off in zip(ons, offs, strict=True)]
                low, high = median_ci(diffs)
                above, p_value = sign_test([on / off for on, off in zip(ons, offs, strict=True)])
                diff = statistics.median(diffs)
                print(
                    f"  {size:>4} {kind:>4}: off {statistics.median(offs) * 1e6:.2f} us a "
                    f"collective; the ring adds {diff:+.2f} us (95% CI {low:+.2f} .. {high:+.2f}; "
                    f"more in {above} of {pairs}, sign test p = {p_value:.3g})"
                )
                if kind == "cpu":
                    print(
                        f"            so it reaches 1% of a step only where a step makes more "
                        f"than one collective every {max(diff, 0) * 100 / 1e3:.2f} ms"
                    )
                if backend == "gloo" and kind == "cpu" and size == sizes[1]:
                    found["ring_s"] = diff / 1e6


DUMP_CODE = """
import json, os, statistics, time
from runtime import flight
os.environ[flight.BUFFER_VAR] = str(flight.DEFAULT_BUFFER)
import torch, torch.distributed as dist
dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{os.environ['PORT']}")
big, small = torch.ones(120064), torch.ones(2, dtype=torch.float64)  # the demo's two a step
def step():
    dist.all_reduce(big)
    dist.all_reduce(small)
for _ in range(flight.DEFAULT_BUFFER):
    step()
path = os.path.join(os.environ["OUT"], "rank-00000.json")
def full():  # a full dump, written as an asked one is
    found = flight._dump()
    record = {"rank": 0, "pid": os.getpid(), "time": time.time(), **found, "interval_s": 5.0}
    flight._write(path, json.dumps(record, separators=(",", ":")))
def timed(fn, before=None, rounds=60):
    walls, cpus = [], []
    for _ in range(rounds):
        if before is not None:
            before()
        w, c = time.perf_counter(), time.thread_time()
        fn()
        cpus.append(time.thread_time() - c); walls.append(time.perf_counter() - w)
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpus)}
looked = [flight._progress_now(None, 5.0)]
def progress():  # what the thread does each interval after a step: the entries changed
    looked[0] = flight._progress_now(None, 5.0)
def unchanged():  # ... and while nothing changed (a hung rank)
    looked[0] = flight._progress_now(looked[0], 5.0)
def json_progress():  # the same progress from torch's JSON dump instead of its pickled one
    flight.progress([json.loads(flight._recorders(dist)[0][0](True, False))], time.time(), 5.0)
got = {
    "full": timed(full),
    "progress": timed(progress, step),
    "json_progress": timed(json_progress, step),
    "unchanged": timed(unchanged),
    "bytes": os.path.getsize(path),
    "progress_bytes": len(json.dumps(looked[0][1], separators=(",", ":"))),
}
print(json.dumps(got))
dist.destroy_process_group()
"""


def dump(root: Path, found: dict[str, float]) -> None:
    """What the recorder thread costs its rank: a full dump (written only when asked and at the
    end), against the progress it computes every interval (torch's pickled dump without Python
    stacks, condensed: :func:`runtime.flight.progress`), the same from torch's JSON dump, and
    the look of a rank where nothing changed (torch's status alone), in one process."""
    env = with_repo_path({**os.environ, "OUT": str(root), "PORT": str(_free_port())})
    proc = subprocess.run([PY, "-c", DUMP_CODE], env=env, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the dump probe failed:\n{proc.stderr[-2000:]}")
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    every = flight.DEFAULT_INTERVAL_S
    print(
        f"dump: a ring of {flight.DEFAULT_BUFFER} entries (medians of 60; shares of a core at "
        f"one every {every:g} s; the GIL is held for the wall time):"
    )
    rows = (
        ("full", f"full dump, newest {flight.KEEP} written ({got['bytes']} bytes), when asked"),
        ("progress", f"progress ({got['progress_bytes']} bytes to the node digest), pickled"),
        ("json_progress", "progress from torch's JSON dump instead"),
        ("unchanged", "progress while nothing changed (torch's status alone)"),
    )
    for key, what in rows:
        wall, cpu = got[key]["wall"], got[key]["cpu"]
        print(
            f"  {what}: {wall * 1e3:.3f} ms wall, {cpu * 1e3:.3f} ms CPU = "
            f"{cpu / every * 100:.4f}% of a core"
        )
    full, prog = got["full"]["cpu"], got["progress"]["cpu"]
    print(
        f"  progress/full dump: {prog / full:.2f}x CPU; JSON/pickled progress: "
        f"{got['json_progress']['cpu'] / prog:.2f}x; unchanged/changed: "
        f"{got['unchanged']['cpu'] / prog:.4f}x"
    )
    found["dump_s"] = got["progress"]["wall"]


def expected(found: dict[str, float]) -> None:
    """The cost a step the parts add up to, beside the measured one."""
    if not {"collectives", "step_s", "ring_s", "dump_s"} <= found.keys():
        return
    ring_share = found["collectives"] * found["ring_s"] / found["step_s"]
    dump_share = found["dump_s"] / flight.DEFAULT_INTERVAL_S
    print(
        f"expected from the parts: {found['collectives']:.2f} collectives a step x "
        f"{found['ring_s'] * 1e6:.2f} us / {found['step_s'] * 1e3:.3f} ms = "
        f"{ring_share * 100:.3f}% (ring) + {dump_share * 100:.3f}% (progress, at most) = "
        f"{(ring_share + dump_share) * 100:.3f}% a step"
    )


def analysis(root: Path) -> None:
    sys.path.insert(0, str(REPO))
    from ezpz_tui.core.watching.collectives import arrival_lags, read_flights, verdict
    from tests.fixtures.flights import entry, record, write_flights

    world, t0 = 1024, time.time() - 600
    records = {}
    for r in range(world):
        last = 128 if r == 517 else 129
        records[r] = record(r, [entry(s, t0 + s * 0.1) for s in range(2, last + 1)], t0 + 30)
    write_flights(root, records)
    size = sum(p.stat().st_size for p, _ in RunDir(root).flights())
    start = time.perf_counter()
    flights = read_flights(root)
    read_s = time.perf_counter() - start
    start = time.perf_counter()
    found = verdict(flights, time.time(), world)
    lags = arrival_lags(flights.dumps, world)
    match_s = time.perf_counter() - start
    assert found is not None and found.missing == (517,), found
    assert lags.slow == frozenset()
    start = time.perf_counter()
    for path, _ in RunDir(root).flights():
        json.loads(path.read_bytes())
    base_s = time.perf_counter() - start
    print(f"analysis of 1,024 ranks x 128 entries ({size / 1e6:.1f} MB):")
    print(f"  read {read_s:.2f} s, verdict + lags {match_s:.2f} s")
    print(f"  json.loads of the same files {base_s:.2f} s: read/plain {read_s / base_s:.1f}x")


def main() -> None:
    parser = bench_parser(__doc__, PARTS)
    parser.add_argument("--pairs", type=int, default=20, help="demo: pairs of runs (off, on)")
    parser.add_argument(
        "--run-s", type=float, default=8.0, help="demo: seconds of steps a run (sets --steps)"
    )
    parser.add_argument("--steps", type=int, help="demo: steps a run (default: from --run-s)")
    parser.add_argument("--ranks", type=int, default=2, help="demo: ranks (one per GPU on CUDA)")
    parser.add_argument(
        "--control", action="store_true", help="demo: off vs off + a known 1%% (no recorder)"
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="demo: a pair's two runs at the same time (a loaded machine; needs 2x --ranks cores)",
    )
    parser.add_argument("--ring-pairs", type=int, default=9, help="ring: rounds of processes")
    args = parser.parse_args()
    if min(args.pairs, args.ring_pairs, args.ranks) < 1 or args.run_s <= 0:
        parser.error("--pairs, --ring-pairs and --ranks must be 1 or more, --run-s above 0")
    if args.steps is not None and args.steps <= WARMUP + 1:
        parser.error(f"--steps must be more than {WARMUP + 1} (the warm-up is {WARMUP})")
    found: dict[str, float] = {}
    with scratch("flight-bench-", args.keep) as root:
        if args.only in (None, "ring"):
            ring(args.ring_pairs, found)
        if args.only in (None, "dump"):
            dump(root, found)
        if args.only in (None, "analysis"):
            analysis(root)
        if args.only in (None, "demo"):
            steps, pace = _steps_for(root, args.ranks, args.run_s)
            steps = args.steps or steps
            together = args.together
            demo(root, args.pairs, steps, pace, args.ranks, args.control, together, found)
        expected(found)
    print_rerun("flight_bench.py", args)


if __name__ == "__main__":
    main()
