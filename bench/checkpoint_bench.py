"""What checkpointing costs the demo at 2 ranks: step time with saves against the same steps
without, save and load times.

Three variants of ``mpiexec -n 2 python -m runtime.examples.train`` run interleaved, ``--reps``
times each, with the same steps and sizes: ``off`` (no checkpoint), ``async`` (``--checkpoint-
every N``: the step waits for the state's copy, a thread writes it) and ``sync`` (``--checkpoint-
sync``: the step waits for the write). From rank 0's JSONL: the median step time over all steps
and over the steps that saved (``dt`` includes what a save held the step up), each as a ratio to
``off``; the median ``ckpt_save_s`` (what a save held the step up), ``ckpt_write_s`` (until its
files were written) and ``ckpt_mb``. Then a resume from the last checkpoint (``--resume``): its
``ckpt_load_s``, against the median step time. Wall time of each whole run is printed too (it
includes start-up, the same for all three). The resume loads the checkpoint before the last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from _common import PY, bench_parser, mpiexec, print_rerun, run_in_repo, scratch, with_repo_path

from runtime.rundir import RunDir

VARIANTS = ("off", "async", "sync")


def demo_args(args: argparse.Namespace, variant: str) -> list[str]:
    sizes = ["--steps", str(args.steps), "--dim", str(args.dim), "--layers", "2"]
    saves = ["--checkpoint-every", str(args.every)]
    extra = {"off": [], "async": saves, "sync": [*saves, "--checkpoint-sync"]}[variant]
    return ["-m", "runtime.examples.train", *sizes, "--log-every", "1000000", *extra]


def run(run_dir: Path, demo: list[str]) -> tuple[float, list[dict]]:
    env = with_repo_path({**os.environ, "EZPZ_RUN_DIR": str(run_dir), "OMP_NUM_THREADS": "1"})
    start = time.perf_counter()
    done = run_in_repo([mpiexec(), "-n", "2", PY, *demo], env, 600, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"the demo failed ({done.returncode}):\n{done.stderr[-2000:]}")
    path = RunDir(run_dir).metrics(0)
    return wall, [json.loads(line)["metrics"] for line in path.read_text().splitlines()]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = bench_parser(__doc__, ())
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--dim", type=int, default=256, help="model width: the state's size")
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    print_rerun("checkpoint_bench.py", args)
    dts: dict[str, list[float]] = {v: [] for v in VARIANTS}
    saving: dict[str, list[float]] = {v: [] for v in VARIANTS}
    walls: dict[str, list[float]] = {v: [] for v in VARIANTS}
    figures: dict[str, dict[str, list[float]]] = {v: {} for v in VARIANTS}
    last = None
    with scratch("ckpt-bench-", args.keep) as root:
        for rep in range(args.reps):
            for variant in VARIANTS:
                run_dir = root / f"{variant}-{rep}"
                wall, records = run(run_dir, demo_args(args, variant))
                walls[variant].append(wall)
                body = records[1:]  # the first step pays for warm-up in every variant
                dts[variant] += [r["dt"] for r in body]
                saved = {(i + 1) for i in range(len(records)) if (i + 1) % args.every == 0}
                saving[variant] += [r["dt"] for i, r in enumerate(records) if i + 1 in saved]
                for r in records:
                    for key in ("ckpt_save_s", "ckpt_write_s", "ckpt_mb"):
                        if key in r:
                            figures[variant].setdefault(key, []).append(r[key])
                if variant == "async":
                    last = run_dir
        assert last is not None
        resume_dir = root / "resume"
        demo = demo_args(args, "off")
        # The one before the last: the resumed run then trains its last ``every`` steps.
        checkpoint = last / "checkpoints" / f"step-{args.steps - args.every}"
        _, resumed = run(resume_dir, [*demo, "--resume", str(checkpoint)])
        load_s = resumed[0].get("ckpt_load_s") if resumed else None

    off = median(dts["off"])
    off_saving = median(saving["off"])
    print(
        f"demo: 2 ranks (mpiexec, gloo, CPU), --dim {args.dim}, {args.steps} steps, "
        f"a save every {args.every}, {args.reps} interleaved runs each"
    )
    print(
        f"{'variant':8} {'step ms':>9} {'ratio':>7} {'saving-step ms':>15} {'ratio':>7} "
        f"{'held ms':>8} {'written ms':>11} {'MB':>6} {'wall s':>7}"
    )
    for variant in VARIANTS:
        step, at_save = median(dts[variant]), median(saving[variant])
        f = figures[variant]
        held = median(f.get("ckpt_save_s", [])) * 1e3
        written = median(f.get("ckpt_write_s", [])) * 1e3
        mb = median(f.get("ckpt_mb", []))
        print(
            f"{variant:8} {step * 1e3:9.2f} {step / off:7.2f} {at_save * 1e3:15.2f} "
            f"{at_save / off_saving:7.2f} {held:8.1f} {written:11.1f} {mb:6.2f} "
            f"{median(walls[variant]):7.2f}"
        )
    if load_s is not None:
        ratio, step_ms = load_s / off, off * 1e3
        print(
            f"resume: load {load_s * 1e3:.1f} ms = {ratio:.1f} x the median step ({step_ms:.2f} ms)"
        )


if __name__ == "__main__":
    main()
