"""A run directory made before the blocks of ranks (every rank file in ``logs/``, ``status/``,
... themselves) still opens: ``runs``, ``why``, ``top`` and the follower read it as they read the
same run in blocks.

The runs are real (tests/fixtures/finished.py: two 2-rank launches through the mpich wheel's
mpiexec, one succeeded, one failed on rank 1's ValueError); a copy of them is moved into the older
layout, as an earlier version wrote it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from ezpz_tui.core.watching.followers import RunFollower
from runtime.rundir import RunDir
from tests.fixtures.cli import base_env, cli
from tests.fixtures.finished import Finished

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(300)]


def flatten(run: Path) -> None:
    """Every rank file moved out of its block into its folder, the blocks removed."""
    for block in run.glob("*/b0000"):
        for path in block.iterdir():
            path.rename(block.parent / path.name)
        block.rmdir()


def read(outputs: Path, args: list[str]) -> Any:
    done = cli([*args, "--json"], base_env(outputs))
    assert done.returncode in (0, 1), done.stderr
    assert "Traceback" not in done.stderr
    return json.loads(done.stdout)


def untimed(top: dict[str, Any]) -> dict[str, Any]:
    """What ``top --json`` says, less what moves with the clock."""
    ranks = [{k: v for k, v in r.items() if k != "sample_age_s"} for r in top["ranks"]]
    return {**{k: v for k, v in top.items() if k != "time"}, "ranks": ranks}


def test_an_older_flat_run_reads_as_the_same_run_in_blocks(
    finished: Finished, tmp_path: Path
) -> None:
    outputs = tmp_path / "outputs"
    shutil.copytree(finished.outputs, outputs, symlinks=True)
    good, bad = outputs / finished.good.name, outputs / finished.bad.name
    before = {
        "runs": read(outputs, ["runs", "--outputs", str(outputs)]),
        "why": read(outputs, ["why", bad.name]),
        "top": read(outputs, ["top", good.name]),
    }
    for run in (good, bad):
        flatten(run)
    assert (bad / "logs" / "rank-00001.log").is_file() and not (bad / "logs" / "b0000").exists()
    after = {
        "runs": read(outputs, ["runs", "--outputs", str(outputs)]),
        "why": read(outputs, ["why", bad.name]),
        "top": read(outputs, ["top", good.name]),
    }
    assert after["runs"] == before["runs"]
    assert len(after["runs"]) == 2 and {r["world_size"] for r in after["runs"]} == {2}
    # What why says names the rank's files where they are: the same words less the block.
    assert json.dumps(after["why"]) == json.dumps(before["why"]).replace("b0000/", "")
    assert after["why"]["failed"] is True and "the data ran out at step 3" in json.dumps(
        after["why"]
    )
    assert untimed(after["top"]) == untimed(before["top"])
    assert [r["rss_bytes"] > 0 for r in after["top"]["ranks"]] == [True, True]  # its telemetry

    follower = RunFollower(bad)
    lines: dict[int, list[str]] = {}
    statuses = {}
    while batch := follower.poll():
        for rank, _seq, chunk in batch.logs:
            lines.setdefault(rank, []).extend(chunk.texts)
        statuses.update(batch.status)
    assert sorted(statuses) == [0, 1] and statuses[1].state == "failed"
    assert "rank 1 step 3" in lines[1]
    for rank in (0, 1):  # every line of each flat log, whatever step the fail-fast stopped at
        assert lines[rank] == (bad / "logs" / f"rank-{rank:05d}.log").read_text().splitlines()
    assert follower.finished
    assert RunDir(bad).log(1) == bad / "logs" / "rank-00001.log"
