"""bench/grow_run.py grows a real finished run into the run directory of a bigger one.

The scale benches measure readers on grown runs, so a grown run must hold every file a real
run of that size writes, each naming its own rank, host and sizes: a reader that opens a file
per rank, or keys by host, then meets what it would meet on a real job.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from ezpz_tui.core.runs.digest import read_digest
from ezpz_tui.core.watching.node_digests import read_node_digests
from runtime.rundir import RunDir, read_statuses
from tests.fixtures.cli import REPO, cli
from tests.fixtures.finished import Finished

RANKS, PER_NODE = 24, 12


def grow(src: Path, dst: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(REPO / "bench" / "grow_run.py"), str(src), str(dst), *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_a_grown_run_holds_every_ranks_files_naming_it(finished: Finished, tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(finished.good, source)
    for rank in (0, 1):
        flight = RunDir(source).flight(rank)
        flight.parent.mkdir(exist_ok=True)
        flight.write_text(f'{{"rank":{rank},"pid":7,"entries":[]}}')
    os.mkfifo(RunDir(source).flight_request(0))
    with RunDir(source).log(1).open("a") as log:
        log.write(
            "11:53:23 [INFO][rank 1] ezpz.train: rank 1/2 (local 1, node 0, via pmi) on cpu\n"
        )

    done = grow(source, tmp_path / "grown", str(RANKS), "--ranks-per-node", str(PER_NODE))
    assert done.returncode == 0, done.stderr
    assert "skipped flight/b0000/rank-00000.fifo: not a regular file" in done.stdout

    grown = RunDir(tmp_path / "grown")
    for rank in range(RANKS):
        for path in (grown.log(rank), grown.metrics(rank), grown.telemetry(rank)):
            assert path.is_file(), path
        records = [json.loads(line) for line in grown.metrics(rank).read_text().splitlines()]
        assert records and {r["rank"] for r in records} == {rank}
        assert json.loads(grown.flight(rank).read_text())["rank"] == rank
    said = "[rank 13] ezpz.train: rank 13/24 (local 1, node 1, via pmi)"
    assert said in grown.log(13).read_text()
    assert not any(p.is_fifo() for p in grown.flight_dir.rglob("*"))
    statuses = read_statuses(grown.path)
    assert [s.rank for s in statuses] == list(range(RANKS))
    assert {s.world_size for s in statuses} == {RANKS}
    hosts = [s.host for s in statuses]
    assert len(set(hosts)) == RANKS // PER_NODE
    assert hosts[0] == hosts[PER_NODE - 1] != hosts[PER_NODE]
    plan = tomllib.loads(grown.run_toml.read_text())
    assert plan["sizes"]["world_size"] == RANKS and plan["ranks_per_node"] == PER_NODE
    assert plan["hosts"] == sorted(set(hosts), key=hosts.index)
    assert json.loads(grown.summary_json.read_text())["ranks"] == RANKS

    listed = cli(["runs", "--outputs", str(tmp_path), "--json"], dict(os.environ))
    (row,) = [r for r in json.loads(listed.stdout) if r["run_id"] == "grown"]
    assert (row["world_size"], row["state"]) == (RANKS, "succeeded")

    # The digest as the finalizer of a real 24-rank run writes it: every rank, its own host.
    digest = read_digest(grown.path)
    assert digest is not None and digest.world == RANKS
    assert digest.statuses() == statuses
    assert [digest.host(rank) for rank in range(RANKS)] == hosts
    loss = digest.band("loss")
    assert loss is not None and set(loss["count"]) == {RANKS}
    assert all(digest.sample(rank) is not None for rank in range(RANKS))
    source = read_digest(finished.good)
    assert source is not None
    assert loss["mean"] == pytest.approx(source.band("loss")["mean"])  # every rank's the same


def test_a_grown_run_holds_a_node_digest_per_node(finished: Finished, tmp_path: Path) -> None:
    """As each node's writer of a real 24-rank run on 2 nodes of 12 leaves it: one digest a
    node, in the shard its host names, holding its own ranks, each as its source rank was."""
    (written,) = RunDir(finished.good).node_digests()
    source = json.loads(written.read_bytes())
    assert set(source["ranks"]) == {"0", "1"}

    done = grow(finished.good, tmp_path / "grown", str(RANKS), "--ranks-per-node", str(PER_NODE))
    assert done.returncode == 0, done.stderr
    grown = RunDir(tmp_path / "grown")
    hosts = [s.host for s in read_statuses(grown.path)]
    nodes = sorted(dict.fromkeys(hosts))
    assert grown.node_digests() == sorted(grown.node_digest(host) for host in nodes)
    digests = read_node_digests(grown.path, live=False)
    assert not digests.stale
    assert sorted(d.host for d in digests.fresh) == nodes
    for digest in digests.fresh:
        assert sorted(digest.ranks) == [r for r in range(RANKS) if hosts[r] == digest.host]
        assert digest.writer_rank == min(digest.ranks)
        for rank, held in digest.ranks.items():
            assert held.host == digest.host
            assert held.sections == {
                k: v for k, v in source["ranks"][str(rank % 2)].items() if isinstance(v, dict)
            }


def test_what_only_the_failing_rank_wrote_stays_with_it(finished: Finished, tmp_path: Path) -> None:
    done = grow(finished.bad, tmp_path / "grown", "8")
    assert done.returncode == 0, done.stderr
    grown = RunDir(tmp_path / "grown")
    raised = sorted(p.name for p, _ in grown.raised_files())
    assert raised == sorted(p.name for p, _ in RunDir(finished.bad).raised_files())
    assert raised
    assert grown.raised(1).name in raised and grown.raised(3).name not in raised


def test_a_directory_that_is_no_run_is_refused(tmp_path: Path) -> None:
    done = grow(tmp_path, tmp_path / "grown", "8")
    assert done.returncode == 2
    assert f"{tmp_path} is not a run directory (no run.toml)" in done.stderr


def test_a_run_grown_past_two_blocks_writes_three(finished: Finished, tmp_path: Path) -> None:
    """2,100 ranks: blocks of 1,024 ranks each (b0000, b0001) and the last 52 in b0002, in
    every rank folder; each rank's path is its block's, at the blocks' edges too."""
    done = grow(finished.good, tmp_path / "grown", "2100")
    assert done.returncode == 0, done.stderr
    grown = RunDir(tmp_path / "grown")
    for folder in (grown.logs_dir, grown.status_dir, grown.metrics_dir, grown.telemetry_dir):
        assert sorted(p.name for p in folder.iterdir()) == ["b0000", "b0001", "b0002"]
    assert len(list((grown.logs_dir / "b0001").iterdir())) == 1024
    assert len(list((grown.logs_dir / "b0002").iterdir())) == 52
    for rank, block in ((1023, "b0000"), (1024, "b0001"), (2047, "b0001"), (2099, "b0002")):
        assert grown.log(rank) == grown.logs_dir / block / f"rank-{rank:05d}.log"
        assert grown.log(rank).is_file() and grown.status(rank).is_file()
    assert [r for _, r in grown.statuses()] == list(range(2100))


def test_a_source_made_before_the_blocks_grows_into_blocks(
    finished: Finished, tmp_path: Path
) -> None:
    """An older run (rank files in the folders themselves) is read as a source all the same,
    and the grown run is written as this version's ranks write theirs."""
    source = tmp_path / "source"
    shutil.copytree(finished.good, source)
    for block in source.glob("*/b0000"):
        for path in block.iterdir():
            path.rename(block.parent / path.name)
        block.rmdir()
    assert (source / "logs" / "rank-00001.log").is_file()

    done = grow(source, tmp_path / "grown", "6")
    assert done.returncode == 0, done.stderr
    grown = RunDir(tmp_path / "grown")
    assert [p.name for p in grown.logs_dir.iterdir()] == ["b0000"]
    assert [r for _, r in grown.logs()] == list(range(6))
    assert (grown.logs_dir / "b0000" / "rank-00005.log").is_file()
