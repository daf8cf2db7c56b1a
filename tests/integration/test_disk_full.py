"""A run whose disk fills up while it runs: what the launch, ``runs``, ``why`` and the ranks say.

A real 2 MB tmpfs holds the outputs; a real 2-rank launch (the mpich wheel's mpiexec) runs a
script that writes a checkpoint into its run directory until the filesystem refuses, as a job
saving a checkpoint too big for its disk does. Every rank dies of ``ENOSPC`` with the disk full,
so nothing of the run can be written any more: the run's reserve is what records its end.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.cli import PY, REPO, base_env, cli, kill_leftovers, run_dirs
from tests.fixtures.mounts import tmpfs

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(180)]

FILL = str(REPO / "tests" / "ranks" / "fill_disk.py")


def test_a_run_that_fills_its_disk_says_so_everywhere(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs") as outputs:
        env = base_env(outputs)
        try:
            launch = cli(["launch", "--quiet", "--ppn", "2", "--", PY, FILL], env)
        finally:
            kill_leftovers(outputs)
        (run_dir,) = run_dirs(outputs)

        # The launch names the cause, the place that filled and what to do.
        assert "Traceback" not in launch.stderr, launch.stderr
        assert launch.returncode != 0
        said = launch.stderr
        assert f"no space left on device in {run_dir}" in said, said
        assert "free space" in said and "--outputs" in said, said
        assert f"run failed ({run_dir.name})" in said, said

        # The run's record: failed, for want of space.
        state = json.loads((run_dir / "state.json").read_text())
        assert (state["state"], state["cause"]) == ("failed", "no space left on device"), state

        # Every rank's end is recorded, none is lost. The first to hit the full disk wrote its
        # own (exit 1, the OSError) in the room its status file already held; the other did
        # too, or was stopped first by the fail-fast and is killed after it.
        statuses = [
            json.loads((run_dir / "status" / "b0000" / f"rank-{rank:05d}.json").read_text())
            for rank in (0, 1)
        ]
        ends = sorted((s["state"], s["exit_code"], s.get("ended_by")) for s in statuses)
        assert ends in (
            [("failed", 1, None), ("failed", 1, None)],
            [("failed", 1, None), ("killed", None, "supervisor")],
        ), statuses
        assert not list((run_dir / "status").glob(".*.tmp")), "no temporary file left behind"

        # runs shows the cause in its row.
        runs = cli(["runs"], env)
        assert runs.returncode == 0, runs.stderr
        (row,) = [line for line in runs.stdout.splitlines() if run_dir.name in line]
        assert "failed" in row and "no space left on device" in row, runs.stdout
        listed = json.loads(cli(["runs", "--json"], env).stdout)
        assert [r["cause"] for r in listed] == ["no space left on device"]

        # why names it, and what to do about it.
        why = cli(["why", run_dir.name], env)
        assert why.returncode == 0, why.stderr
        assert f"run {run_dir.name} failed: no space left on device" in why.stdout, why.stdout
        assert "free space" in why.stdout and "--outputs" in why.stdout, why.stdout
        first = state["failed_rank"]
        said_it = (
            "No space left on device"
            in (run_dir / "logs" / "b0000" / f"rank-{first:05d}.log").read_text()
        )
        if said_it:  # the rank's own words, when its log had room for its traceback
            assert "[Errno 28] No space left on device" in why.stdout, why.stdout
