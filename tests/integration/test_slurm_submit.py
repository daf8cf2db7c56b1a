"""``ezpz-tui submit`` on the real local Slurm: the plan of a run that worked goes through
``sbatch`` and the runs list follows the job from ``queued`` to ``succeeded``.

The source run is a real local launch of the demo (2 ranks, 3 steps, mpiexec): the plan that
"just worked". The job is submitted while the partition is down (``scontrol update``: jobs are
queued but none starts), so ``queued`` is seen for certain, then the partition comes up. Needs
``scripts/slurm-local`` (Debian's slurm-wlm and munge, root); skipped where they are missing.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ezpz_tui.core.runs.record import read_run_toml
from tests.fixtures.cli import kill_leftovers

if TYPE_CHECKING:
    from tests.fixtures.slurm import SlurmCluster

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(420)]

PY = sys.executable
PARTITION = "debug"  # scripts/slurm-local's one partition
TRAIN = [PY, "-m", "runtime.examples.train", "--steps", "3"]


def _cli(cluster: SlurmCluster, outputs: Path, args: list[str], **env: str) -> Any:
    return cluster.run(
        [PY, "-m", "ezpz_tui", *args],
        env={"EZPZ_OUTPUTS": str(outputs), **env},
        timeout=240,
        check=False,
    )


def _runs(cluster: SlurmCluster, outputs: Path) -> list[dict[str, Any]]:
    proc = _cli(cluster, outputs, ["runs", "--json"])
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@contextlib.contextmanager
def _partition_down(cluster: SlurmCluster) -> Iterator[None]:
    """Jobs are queued but none starts, until the partition is up again (whatever happens)."""
    cluster.run(["scontrol", "update", f"PartitionName={PARTITION}", "State=DOWN"])
    try:
        yield
    finally:
        cluster.run(["scontrol", "update", f"PartitionName={PARTITION}", "State=UP"])


def test_submit_runs_the_demo_through_sbatch_and_the_runs_list_follows_it(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    outputs = tmp_path / "outputs"
    try:
        first = _cli(slurm_cluster, outputs, ["launch", "--ppn", "2", "--quiet", "--", *TRAIN])
        assert first.returncode == 0, first.stdout + first.stderr
        (source,) = _runs(slurm_cluster, outputs)
        assert source["state"] == "succeeded"

        # Not inside a job, qsub not here: the scheduler is the one whose tool is on PATH.
        dry = _cli(slurm_cluster, outputs, ["submit", "--dry-run", "--walltime", "00:05:00"])
        assert dry.returncode == 0, dry.stderr
        script = dry.stdout
        assert script.startswith("#!/bin/bash\n")
        for directive in ("--nodes=1", "--ntasks-per-node=2", "--time=00:05:00"):
            assert f"#SBATCH {directive}\n" in script, script
        assert f"the plan of run {source['run_id']}" in script
        assert "--ppn=2 --launcher=auto -- " in script and "runtime.examples.train" in script
        assert list(outputs.iterdir()) == [Path(source["path"])]  # a dry run leaves nothing

        with _partition_down(slurm_cluster):
            sub = _cli(slurm_cluster, outputs, ["submit", "--walltime", "00:05:00"])
            assert sub.returncode == 0, sub.stdout + sub.stderr
            job_id = sub.stdout.strip()
            assert job_id.isdigit(), sub.stdout
            queued = [r for r in _runs(slurm_cluster, outputs) if r["job_id"] == job_id]
            assert [(r["state"], r["queued"]) for r in queued] == [("queued", True)]
            assert queued[0]["world_size"] == 2 and queued[0]["tp"] == 1
            text = _cli(slurm_cluster, outputs, ["runs"]).stdout
            assert "queued" in text and f"job {job_id}" in text, text

        seen = {"queued"}
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            rows = _runs(slurm_cluster, outputs)
            mine = [r for r in rows if r["job_id"] == job_id]
            states = [r["state"] for r in mine]
            seen.update(states)
            if states == ["succeeded"] or any(s in ("failed", "lost", "stopped") for s in states):
                break
            time.sleep(1)
        output = next(iter((outputs / ".batch").glob("*.out")), None)
        why = output.read_text(errors="replace")[-3000:] if output else "no job output"
        assert [r["state"] for r in mine] == ["succeeded"], f"{mine}\n{why}"
        (run,) = mine
        assert not run["queued"] and run["run_id"] != source["run_id"]
        assert run["submission"] == queued[0]["submission"]
        record = read_run_toml(Path(run["path"]))
        assert record["scheduler"] == "SLURM" and record["job_id"] == job_id
        assert Path(record["launch"]["argv"][0]).name == "srun"  # rebuilt for the job's nodes
        assert record["plan"]["command"] == TRAIN and record["sizes"]["world_size"] == 2
        assert {"queued", "succeeded"} <= seen
        # Every row is a run directory or a job: the job is not listed twice.
        assert len(rows) == 2
    finally:
        kill_leftovers(outputs)
