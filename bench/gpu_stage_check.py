"""On one NVIDIA GPU: a staged run's CUDA libraries load from the staged copy, the GPU demo
steps from it, the copy is gone after, and the first step with and without ``--stage``.

Run from the repository root with the venv whose torch has CUDA (its ``nvidia-*`` wheels hold
libcudart, cuBLAS, NCCL): ``python bench/gpu_stage_check.py [--steps 20]`` (a few minutes: the
copy of a CUDA venv is several GB). It

1. launches one rank through ``ezpz-tui launch --stage --ppn 1`` whose command imports torch, runs
   a matmul on the GPU and reads ``/proc/self/maps``: every loaded CUDA library (``libcudart``,
   ``libcublas``, ``libnccl``, ``libcudnn``, torch's ``libtorch_cuda``) that comes from the venv
   must come from the staged copy, and none from the source;
2. launches the demo on the GPU staged and not, and prints the time to rank
   0's first metric record and the staged run's ``stage_s`` and bytes (GiB/s);
3. checks that the staging folder is empty after each run.

Exit 0 when all of that holds; else 1, saying what was wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from runtime.rundir import RunDir  # noqa: E402

PROBE = """
import json, sys, torch
x = torch.ones(256, 256, device="cuda")
torch.cuda.synchronize(); (x @ x).sum().item()
libs = sorted({line.split()[-1] for line in open("/proc/self/maps") if ".so" in line})
print("PROBE " + json.dumps({"exe": sys.executable, "torch": torch.__file__, "libs": libs}))
"""
CUDA_LIBS = ("libcudart", "libcublas", "libnccl", "libcudnn", "libtorch_cuda")


def launch(outputs: Path, *args: str) -> tuple[Path, float]:
    before = set(outputs.iterdir()) if outputs.is_dir() else set()
    env = {**os.environ, "EZPZ_OUTPUTS": str(outputs)}
    argv = [sys.executable, "-m", "ezpz_tui", "launch", "--quiet", "--ppn", "1", *args]
    began = time.time()
    done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout[-3000:]}")
    (run,) = [p for p in outputs.iterdir() if p.is_dir() and p not in before]
    return run, began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gpu-stage-") as tmp:
        root = Path(tmp)
        outputs, where = root / "outputs", root / "node-local"
        where.mkdir()
        stage = ("--stage", "--stage-dir", str(where))

        run, _ = launch(outputs, *stage, "--", sys.executable, "-c", PROBE)
        line = next(x for x in RunDir(run).log(0).read_text().splitlines() if "PROBE " in x)
        probe = json.loads(line.split("PROBE ", 1)[1])
        dest = json.loads(RunDir(run).stage_json.read_text())["dest"]
        print(f"staged interpreter: {probe['exe']}\ntorch: {probe['torch']}")
        if not probe["exe"].startswith(dest + "/"):
            problems.append(f"the rank ran {probe['exe']}, not the copy in {dest}")
        cuda = [lib for lib in probe["libs"] if any(name in lib for name in CUDA_LIBS)]
        for lib in cuda:
            print(f"  {lib}")
            if lib.startswith(sys.prefix + "/"):
                problems.append(f"{lib} was loaded from the source venv, not the copy")
        if not any(lib.startswith(dest + "/") for lib in cuda):
            problems.append("no CUDA library was loaded from the staged copy")
        if list(where.iterdir()):
            problems.append(f"left behind: {list(where.iterdir())}")

        # The demo takes the GPU on its own (runtime.setup picks cuda where there is one).
        demo = ["--", sys.executable, "-m", "runtime.examples.train", "--steps", str(args.steps)]
        for label, flags in (("without --stage", ()), ("with --stage", stage)):
            run, began = launch(outputs, *flags, *demo)
            with RunDir(run).metrics(0).open() as fh:
                first = float(json.loads(fh.readline())["timestamp"]) - began
            extra = ""
            if flags:
                record = json.loads(RunDir(run).stage_json.read_text())
                gib = record["bytes"] / 2**30
                extra = f"; stage_s {record['seconds']:.1f} s for {gib:.2f} GiB"
                extra += f" ({gib / record['seconds']:.2f} GiB/s)"
            print(f"first step {label}: {first:.1f} s{extra}")
            if list(where.iterdir()):
                problems.append(f"left behind after the demo: {list(where.iterdir())}")
    for problem in problems:
        print(f"FAIL {problem}")
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
