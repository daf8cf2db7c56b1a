"""What the Flight Recorder costs: the demo's step time with it on and off, a rank's dump, and
the analysis of a 1,024-rank run's files.

- demo: ``runtime.examples.train`` on 2 gloo ranks under the real mpiexec and capture wrapper,
  ``EZPZ_FLIGHT_RECORDER=1`` and ``=0`` alternated (off, on, off, on, ...); each run's step time
  is the median ``dt`` its ranks recorded after the first 20 steps. The ratio on/off is the cost
  (the recorder's ring in torch plus the rank's thread writing its file every interval). On a
  loaded machine wall time swings by half between runs: the CPU time of each whole run (every
  process of both ranks, from ``getrusage``) is given too, which others' load moves far less.
- dump: one rank's ``runtime.flight`` dump (torch's ``_dump_fr_trace_json`` of a full ring (512
  entries), cut to the newest 128 entries and written) in a 1-rank gloo group, against one
  ``all_reduce`` of the demo's size as the baseline.
- analysis: ``flight/`` of a made-up 1,024-rank run (128 entries each, one rank missing from the
  last collective), written once; then reading it, the verdict and the arrival lags, as ``why``
  and ``top`` do, against reading the same number of bytes of plain JSON (``json.loads`` only).
"""

from __future__ import annotations

import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import PY, REPO, bench_parser, mpiexec, print_rerun, scratch, with_repo_path

PARTS = ("demo", "dump", "analysis")


def _median_dt(run_dir: Path, skip: int) -> float:
    dts = []
    for path in sorted((run_dir / "metrics").glob("rank-*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("step", 0) > skip and "dt" in record["metrics"]:
                dts.append(record["metrics"]["dt"])
    return statistics.median(dts)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def demo(root: Path, rounds: int, steps: int) -> None:
    times: dict[str, list[float]] = {"0": [], "1": []}
    cpu: dict[str, list[float]] = {"0": [], "1": []}  # the whole run's, every rank's processes
    for i in range(rounds):
        for on in ("0", "1"):
            run_dir = root / f"demo-{i}-{on}"
            env = with_repo_path({**os.environ, "EZPZ_FLIGHT_RECORDER": on})
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
            argv = [mpiexec(), "-n", "2", PY, "-m", "runtime.capture", "--run-dir", str(run_dir)]
            argv += ["--", PY, "-m", "runtime.examples.train", "--steps", str(steps)]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            if done.returncode != 0:
                logs = sorted((run_dir / "logs").glob("rank-*.log"))
                said = "\n".join(p.read_text()[-1500:] for p in logs)
                raise SystemExit(f"the demo failed ({done.returncode}):\n{said}")
            if on == "1":
                assert (run_dir / "flight" / "rank-00000.json").exists(), "no flight file"
            times[on].append(_median_dt(run_dir, 20))
            cpu[on].append(used)
    off, on = statistics.median(times["0"]), statistics.median(times["1"])
    print(f"demo step time, median of {rounds} runs of {steps} steps on 2 ranks:")
    print(f"  recorder off {off * 1e3:.2f} ms, on {on * 1e3:.2f} ms: on/off {on / off:.3f}")
    print(f"  each run: off {[round(t * 1e3, 2) for t in times['0']]} ms")
    print(f"            on  {[round(t * 1e3, 2) for t in times['1']]} ms")
    off, on = statistics.median(cpu["0"]), statistics.median(cpu["1"])
    print("  CPU time of each whole run (both ranks, start-up included):")
    print(f"  recorder off {off:.2f} s, on {on:.2f} s: on/off {on / off:.3f}")
    print(f"  each run: off {[round(c, 2) for c in cpu['0']]} s")
    print(f"            on  {[round(c, 2) for c in cpu['1']]} s")


DUMP_CODE = """
import os, time, json, statistics
from runtime import flight
os.environ["TORCH_FR_BUFFER_SIZE"] = str(flight.DEFAULT_BUFFER)
import torch, torch.distributed as dist
dist.init_process_group("gloo", rank=0, world_size=1, init_method="tcp://127.0.0.1:29671")
t = torch.ones(1000)
for _ in range(2100):
    dist.all_reduce(t)
def timed(fn, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter(); fn(); out.append(time.perf_counter() - t0)
    return statistics.median(out)
base = timed(lambda: dist.all_reduce(t), 200)
path = os.path.join(os.environ["OUT"], "rank-00000.json")
def dump():
    flight._write(path, json.dumps(flight._dump()))
cost = timed(dump, 50)
print(f"one all_reduce of 1000 floats (1 rank): {base * 1e6:.0f} us")
ring, size = flight.DEFAULT_BUFFER, os.path.getsize(path)
print(f"one dump ({ring}-entry ring, {flight.KEEP} written, {size} bytes): "
      f"{cost * 1e3:.2f} ms = {cost / base:.0f}x the all_reduce")
print(f"at the default 5 s interval: {cost / 5 * 100:.3f}% of one core")
dist.destroy_process_group()
"""


RECORD_CODE = """
import os, time, statistics
import torch, torch.distributed as dist
dist.init_process_group("gloo", rank=0, world_size=1, init_method="tcp://127.0.0.1:29672")
t = torch.ones(1000)
for _ in range(200):
    dist.all_reduce(t)
out = []
for _ in range(20):
    t0 = time.perf_counter()
    for _ in range(200):
        dist.all_reduce(t)
    out.append((time.perf_counter() - t0) / 200)
print(statistics.median(out))
dist.destroy_process_group()
"""


def dump(root: Path) -> None:
    env = with_repo_path({**os.environ, "OUT": str(root)})
    proc = subprocess.run([PY, "-c", DUMP_CODE], env=env, cwd=REPO, capture_output=True, text=True)
    print(proc.stdout.strip() or proc.stderr[-2000:])
    # What recording costs each collective: the ring off (0) and on, alternated.
    each: dict[str, list[float]] = {"0": [], "512": []}
    for _ in range(5):
        for size in each:
            env = with_repo_path({**os.environ, "TORCH_FR_BUFFER_SIZE": size})
            argv = [PY, "-c", RECORD_CODE]
            done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True)
            each[size].append(float(done.stdout.strip().splitlines()[-1]))
    off, on = statistics.median(each["0"]), statistics.median(each["512"])
    print(
        f"one all_reduce of 1000 floats (1 rank), ring off {off * 1e6:.1f} us, on "
        f"{on * 1e6:.1f} us: on/off {on / off:.3f} (+{(on - off) * 1e6:.1f} us a collective)"
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
    size = sum(p.stat().st_size for p in (root / "flight").iterdir())
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
    for path in sorted((root / "flight").iterdir()):
        json.loads(path.read_bytes())
    base_s = time.perf_counter() - start
    print(f"analysis of 1,024 ranks x 128 entries ({size / 1e6:.1f} MB):")
    print(f"  read {read_s:.2f} s, verdict + lags {match_s:.2f} s")
    print(f"  json.loads of the same files {base_s:.2f} s: read/plain {read_s / base_s:.1f}x")


def main() -> None:
    parser = bench_parser(__doc__, PARTS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args()
    with scratch("flight-bench-", args.keep) as root:
        if args.only in (None, "dump"):
            dump(root)
        if args.only in (None, "analysis"):
            analysis(root)
        if args.only in (None, "demo"):
            demo(root, args.rounds, args.steps)
    print_rerun("flight_bench.py", args)


if __name__ == "__main__":
    main()
