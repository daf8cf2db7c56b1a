"""How often a 2-rank demo run exits 0 and leaves a complete run directory.

``python bench/exit_reliability.py [--runs 20] [--launcher mpiexec|torchrun]``

Runs, one after another, exactly::

    mpiexec -n 2 python -m runtime.capture --run-dir <tmp>/run-K -- \\
        python -m runtime.examples.train --steps 20

(or ``python -m torch.distributed.run --standalone --nproc-per-node 2 -m runtime.capture ...``)
and checks each run directory: 2 rank logs, 2 status files with exit_code 0, 2 JSONL files with
one record per step, and the loss of the last record below the first on both ranks.

Why a benchmark: ~8% of 2-rank gloo runs used to abort at interpreter exit ("terminate called
without an active exception", docs/pitfalls.md). A single green test run says little about a
failure that rare; 20 runs in a row does. Exit status is non-zero if any run failed, and each
failing run's launcher output and rank log tails are printed.
"""

from __future__ import annotations

import argparse
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

from _common import PY, mpiexec, print_rerun, run_in_repo, with_repo_path

from runtime import records
from runtime.env import RANK_VARS
from runtime.metric_files import metric_files
from runtime.rundir import RunDir, read_status

RANKS = 2
# Lines that mean a rank died badly even when every exit code says 0.
ALARMS = ("terminate called", "Traceback (most recent call last)", "Aborted", "core dumped")


def launcher_argv(launcher: str, run_dir: Path, steps: int) -> list[str]:
    """The exact command under test; ``python`` is this interpreter."""
    train = [PY, "-m", "runtime.examples.train", "--steps", str(steps)]
    if launcher == "mpiexec":
        head = [mpiexec(), "-n", str(RANKS), PY, "-m", "runtime.capture"]
    else:
        head = [PY, "-m", "torch.distributed.run", "--standalone"]
        head += ["--nproc-per-node", str(RANKS), "-m", "runtime.capture"]
    return [*head, "--run-dir", str(run_dir), "--", *train]


def clean_env() -> dict[str, str]:
    """Our environment minus launcher variables a stray shell could leak into the ranks."""
    return with_repo_path({k: v for k, v in os.environ.items() if k not in RANK_VARS})


def check_run_dir(run_dir: Path, steps: int) -> list[str]:
    """Every way ``run_dir`` falls short of a complete 2-rank run; empty when it is complete."""
    problems: list[str] = []
    run = RunDir(run_dir)
    logs = [path for path, _ in run.logs()]
    statuses = run.statuses()
    jsonls = [path for path, _ in metric_files(run_dir)]
    for what, found in (("logs", logs), ("status files", statuses), ("JSONL files", jsonls)):
        if len(found) != RANKS:
            problems.append(f"{len(found)} {what}, want {RANKS}")
    for path, rank in statuses:
        status = read_status(path, rank)
        if status is None:
            problems.append(f"{path.name}: unreadable")
        elif status.exit_code != 0:
            problems.append(
                f"{path.name}: exit_code {status.exit_code} "
                f"signal {status.signal_name or status.signal}"
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
    for path in [*logs, run.launcher_log]:
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

    print_rerun("exit_reliability.py", args)
    root = Path(tempfile.mkdtemp(prefix="ezpz-exit-"))
    print("each run: " + shlex.join(launcher_argv(args.launcher, root / "run-K", args.steps)))
    env = clean_env()
    codes: list[int] = []
    failed: dict[int, list[str]] = {}
    durations: list[float] = []
    for k in range(1, args.runs + 1):
        run = RunDir(root / f"run-{k}")
        run.path.mkdir(parents=True)
        cmd = launcher_argv(args.launcher, run.path, args.steps)
        t0 = time.perf_counter()
        with open(run.launcher_log, "wb") as out:
            try:
                code = run_in_repo(
                    cmd, env, args.timeout, stdout=out, stderr=subprocess.STDOUT
                ).returncode
            except subprocess.TimeoutExpired:
                code = 124
        durations.append(time.perf_counter() - t0)
        codes.append(code)
        problems = [] if code == 0 else [f"launcher exited {code}"]
        problems += check_run_dir(run.path, args.steps)
        verdict = "ok" if not problems else "FAIL: " + "; ".join(problems)
        print(f"run-{k:<3} exit {code:<4} {durations[-1]:5.1f}s  {verdict}", flush=True)
        if problems:
            failed[k] = problems

    for k in failed:
        run = RunDir(root / f"run-{k}")
        print(f"\n--- run-{k} ({run.path}) {run.launcher_log.name} tail:")
        print(tail(run.launcher_log))
        for log, _ in run.logs():
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
