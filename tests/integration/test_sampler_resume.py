"""Resumes across DP changes neither skip nor repeat a sample (runtime.sampler).

Real mpiexec launches on gloo of tests/ranks/sampled_steps.py: 12 steps straight at DP 2,
against steps 0-4 at DP 2, 4-8 resumed at DP 1 and 8-12 resumed at DP 4, each resume loading
the checkpoint the run before saved. Every step of the resumed chain trains on the same global
batch as the straight run's step, so the multisets of sample ids agree too.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.cli import REPO

pytestmark = pytest.mark.mpi

SCRIPT = str(REPO / "tests" / "ranks" / "sampled_steps.py")


def train(mpiexec: str, run_dir: Path, ranks: int, end: int, resume: Path | None = None) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("EZPZ_", "PMI_"))}
    env = {**base, "EZPZ_RUN_DIR": str(run_dir), "EZPZ_DIST_TIMEOUT": "60", "OMP_NUM_THREADS": "1"}
    argv = [mpiexec, "-n", str(ranks), sys.executable, SCRIPT, str(end)]
    proc = subprocess.run(
        [*argv, *([str(resume)] if resume else [])],
        env=env,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def batches(run_dir: Path) -> dict[int, list[int]]:
    """Each step's global batch: the ids of every DP rank, in rank order."""
    steps: dict[int, list[tuple[int, list[int]]]] = collections.defaultdict(list)
    for path in sorted((run_dir / "seen").glob("rank-*.jsonl")):
        rank = int(path.stem.split("-")[1])
        for line in path.read_text().splitlines():
            record = json.loads(line)
            steps[record["step"]].append((rank, record["ids"]))
    return {step: [i for _, ids in sorted(shares) for i in ids] for step, shares in steps.items()}


def test_dp_2_then_1_then_4_sees_the_straight_runs_samples(mpiexec: str, tmp_path: Path) -> None:
    straight = tmp_path / "straight"
    train(mpiexec, straight, 2, 12)
    first, second, third = (tmp_path / name for name in ("dp2", "dp1", "dp4"))
    train(mpiexec, first, 2, 4)
    train(mpiexec, second, 1, 8, first / "checkpoints" / "step-4")
    train(mpiexec, third, 4, 12, second / "checkpoints" / "step-8")

    chain = {**batches(first), **batches(second), **batches(third)}
    expected = batches(straight)
    assert sorted(chain) == list(range(12)) == sorted(expected)
    assert chain == expected
    everything = [i for step in sorted(chain) for i in chain[step]]
    assert collections.Counter(everything) == collections.Counter(
        i for step in sorted(expected) for i in expected[step]
    )
    # 96 samples of a 20-sample set: every epoch's 20 are each taken once before the next's
    for epoch in range(4):
        assert sorted(everything[epoch * 20 : (epoch + 1) * 20]) == list(range(20))
