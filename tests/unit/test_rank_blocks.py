"""Rank files in blocks of 1,024 ranks (docs/run-directory.md, "The filesystem's share"): the
path of every rank at the blocks' edges, the listings of both layouts, the end's sweep of every
block, and a follower that finds files in blocks within its budget of filesystem calls."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ezpz_tui.core.runs.ending import finalise
from ezpz_tui.core.watching import fscalls
from ezpz_tui.core.watching.followers import RunFollower
from ezpz_tui.core.watching.listing import RunListing
from runtime.rundir import (
    RankState,
    RankStatus,
    RunDir,
    RunState,
    State,
    block_name,
    blocks_of,
    read_statuses,
    write_state,
    write_status,
)

EDGES = (0, 1023, 1024, 2047, 2048)


def test_a_ranks_path_is_its_blocks_and_the_listings_find_it_back(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.make_folders(2049)
    assert [p.name for p in sorted(run.status_dir.iterdir())] == ["b0000", "b0001", "b0002"]
    assert blocks_of(127_488)[-1] == "b0124" and len(blocks_of(127_488)) == 125
    for rank in EDGES:
        write_status(tmp_path, RankStatus(rank, world_size=2049))
        run.log(rank).write_text(f"rank {rank}\n")
        run.metrics(rank).write_text("")
    assert run.log(1023).parent.name == "b0000" and run.log(1024).parent.name == "b0001"
    assert run.status(127_487) == tmp_path / "status" / "b0124" / "rank-127487.json"
    assert [(path, rank) for path, rank in run.logs()] == [(run.log(r), r) for r in EDGES]
    assert [rank for _, rank in run.statuses()] == list(EDGES)
    assert [s.rank for s in read_statuses(tmp_path)] == list(EDGES)
    assert {path.parent.name for path, _ in run.statuses()} == {"b0000", "b0001", "b0002"}


def test_a_run_made_before_the_blocks_is_read_from_its_folders(tmp_path: Path) -> None:
    """Rank files in the folders themselves (every run made before): each path and listing
    finds them there, and a status rewritten for such a run stays where it was."""
    for folder in ("logs", "status", "metrics"):
        (tmp_path / folder).mkdir()
    for rank in (0, 1):
        (tmp_path / "logs" / f"rank-{rank:05d}.log").write_text(f"rank {rank}\n")
        status = RankStatus(rank, state=RankState.RUNNING)
        (tmp_path / "status" / f"rank-{rank:05d}.json").write_text(json.dumps(status.to_json()))
    run = RunDir(tmp_path)
    assert run.log(1) == tmp_path / "logs" / "rank-00001.log"
    assert run.status(0) == tmp_path / "status" / "rank-00000.json"
    assert [rank for _, rank in run.logs()] == [0, 1]
    write_status(tmp_path, RankStatus(1, state=RankState.SUCCEEDED, exit_code=0))
    assert sorted(p.name for p in run.status_dir.iterdir()) == [
        "rank-00000.json",
        "rank-00001.json",
    ]
    assert [s.state for s in read_statuses(tmp_path)] == [RankState.RUNNING, RankState.SUCCEEDED]
    # The ranks' own writers always write the blocks, and make theirs when it is missing.
    assert RunDir(tmp_path, fresh=True).log(1) == tmp_path / "logs" / "b0000" / "rank-00001.log"


def test_the_end_sweeps_the_fifos_of_every_block(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.make_folders(1025)
    for rank in (0, 1024):
        os.mkfifo(run.flight_request(rank))
        run.flight(rank).write_text("{}")
        write_status(tmp_path, RankStatus(rank, state=RankState.SUCCEEDED, exit_code=0))
    end = RunState(State.SUCCEEDED, end=2.0, exit_code=0)
    finalise(tmp_path, end, None, 2.0)
    left = sorted(p.relative_to(tmp_path).as_posix() for p in run.flight_dir.rglob("rank-*"))
    assert left == ["flight/b0000/rank-00000.json", "flight/b0001/rank-01024.json"]


def _live_run(root: Path, ranks: int) -> RunDir:
    """A live run of ``ranks`` ranks whose every rank wrote its log, status and metrics."""
    run = RunDir(root)
    run.make_folders(ranks)
    write_state(root, RunState(State.RUNNING, start=1.0))
    for rank in range(ranks):
        status = RankStatus(rank, world_size=ranks, state=RankState.RUNNING)
        run.status(rank).write_text(json.dumps(status.to_json()))
        run.log(rank).write_text("")
        run.metrics(rank).write_text("")
        run.telemetry(rank).write_text("")
    return run


def test_a_full_block_is_never_listed_again_and_a_new_file_in_another_is_found(
    tmp_path: Path,
) -> None:
    """3,000 ranks: blocks b0000 and b0001 hold every rank they can, b0002 holds 952 of them
    (the world's last). Once found, the full blocks cost no call; the last block's missing
    ranks are looked for there, and the log a late rank makes is found within a few looks."""
    ranks = 3000
    run = _live_run(tmp_path, ranks)
    late = run.log(2999)
    late.unlink()
    listing = RunListing(tmp_path, stats_per_second=200)
    listing.world_size = ranks
    found = listing.new_files(force=True)
    assert len(found) == 3 * ranks - 1 + 0  # every log, metrics and telemetry file but one
    full = {run.logs_dir / "b0000", run.logs_dir / "b0001", run.metrics_dir / "b0002"}
    assert full <= listing._complete and run.logs_dir / "b0002" not in listing._complete
    time.sleep(2.1)  # past the clock's granularity: an unchanged folder is not listed again
    before = fscalls.counts().get("scandir", 0)
    assert listing.new_files() == []
    assert fscalls.counts().get("scandir", 0) == before, "nothing changed: nothing listed"
    late.write_text("late\n")
    seen = []
    for _ in range(20):
        seen = [f for f in listing.new_files() if f.path == late]
        if seen:
            break
        time.sleep(0.1)
    assert seen and seen[0].rank == 2999


def test_following_a_live_run_in_blocks_stays_within_the_budget(tmp_path: Path) -> None:
    """4,100 ranks (5 blocks a folder): an idle live run costs no more calls a second than
    the [follow] budget; a status rewritten into a block is still seen within a second."""
    ranks = 4100
    run = _live_run(tmp_path, ranks)
    follower = RunFollower(tmp_path, stats_per_second=200, first_reads=4096)
    for _ in range(10):  # the first reads
        follower.poll()
    start, calls = time.monotonic(), fscalls.total()
    for _ in range(30):  # 3 s of polls every 0.1 s
        follower.poll()
        time.sleep(0.1)
    rate = (fscalls.total() - calls) / (time.monotonic() - start)
    # 200 a second, the slowest promise of 12,300 files (205 a second) and a burst
    assert rate <= 500, f"{rate:.0f} filesystem calls a second"
    write_status(tmp_path, RankStatus(4321, world_size=ranks, state=RankState.FAILED, exit_code=3))
    seen_after = None
    written = time.monotonic()
    for _ in range(40):
        if 4321 in follower.poll().status:
            seen_after = time.monotonic() - written
            break
        time.sleep(0.1)
    assert seen_after is not None and seen_after < 2.0, seen_after
    assert run.status(4321).parent.name == block_name(4321) == "b0004"
