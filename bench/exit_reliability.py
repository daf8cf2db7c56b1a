"""How often a 2-rank demo run exits 0 and leaves a complete run directory.

``python bench/exit_reliability.py [--runs 20] [--launcher mpiexec|torchrun]``

Runs, one after another, exactly::

    mpiexec -n 2 python -m runtime.capture --run-dir <tmp>/run-K -- \\
        python -m runtime.examples.train --steps 20

(or ``python -m torch.distributed.run --standalone --nproc-per-node 2 -m runtime.capture ...``)
and checks each run directory: 2 rank logs, 2 status files with exit_code 0, 2 JSONL files with
one record per step, and the loss of the last record below the first on both ranks.

Why a benchmark: ~8% of 2-rank gloo runs used to abort at interpreter exit ("terminate called
without an active exception", DESIGN.md section 6). A single green test run says little about a
failure that rare; 20 runs in a row does. Exit status is non-zero if any run failed, and each
failing run's launcher output and rank log tails are printed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's runtime, whatever is installed

from runtime import records  # noqa: E402
from runtime.env import RANK_VARS  # noqa: E402

RANKS = 2
# Lines that mean a rank died badly even when every exit code says 0.
ALARMS = ("terminate called", "Traceback (most recent call last)", "Aborted", "core dumped")


def launcher_argv(launcher: str, run_dir: Path, steps: int) -> list[str]:
    """The exact command under test; ``python`` is this interpreter."""
    py = sys.executable
    train = [py, "-m", "runtime.examples.train", "--steps", str(steps)]
    if launcher == "mpiexec":
        local = Path(py).parent / "mpiexec"  # the mpich wheel's, before any other on PATH
        mpiexec = str(local) if local.exists() else shutil.which("mpiexec") or "mpiexec"
        head = [mpiexec, "-n", str(RANKS), py, "-m", "runtime.capture"]
    else:
        head = [py, "-m", "torch.distributed.run", "--standalone"]
        head += ["--nproc-per-node", str(RANKS), "-m", "runtime.capture"]
    return [*head, "--run-dir", str(run_dir), "--", *train]


def clean_env() -> dict[str, str]:
    """Our environment minus launcher variables a stray shell could leak into the ranks."""
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def check_run_dir(run_dir: Path, steps: int) -> list[str]:
    """Every way ``run_dir`` falls short of a complete 2-rank run; empty when it is complete."""
    problems: list[str] = []
    logs = sorted((run_dir / "logs").glob("rank-*.log"))
    statuses = sorted((run_dir / "status").glob("rank-*.json"))
    jsonls = sorted((run_dir / "metrics").glob("rank-*.jsonl"))
    for what, found in (("logs", logs), ("status files", statuses), ("JSONL files", jsonls)):
        if len(found) != RANKS:
            problems.append(f"{len(found)} {what}, want {RANKS}")
    for path in statuses:
        try:
            status = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            problems.append(f"{path.name}: unreadable ({exc})")
            continue
        if status.get("exit_code") != 0:
            problems.append(
                f"{path.name}: exit_code {status.get('exit_code')} "
                f"signal {status.get('signal_name') or status.get('signal')}"
            )
    for path in jsonls:
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            problems.append(f"{path.name}: torn last line")
        result = records.parse_chunk(data)
        recs = result.records
        if len(recs) != steps or result.garbage:
            problems.append(
                f"{path.name}: {len(recs)} records (+{result.garbage} garbage), want {steps}"
            )
        if [r.step for r in recs] != list(range(len(recs))):
            problems.append(f"{path.name}: steps are not 0..{len(recs) - 1} in order")
        losses = [r.metrics.get("loss", math.nan) for r in recs]
        if len(losses) < 2 or not losses[-1] < losses[0]:
            shown = f"{losses[0]:.4f} -> {losses[-1]:.4f}" if losses else "none"
            problems.append(f"{path.name}: loss did not fall ({shown})")
    for path in [*logs, run_dir / "launcher.log"]:
        if not path.exists():
            continue
        text = path.read_text(errors="replace")
        problems.extend(f"{path.name}: contains {alarm!r}" for alarm in ALARMS if alarm in text)
    return problems


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"    ({exc})"
    if not text.strip():
        return "    (empty)"
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--launcher", choices=("mpiexec", "torchrun"), default="mpiexec")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per run")
    parser.add_argument("--keep", action="store_true", help="keep the run directories")
    args = parser.parse_args(argv)

    rerun = ["python", "bench/exit_reliability.py", "--runs", str(args.runs)]
    rerun += ["--launcher", args.launcher, "--steps", str(args.steps)]
    print("rerun: " + shlex.join(rerun))
    root = Path(tempfile.mkdtemp(prefix="ezpz-exit-"))
    print("each run: " + shlex.join(launcher_argv(args.launcher, root / "run-K", args.steps)))
    env = clean_env()
    codes: list[int] = []
    failed: dict[int, list[str]] = {}
    durations: list[float] = []
    for k in range(1, args.runs + 1):
        run_dir = root / f"run-{k}"
        run_dir.mkdir(parents=True)
        cmd = launcher_argv(args.launcher, run_dir, args.steps)
        t0 = time.perf_counter()
        with open(run_dir / "launcher.log", "wb") as launcher_log:
            try:
                code = subprocess.run(
                    cmd,
                    env=env,
                    cwd=REPO,
                    stdin=subprocess.DEVNULL,
                    stdout=launcher_log,
                    stderr=subprocess.STDOUT,
                    timeout=args.timeout,
                ).returncode
            except subprocess.TimeoutExpired:
                code = 124
        durations.append(time.perf_counter() - t0)
        codes.append(code)
        problems = [] if code == 0 else [f"launcher exited {code}"]
        problems += check_run_dir(run_dir, args.steps)
        verdict = "ok" if not problems else "FAIL: " + "; ".join(problems)
        print(f"run-{k:<3} exit {code:<4} {durations[-1]:5.1f}s  {verdict}", flush=True)
        if problems:
            failed[k] = problems

    for k in failed:
        run_dir = root / f"run-{k}"
        print(f"\n--- run-{k} ({run_dir}) launcher.log tail:")
        print(tail(run_dir / "launcher.log"))
        for log in sorted((run_dir / "logs").glob("rank-*.log")):
            print(f"--- run-{k} {log.name} tail:")
            print(tail(log))

    good = args.runs - len(failed)
    print(f"\nexit codes ({args.launcher}): {codes}")
    print(f"median run {statistics.median(durations):.1f}s")
    print(
        f"exit reliability ({args.launcher}): {good}/{args.runs} runs exited 0 with a complete "
        "run directory"
    )
    if args.keep or failed:
        print(f"run directories kept in {root}")
    else:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
