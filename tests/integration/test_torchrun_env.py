"""Scripts written for torchrun run unchanged under ``ezpz-tui launch`` with mpiexec.

Each test is a real 2-rank gloo run through the mpich wheel's mpiexec (no torchrun anywhere): a
bare ``init_process_group()``, Hugging Face Accelerate and Lightning Fabric as their users write
them. Each rank prints what its framework believes (rank, world, the sum of an all-reduce of
rank + 1, and for the two frameworks a weight after one DDP step, which is the same on both
ranks only if the gradients were really averaged across one world of two).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from runtime.rundir import RunDir
from tests.fixtures.cli import PY, base_env, cli, run_dirs

pytestmark = pytest.mark.timeout(300)

RANKS = Path(__file__).resolve().parents[1] / "ranks"
SAID = re.compile(r"rank=(\d+) world=(\d+) sum=([\d.]+)(?:.*weights=(-?[\d.]+))?")


def ranks_said(run_dir: Path) -> dict[int, tuple[int, float, str | None]]:
    """rank -> (world size, all-reduce sum, weights) from each rank's own log."""
    said = {}
    for rank in (0, 1):
        text = RunDir(run_dir).log(rank).read_text("utf-8", "replace")
        found = SAID.findall(text)
        assert len(found) == 1, f"rank {rank} did not report once:\n{text[-3000:]}"
        reported, world, total, weights = found[0]
        assert int(reported) == rank, text[-3000:]
        said[rank] = (int(world), float(total), weights or None)
    return said


def launch_script(outputs: Path, script: str) -> Path:
    proc = cli(["launch", "--ppn", "2", "--", PY, str(RANKS / script)], base_env(outputs), 240)
    dirs = run_dirs(outputs)
    assert len(dirs) == 1, proc.stderr
    logs = [RunDir(dirs[0]).log(r) for r in (0, 1)]
    tails = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in logs if p.is_file())
    assert proc.returncode == 0, f"{proc.stderr}\n{tails}"
    return dirs[0]


def test_a_bare_init_process_group_script(outputs: Path) -> None:
    run_dir = launch_script(outputs, "torchrun_plain.py")
    said = ranks_said(run_dir)
    assert said == {0: (2, 3.0, None), 1: (2, 3.0, None)}
    # Rank 0's log is what the CLI followed, so the user saw the line too.
    statuses = [json.loads(RunDir(run_dir).status(r).read_text()) for r in (0, 1)]
    assert [s["world_size"] for s in statuses] == [2, 2]


def test_accelerate_sees_one_world_of_two(outputs: Path) -> None:
    said = ranks_said(launch_script(outputs, "accelerate_step.py"))
    assert [said[r][:2] for r in (0, 1)] == [(2, 3.0), (2, 3.0)]
    assert said[0][2] == said[1][2], "one DDP step left the ranks with different weights"
    log = RunDir(run_dir_of(outputs)).log(0).read_text()
    assert "distributed=MULTI_CPU" in log or "DistributedType.MULTI_CPU" in log, log[-2000:]


def test_lightning_fabric_sees_one_world_of_two(outputs: Path) -> None:
    said = ranks_said(launch_script(outputs, "fabric_step.py"))
    assert [said[r][:2] for r in (0, 1)] == [(2, 3.0), (2, 3.0)]
    assert said[0][2] == said[1][2], "one DDP step left the ranks with different weights"


def test_the_demo_keeps_its_own_placement_source(outputs: Path) -> None:
    """The demo calls runtime.setup(): it meets at the same MASTER_ADDR/MASTER_PORT and still
    says which launcher placed it, not "torchrun"."""
    proc = cli(
        ["launch", "--ppn", "2", "--", PY, "-m", "runtime.examples.train", "--steps", "3"],
        base_env(outputs),
        240,
    )
    assert proc.returncode == 0, proc.stderr
    text = RunDir(run_dir_of(outputs)).log(1).read_text()
    assert re.search(r"rank 1/2 \(local 1, node 0, via pmi\)", text), text[-2000:]


def run_dir_of(outputs: Path) -> Path:
    (only,) = run_dirs(outputs)
    return only
