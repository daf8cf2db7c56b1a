"""What the ``runtime`` package costs a training rank, each figure against a same-run baseline.

Three sections, each printed with the command that reruns it:

- import: ``python -c "import runtime"`` against ``python -c pass`` (interleaved subprocesses),
  and ``-X importtime`` proof that importing runtime loads no torch, mpi4py, numpy or xarray;
  the capture wrapper and the UI import it, so it must stay light. Then what
  ``import runtime.layout`` (the parallel sizes, every rank's first import) adds on top of
  ``import runtime``: the modules it brings and their cumulative time, target under 1 ms.
- setup: ``runtime.setup()`` / ``runtime.cleanup()`` on 2 ranks under ``mpiexec`` (rank 0 picks
  MASTER_ADDR/PORT and broadcasts over MPI) against torchrun (rendezvous handed over in the
  environment), interleaved; ``bench/_setup_probe.py`` does the timing inside the ranks.
- history: ``History.record()`` with 10 metrics, amortized over many calls, against a bare
  ``os.write`` of an equally long pre-encoded line to an O_APPEND fd in the same process,
  with float values and with 0-d torch tensors.

Machines are noisy: every subject run sits next to its baseline run and medians are quoted.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's runtime, whatever is installed
PROBE = Path(__file__).resolve().parent / "_setup_probe.py"
HEAVY = ("torch", "mpi4py", "numpy", "xarray")
LAYOUT_BUDGET_US = 1000
SECTIONS = ("import", "setup", "history")
METRIC_NAMES = (
    "loss",
    "lr",
    "grad_norm",
    "dt",
    "tokens_per_s",
    "mfu",
    "mem_gb",
    "loss_ema",
    "data_ms",
    "step_ms",
)


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def spread(xs: Sequence[float], fmt: str = ".1f") -> str:
    """``median [min..max] n=N``: the median is the figure, the range says how noisy it was."""
    if not xs:
        return "n/a"
    return f"{median(xs):{fmt}} [{min(xs):{fmt}}..{max(xs):{fmt}}] n={len(xs)}"


def rerun_line(args: argparse.Namespace, only: Sequence[str] | None) -> str:
    """The command that reproduces some sections (all when ``only`` is None) with the same
    repetitions, so any figure in the output can be checked again on its own."""
    sections = list(only) if only else list(SECTIONS)
    argv = ["python", "bench/runtime_bench.py"]
    for name in only or ():
        argv += ["--only", name]
    if "import" in sections:
        argv += ["--import-runs", str(args.import_runs)]
    if "setup" in sections:
        argv += ["--setup-runs", str(args.setup_runs)]
    if "history" in sections:
        argv += ["--history-calls", str(args.history_calls)]
        argv += ["--history-rounds", str(args.history_rounds)]
    return "rerun: " + shlex.join(argv)


def clean_env() -> dict[str, str]:
    """This environment minus any launcher variables a stray shell could leak into the ranks.

    A leftover MASTER_ADDR/MASTER_PORT would skip the MPI rendezvous being measured (or, worse,
    make gloo wait for a peer that never comes). OMP_NUM_THREADS=1 for both launchers, as
    torchrun sets it anyway, so the comparison is about rendezvous, not thread pools.
    """
    from runtime.env import RANK_VARS

    env = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    # Ranks import an installed package whose bytecode is cached; a machine that sets this
    # would make every import here compile its source again and time the compiler instead.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def timed_run(argv: list[str], env: dict[str, str] | None = None) -> float:
    """Wall seconds of one subprocess that must succeed."""
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, env=env, cwd=REPO, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


# --- import ----------------------------------------------------------------------------------


def bench_import(args: argparse.Namespace) -> bool:
    print("## import cost of `import runtime`")
    print(rerun_line(args, ["import"]))
    env = clean_env()
    py = sys.executable
    bare, subject = [py, "-c", "pass"], [py, "-c", "import runtime"]
    timed_run(bare, env), timed_run(subject, env)  # warm the page cache and __pycache__
    timed_run([py, "-c", "import runtime.layout"], env)
    base_ms: list[float] = []
    subj_ms: list[float] = []
    for i in range(args.import_runs):
        pair = ((bare, base_ms), (subject, subj_ms))
        for argv, out in pair if i % 2 == 0 else pair[::-1]:
            out.append(timed_run(argv, env) * 1e3)
    mb, ms = median(base_ms), median(subj_ms)
    print(f"python -c pass            : {spread(base_ms)} ms")
    print(f'python -c "import runtime": {spread(subj_ms)} ms')
    print(f"import runtime costs {ms - mb:+.1f} ms over bare python (ratio {ms / mb:.2f}x)")

    modules = import_times(py, env, "runtime")
    heavy = sorted({n for n, _ in modules if n.split(".")[0] in HEAVY})
    runtime_us = next((us for n, us in modules if n == "runtime"), 0)
    print(
        f"-X importtime: {len(modules)} modules imported, runtime package cumulative "
        f"{runtime_us / 1e3:.1f} ms"
    )
    if heavy:
        print(f"FAIL: import runtime loaded heavy modules: {', '.join(heavy)}")
        return False
    print(f"ok: no {', '.join(HEAVY)} module among them")
    return bench_layout_import(py, env)


def import_times(py: str, env: dict[str, str], module: str) -> list[tuple[str, int]]:
    """(module, cumulative µs) for every module ``import module`` loads, from -X importtime."""
    proc = subprocess.run(
        [py, "-X", "importtime", "-c", f"import {module}"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    modules: list[tuple[str, int]] = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
        if cumulative.isdigit():
            modules.append((name, int(cumulative)))
    return modules


def bench_layout_import(py: str, env: dict[str, str]) -> bool:
    """What ``import runtime.layout`` adds to ``import runtime``: every rank pays it first.
    The median of 5 runs, since one -X importtime figure on a busy machine is noise."""
    base = {name for name, _ in import_times(py, env, "runtime")}
    runs = [import_times(py, env, "runtime.layout") for _ in range(5)]
    added = sorted({name for run in runs for name, _ in run} - base)
    us = median([next((t for n, t in run if n == "runtime.layout"), 0) for run in runs])
    print(
        f"-X importtime: import runtime.layout loads {', '.join(added)} beyond import "
        f"runtime, {us / 1e3:.2f} ms cumulative (target < {LAYOUT_BUDGET_US / 1e3:.0f} ms)"
    )
    if added != ["runtime.layout"] or us >= LAYOUT_BUDGET_US:
        print("FAIL: runtime.layout imports more than itself, or costs 1 ms or more")
        return False
    print("ok: runtime.layout imports nothing but itself")
    return True


# --- setup -----------------------------------------------------------------------------------


def _mpiexec() -> str:
    """The mpiexec beside this interpreter (the mpich wheel's) before any on PATH."""
    local = Path(sys.executable).parent / "mpiexec"
    if local.exists():
        return str(local)
    found = shutil.which("mpiexec")
    if found is None:
        raise SystemExit("mpiexec not found: pip install 'ezpz-tui[mpich]'")
    return found


def _probe(argv: list[str], env: dict[str, str], timeout: float) -> dict[str, Any] | None:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        print(f"  timed out after {timeout:.0f}s: {shlex.join(argv)}")
        tail = (exc.stdout or b"") + (exc.stderr or b"")
        print(tail[-2000:] if isinstance(tail, str) else tail.decode(errors="replace")[-2000:])
        return None
    wall = (time.perf_counter() - t0) * 1e3
    for line in proc.stdout.splitlines():
        if line.startswith("SETUP_PROBE ") and proc.returncode == 0:
            result = json.loads(line[len("SETUP_PROBE ") :])
            result["command_ms"] = wall
            return result
    print(f"  failed (exit {proc.returncode}): {shlex.join(argv)}")
    print((proc.stdout + proc.stderr)[-2000:])
    return None


def bench_setup(args: argparse.Namespace) -> bool:
    print("## runtime.setup() / cleanup() on 2 ranks: mpiexec vs torchrun (rendezvous given)")
    print(rerun_line(args, ["setup"]))
    env = clean_env()
    py = sys.executable
    torchrun = [py, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    launchers = {
        "mpiexec": [_mpiexec(), "-n", "2", py, str(PROBE)],
        "torchrun": [*torchrun, str(PROBE)],
    }
    for name, argv in launchers.items():
        print(f"{name:8}: {shlex.join(argv)}")
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in launchers}
    ok = True
    names = list(launchers)
    for i in range(args.setup_runs):
        for name in names if i % 2 == 0 else names[::-1]:
            result = _probe(launchers[name], env, args.timeout)
            if result is None:
                ok = False
            else:
                results[name].append(result)
    fields = (
        ("command_ms", "whole command"),
        ("import_torch_ms", "import torch"),
        ("setup_ms", "setup()"),
        ("rendezvous_ms", "  MPI rendezvous"),
        ("init_process_group_ms", "  init_process_group"),
        ("mesh_ms", "  init_device_mesh"),
        ("setup_other_ms", "  other: device, seed"),
        ("cleanup_ms", "cleanup()"),
        ("barrier_ms", "  barrier"),
        ("destroy_process_group_ms", "  destroy_process_group"),
        ("cleanup_other_ms", "  other: gc.collect x2"),
    )
    print(f"medians in ms [min..max], rank 0's view ({args.setup_runs} runs each, interleaved)")
    print(f"{'':22} {'mpiexec':>28} {'torchrun':>28}")
    for key, label in fields:
        cells = [spread([r.get(key, 0.0) for r in results[n]]) for n in names]
        print(f"{label:22} {cells[0]:>28} {cells[1]:>28}")
    mpi = median([r["setup_ms"] for r in results["mpiexec"]])
    tr = median([r["setup_ms"] for r in results["torchrun"]])
    print(
        f"setup() mpiexec {mpi:.1f} ms / torchrun {tr:.1f} ms = {mpi / tr:.2f}x "
        f"(mpiexec pays the MPI rendezvous torchrun gets for free)"
    )
    mc = median([r["command_ms"] for r in results["mpiexec"]])
    tc = median([r["command_ms"] for r in results["torchrun"]])
    print(f"whole command mpiexec {mc:.0f} ms / torchrun {tc:.0f} ms = {mc / tc:.2f}x")
    return ok


# --- history ---------------------------------------------------------------------------------


def _encode(step: int, metrics: dict[str, Any]) -> bytes:
    """What History.record does before the write: convert the values, then encode the line."""
    from runtime import records

    plain = {k: records.to_plain(v) for k, v in metrics.items()}
    return records.encode(0, step, plain, time.time())


def _per_call_us(fn: Callable[[int], None], n: int) -> float:
    gc.collect()
    t0 = time.perf_counter()
    for i in range(n):
        fn(i)
    return (time.perf_counter() - t0) / n * 1e6


def bench_history(args: argparse.Namespace) -> bool:
    print("## History.record() with 10 metrics vs bare os.write of an equally long line")
    print(rerun_line(args, ["history"]))
    from runtime import records
    from runtime.history import History

    rng = random.Random(0)
    floats = {name: rng.uniform(0.001, 1000.0) for name in METRIC_NAMES}
    import torch

    tensors = {name: torch.tensor(value) for name, value in floats.items()}
    n = max(1, args.history_calls // args.history_rounds)
    ok = True
    with tempfile.TemporaryDirectory(prefix="ezpz-bench-") as tmp:
        variants: dict[str, tuple[dict[str, Any], History, int, bytes]] = {}
        for kind, metrics in (("float", floats), ("tensor", tensors)):
            history = History(run_dir=Path(tmp) / kind, rank=0)
            plain = {k: records.to_plain(v) for k, v in metrics.items()}
            line = records.encode(0, 10 * args.history_calls, plain, time.time())
            fd = os.open(
                Path(tmp) / f"baseline-{kind}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND
            )
            variants[kind] = (metrics, history, fd, line)
        timings: dict[str, list[float]] = {
            f"{kind}-{role}": [] for kind in variants for role in ("base", "encode", "record")
        }
        jobs: list[tuple[str, Callable[[int], None]]] = []
        for kind, (metrics, history, fd, line) in variants.items():
            jobs.append((f"{kind}-base", lambda i, fd=fd, line=line: os.write(fd, line)))
            jobs.append(
                (f"{kind}-encode", lambda i, m=metrics: _encode(i, m)),
            )
            jobs.append((f"{kind}-record", lambda i, h=history, m=metrics: h.record(i, m)))
        for _name, fn in jobs:  # warm-up: first writes allocate, first records build stats
            _per_call_us(fn, min(n, 1000))
        for r in range(args.history_rounds):
            order = jobs[r % len(jobs) :] + jobs[: r % len(jobs)]
            for name, fn in order:
                timings[name].append(_per_call_us(fn, n))
        for _metrics, history, fd, _line in variants.values():
            history.close()
            os.close(fd)
        for kind, (_metrics, history, _fd, line) in variants.items():
            rec_line = history.path.read_bytes().splitlines()[-1]
            base, rec = timings[f"{kind}-base"], timings[f"{kind}-record"]
            ratios = [b_rec / b_base for b_base, b_rec in zip(base, rec, strict=True)]
            print(
                f"{kind:6} values: record {spread(rec, '.2f')} µs/call, "
                f"os.write {spread(base, '.2f')} µs/call "
                f"({len(line)}-byte line; record wrote {len(rec_line) + 1} bytes)"
            )
            print(
                f"        record costs {median(rec) - median(base):.2f} µs more per call; "
                f"ratio {median(ratios):.1f}x (median of {len(ratios)} paired rounds "
                f"of {n} calls)"
            )
            enc = median(timings[f"{kind}-encode"])
            print(
                f"        of which records.encode alone (to_plain + json.dumps) "
                f"{enc:.2f} µs ({enc / median(rec):.0%} of record)"
            )
            if abs(len(rec_line) + 1 - len(line)) > 16:
                print("        note: baseline line length differs from what record() wrote")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", action="append", choices=SECTIONS, help="run only this section (repeatable)"
    )
    parser.add_argument("--import-runs", type=int, default=30, help="subprocesses per variant")
    parser.add_argument("--setup-runs", type=int, default=5, help="2-rank launches per launcher")
    parser.add_argument("--history-calls", type=int, default=100_000, help="calls per variant")
    parser.add_argument("--history-rounds", type=int, default=10, help="interleaved chunks")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per launch")
    args = parser.parse_args(argv)
    sections = args.only or list(SECTIONS)
    print(rerun_line(args, args.only))
    print(f"python {sys.version.split()[0]} on {os.cpu_count()} cores, {time.strftime('%F %T')}")
    ok = True
    for name, fn in (("import", bench_import), ("setup", bench_setup), ("history", bench_history)):
        if name in sections:
            print()
            ok = fn(args) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
