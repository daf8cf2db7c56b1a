"""What ``ezpz-tui launch --stage`` costs and gains on this machine, and the staging time per GB.

``python bench/stage_bench.py [--reps 3] [--steps 3] [--only first-step|per-gb|reuse] [--keep]``

(first-step) Time to the demo's first training step, from just before the command starts to the
``timestamp`` of rank 0's first JSONL record, of the 2-rank demo launched through
``ezpz-tui launch --quiet --ppn 2`` with and without ``--stage`` (interleaved, medians, the
ratio), and the staged runs' own ``stage_s`` (from ``stage.json``) and their first step after the
staging. This venv (with torch, about 2 GB) is what is staged. On one machine the venv is on a
local disk already: staging only adds a copy, nothing is gained. Where it gains is at scale, with
the venv on a shared filesystem (Lustre, GPFS, NFS) that every rank of every node imports from.

(per-gb) The staging time per GiB: ``python -m runtime.stage copy`` of this venv on one node
(manifest, the pack read and unpacked, verification, the staged interpreter's check; the pack
made once before, as a launch finds it kept) against ``cp -a`` of the same venv (the floor: a
plain copy), interleaved, medians, seconds per GiB and the ratio. Several nodes, and the bytes of
the source read per launch: ``bench/stage_spread_bench.py``.

(reuse) A kept copy (``--stage=keep``) reused by the next run: its ``stage_s`` (the source's
manifest read and compared, the staged interpreter started) against the copy's.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from _common import PY, bench_parser, clean_env, ezpz_tui, print_rerun, run_in_repo, scratch

from runtime.rundir import RunDir
from runtime.stage_pack import ensure_pack, manifest

PARTS = ("first-step", "per-gb", "reuse")
TIMEOUT_S = 600.0
GIB = 2**30


def launch(outputs: Path, steps: int, *flags: str) -> tuple[Path, float]:
    """One 2-rank demo run; its run directory and the wall clock just before it started."""
    before = set(outputs.iterdir()) if outputs.is_dir() else set()
    argv = [*ezpz_tui(), "launch", "--quiet", "--ppn", "2", *flags]
    argv += ["--", PY, "-m", "runtime.examples.train", "--steps", str(steps)]
    began = time.time()
    proc = run_in_repo(argv, clean_env(outputs), TIMEOUT_S, capture_output=True)
    if proc.returncode != 0:
        out = (proc.stdout + proc.stderr).decode(errors="replace")[-3000:]
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{out}")
    (run,) = [p for p in outputs.iterdir() if p.is_dir() and p not in before]
    return run, began


def first_step_s(run: Path, began: float) -> float:
    with RunDir(run).metrics(0).open() as fh:
        return float(json.loads(fh.readline())["timestamp"]) - began


def stage_of(run: Path) -> dict:
    return json.loads(RunDir(run).stage_json.read_text())


def med(values: list[float]) -> float:
    return statistics.median(values)


def bench_first_step(reps: int, steps: int, root: Path) -> None:
    outputs, where = root / "outputs", root / "node-local"
    where.mkdir()
    plain: list[float] = []
    staged: list[float] = []
    stage_s: list[float] = []
    after: list[float] = []
    size = 0
    for rep in range(reps):
        for name in ("plain", "staged") if rep % 2 == 0 else ("staged", "plain"):
            if name == "plain":
                run, began = launch(outputs, steps)
                plain.append(first_step_s(run, began))
                continue
            run, began = launch(outputs, steps, "--stage", "--stage-dir", str(where))
            record = stage_of(run)
            staged.append(first_step_s(run, began))
            stage_s.append(record["seconds"])
            after.append(staged[-1] - record["seconds"])
            size = record["bytes"]
            left = list(where.iterdir())
            if left:
                raise SystemExit(f"the staged copy was left behind: {left}")
        print(f"  rep {rep + 1}: plain {plain[-1]:.2f} s, staged {staged[-1]:.2f} s", flush=True)
    print(f"first step of the 2-rank demo (median of {reps}, {size / GIB:.2f} GiB staged):")
    print(f"  without --stage  {med(plain):7.2f} s")
    print(f"  with --stage     {med(staged):7.2f} s  (x{med(staged) / med(plain):.2f})")
    print(f"    of which stage_s {med(stage_s):6.2f} s, then the first step {med(after):.2f} s")
    print(
        "  on one machine the venv is on local disk already: --stage only adds the copy "
        f"({med(staged) - med(plain):+.2f} s here); it pays off when many nodes import from a "
        "shared filesystem"
    )


def bench_per_gb(reps: int, root: Path) -> None:
    source = Path(sys.prefix)
    pack = root / "cache" / "venv.tar"
    made = ensure_pack(source, pack, manifest(source))
    print(f"  the pack: {made['bytes'] / GIB:.2f} GiB, made once in {made['seconds']:.1f} s")
    stage_times: list[float] = []
    cp_times: list[float] = []
    size = 0
    for rep in range(reps):
        for name in ("stage", "cp") if rep % 2 == 0 else ("cp", "stage"):
            dest = root / f"{name}-{rep}"
            began = time.perf_counter()
            if name == "cp":
                done = run_in_repo(
                    ["cp", "-a", str(source), str(dest)], dict(os.environ), TIMEOUT_S
                )
                cp_times.append(time.perf_counter() - began)
            else:
                argv = [PY, "-m", "runtime.stage", "copy", "--source", str(source)]
                argv += ["--dest", str(dest), "--python", os.path.relpath(PY, source)]
                argv += ["--pack", str(pack)]
                done = run_in_repo(argv, dict(os.environ), TIMEOUT_S, capture_output=True)
                stage_times.append(time.perf_counter() - began)
                answer = json.loads(done.stdout.decode().split(" ", 1)[1])
                if not answer.get("ok"):
                    raise SystemExit(f"runtime.stage failed: {answer}")
                size = answer["bytes"]
            if done.returncode != 0:
                raise SystemExit(f"{name} exited {done.returncode}")
            shutil.rmtree(dest)
        print(f"  rep {rep + 1}: stage {stage_times[-1]:.1f} s, cp -a {cp_times[-1]:.1f} s")
    gib = size / GIB
    stage, floor = med(stage_times), med(cp_times)
    print(f"staging {source} ({gib:.2f} GiB, median of {reps}):")
    print(f"  runtime.stage copy  {stage:6.1f} s  = {stage / gib:5.1f} s/GiB")
    print(f"  cp -a (the floor)   {floor:6.1f} s  = {floor / gib:5.1f} s/GiB")
    print(
        f"  ratio stage/cp      x{stage / floor:.2f} "
        "(manifest, pack, verification, interpreter check)"
    )


def bench_reuse(steps: int, root: Path) -> None:
    outputs, where = root / "reuse-outputs", root / "kept"
    where.mkdir()
    first, _ = launch(outputs, steps, "--stage=keep", "--stage-dir", str(where))
    second, _ = launch(outputs, steps, "--stage=keep", "--stage-dir", str(where))
    made, reused = stage_of(first), stage_of(second)
    if made["reused"] or not reused["reused"]:
        raise SystemExit(f"expected a copy then a reuse, got {made['reused'], reused['reused']}")
    print("a kept copy reused by the next run:")
    print(f"  copied   stage_s {made['seconds']:6.2f} s")
    ratio = reused["seconds"] / made["seconds"]
    print(f"  reused   stage_s {reused['seconds']:6.2f} s  (x{ratio:.3f} of the copy)")
    shutil.rmtree(where)


def main() -> None:
    parser = bench_parser(__doc__, PARTS)
    parser.add_argument("--reps", type=int, default=3, help="runs of each variant")
    parser.add_argument("--steps", type=int, default=3, help="demo steps a run")
    args = parser.parse_args()
    print_rerun("stage_bench.py", args)
    with scratch("stage-bench-", args.keep) as root:
        if args.only in (None, "first-step"):
            bench_first_step(args.reps, args.steps, root)
        if args.only in (None, "per-gb"):
            bench_per_gb(args.reps, root)
        if args.only in (None, "reuse"):
            bench_reuse(args.steps, root)


if __name__ == "__main__":
    main()
