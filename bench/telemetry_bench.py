"""What the telemetry sampler costs a rank, in CPU % of one core at the default 2 s interval.

The sampler runs in the capture wrapper, so its cost is the wrapper's CPU time plus that of the
tools it starts. This bench starts a real process tree shaped like a training rank (a Python
parent with 32 threads and 4 child processes, all idle), then, in this process, alternates
windows of the same length: a baseline with no sampling, and the sampler thread writing samples
of that tree back to back (a 10 ms interval) to a telemetry file. CPU is this process's own plus
its reaped children's (``getrusage``), so a tool's start-up counts. The cost of one sample is
(subject CPU - baseline CPU) / samples written, and the cost at the default interval is that
over 2 s. Three sources:

- host: the process tree only (what a CPU-only node pays);
- nvml: plus the accelerator through NVML, here tests/fixtures/nvml.py (a Python stand-in, so
  this is the sampler's own share of an NVML read, not the driver's);
- nvidia-smi: plus tests/standins/nvidia-smi, one process per sample. The stand-in is a Python
  script, so its interpreter's start dominates; the real nvidia-smi costs more (it initialises
  NVML each time, tens of ms).

Also: one reading of the tree through ``/proc/PID/task/TID/children`` against the fallback scan
of every process on the node (the ratio is what the children files save).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _common import PY, REPO, bench_parser, print_rerun, scratch

from runtime.telemetry.accelerator import Accelerator, Source
from runtime.telemetry.devices import Pick
from runtime.telemetry.host import ProcessTree
from runtime.telemetry.nvidia import NvidiaSmi, Nvml
from runtime.telemetry.record import DEFAULT_INTERVAL_S
from runtime.telemetry.sampler import Sampler
from runtime.telemetry.tools import ToolRunner
from tests.fixtures.nvml import fake_nvml

PARTS = ("host", "nvml", "nvidia-smi")
STANDINS = REPO / "tests" / "standins"
RANK = (
    "import subprocess, sys, threading, time\n"
    "for _ in range(32):\n"
    "    threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()\n"
    "kids = [subprocess.Popen(['sleep', '3600']) for _ in range(4)]\n"
    "time.sleep(3600)\n"
)


def cpu_s() -> float:
    """CPU seconds of this process and of its children that have been reaped."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def sources(part: str, runner: ToolRunner) -> list[Source]:
    if part == "nvml":
        return [Nvml(Pick(1))]
    if part == "nvidia-smi":
        return [NvidiaSmi(Pick(1), runner, 5.0)]
    return []


def window(seconds: float, sample_to: Path | None, part: str, root: int) -> tuple[float, int]:
    """(CPU seconds, samples written) over ``seconds``; no sampler when ``sample_to`` is None."""
    sampler = None
    if sample_to is not None:
        runner = ToolRunner()
        chain = Accelerator(sources(part, runner), False, lambda _line: None)
        sampler = Sampler(sample_to, ProcessTree(root), chain, 0.01, runner)
    before = cpu_s()
    if sampler is not None:
        sampler.start()
    time.sleep(seconds)
    if sampler is not None:
        sampler.stop(5.0)
    spent = cpu_s() - before
    written = 0
    if sample_to is not None:
        written = len(sample_to.read_bytes().splitlines())
        sample_to.unlink()
    return spent, written


def bench_part(part: str, root: int, folder: Path, rounds: int, seconds: float) -> None:
    base, cost, counts = [], [], []
    for _ in range(rounds):
        spent, _written = window(seconds, None, part, root)
        base.append(spent)
        spent, written = window(seconds, folder / "rank-00000.jsonl", part, root)
        counts.append(written)
        cost.append((spent - base[-1]) / max(written, 1))
    per_sample = statistics.median(cost)
    at_default = 100.0 * per_sample / DEFAULT_INTERVAL_S
    base_pct = 100.0 * statistics.median(base) / seconds
    print(
        f"{part:>10}: {per_sample * 1e3:7.3f} ms CPU per sample "
        f"(median of {rounds}, {statistics.median(counts):.0f} samples per {seconds:g} s window)"
        f" -> {at_default:.3f}% of one core at {DEFAULT_INTERVAL_S:g} s; "
        f"baseline window {base_pct:.3f}% of one core"
    )


def per_call(fn: Callable[[], object], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - started) / calls


def bench_tree(root: int, calls: int) -> None:
    tree = ProcessTree(root)
    found = len(tree.pids())
    children = statistics.median(per_call(tree.read, calls) for _ in range(5))
    tree._children_files = False  # the fallback for kernels without the children files
    scan = statistics.median(per_call(tree.read, calls) for _ in range(5))
    node = len([n for n in os.listdir("/proc") if n.isdigit()])
    print(
        f"tree read ({found} processes, {node} on the node): children files "
        f"{children * 1e6:.0f} us, /proc scan {scan * 1e6:.0f} us "
        f"(scan/children {scan / children:.1f}x)"
    )


def main() -> int:
    parser = bench_parser(__doc__, PARTS)
    parser.add_argument("--rounds", type=int, default=5, help="baseline/subject window pairs")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one window")
    parser.add_argument("--tree-calls", type=int, default=200, help="tree reads per timing")
    args = parser.parse_args()
    print_rerun("telemetry_bench.py", args)
    sys.modules["pynvml"] = fake_nvml()
    os.environ["PATH"] = os.pathsep.join([str(STANDINS), str(Path(PY).parent), os.environ["PATH"]])
    rank = subprocess.Popen([PY, "-c", RANK], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while len(ProcessTree(rank.pid).pids()) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, rank tree pid {rank.pid}")
        bench_tree(rank.pid, args.tree_calls)
        with scratch("telemetry-bench-", args.keep) as folder:
            for part in [args.only] if args.only else PARTS:
                bench_part(part, rank.pid, folder, args.rounds, args.seconds)
    finally:
        os.killpg(rank.pid, 9)
        rank.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
