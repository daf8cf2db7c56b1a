"""Every parallel layout of the demo trains the same model as one process does, step by step.

Each layout is one real mpiexec launch of ``python -m runtime.examples.train`` on gloo ranks,
with the same seed and global batch as a single-process run; the loss and gradient norm every
rank records in its metrics JSONL must equal the single process's at each of the first steps.

Tolerance: relative 1e-5. The layouts compute the same sums in other orders (TP splits matmul
reductions, CP and DP average chunk and replica losses, all-reduces add partial gradients), so
float32 rounding (eps 1.2e-7) is the only expected difference: measured at most 2.4e-7 absolute
(under 1e-7 relative) on a loss of ~3.2 after 4 AdamW steps. Real mistakes are far larger: a
gradient norm counted wrongly across FSDP x TP shards was 2% off and moved the 4th loss by
4e-5 relative; a causal mask without the chunk's offset, or gradients not reduced over a group,
change the loss at the 1e-3 level from the second step on.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mpi

STEPS = 4
RTOL = 1e-5
TINY = [
    "-m",
    "runtime.examples.train",
    *("--steps", str(STEPS), "--layers", "2", "--global-batch", "8", "--seq-len", "16"),
    *("--dim", "32", "--heads", "4", "--vocab", "32", "--dtype", "float32"),
]
# name: (ranks, sizes, what one rank's start-up line must show for the split to be real)
LAYOUTS = {
    "pp2": (2, ["--pp", "2"], "stage 1/2 layers 1-1 +head"),
    "cp2": (2, ["--cp", "2"], "cp=1/2 dp=0/1 tokens 8-15 of 16"),
    "tp2": (2, ["--tp", "2"], "tp=1/2"),
    "dp2": (2, [], "dp=1/2 tokens 0-15 of 16 rows 4-7 of 8"),
    "pp2xtp2": (4, ["--pp", "2", "--tp", "2"], "stage 1/2 layers 1-1 +head | shard tp=1/2"),
    "cp2xdp2": (4, ["--cp", "2"], "cp=1/2 dp=1/2 tokens 8-15 of 16 rows 4-7 of 8"),
    "tp2xfsdp2": (4, ["--tp", "2", "--strategy", "fsdp"], "tp=1/2 cp=0/1 dp=1/2"),
    # DDP over TP swaps parameter objects each forward; over several microbatches that once
    # left the gradients unscaled (a 2.3x gradient norm). Needs 8 ranks: the slowest case.
    "pp2xtp2xdp2": (8, ["--pp", "2", "--tp", "2"], "stage 1/2 layers 1-1 +head | shard tp=1/2"),
}


def _env(run_dir: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("EZPZ_", "PMI_"))}
    # One thread per rank: the ranks share CI's two cores, and reductions keep one order.
    return {**base, "EZPZ_RUN_DIR": str(run_dir), "EZPZ_DIST_TIMEOUT": "60", "OMP_NUM_THREADS": "1"}


def run_demo(launcher: list[str], args: list[str], run_dir: Path) -> tuple[dict, str]:
    """Each rank's (loss, grad_norm) per step, and everything the ranks printed."""
    proc = subprocess.run(
        [*launcher, sys.executable, *TINY, *args],
        env=_env(run_dir),
        timeout=75,
        capture_output=True,
        text=True,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    per_rank = {}
    for path in sorted((run_dir / "metrics").glob("b0000/rank-*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines()]
        assert [r["step"] for r in records] == list(range(STEPS))
        assert {"dt", "tokens_per_s", "samples_per_s"} <= set(records[-1]["metrics"])
        per_rank[records[0]["rank"]] = [
            (r["metrics"]["loss"], r["metrics"]["grad_norm"]) for r in records
        ]
    return per_rank, output


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[float, float]]:
    per_rank, _ = run_demo([], [], tmp_path_factory.mktemp("single"))
    assert list(per_rank) == [0]
    steps = per_rank[0]
    assert steps[-1][0] < steps[0][0] - 0.3  # it learns, so a broken layout cannot hide
    return steps


@pytest.mark.timeout(90)
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_layout_matches_single_process(
    layout: str, reference: list[tuple[float, float]], mpiexec: str, tmp_path: Path
) -> None:
    ranks, sizes, split = LAYOUTS[layout]
    per_rank, output = run_demo([mpiexec, "-n", str(ranks)], sizes, tmp_path)
    assert sorted(per_rank) == list(range(ranks))
    assert split in output and output.count("params=") == ranks
    for rank, steps in per_rank.items():
        for step, ((loss, norm), (ref_loss, ref_norm)) in enumerate(
            zip(steps, reference, strict=True)
        ):
            where = f"{layout} rank {rank} step {step}"
            assert math.isclose(loss, ref_loss, rel_tol=RTOL), f"{where}: loss {loss} {ref_loss}"
            assert math.isclose(norm, ref_norm, rel_tol=RTOL), f"{where}: norm {norm} {ref_norm}"
