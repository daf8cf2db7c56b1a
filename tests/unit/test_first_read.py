"""The first read in a child process (``python -m ezpz_tui.core.watching.first_read``) of a live
run written by another process: what it hands back, and the follower that goes on from where it
left each file, torn last lines included, reading nothing twice."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from ezpz_tui.core.watching.first_read import Ending, FirstRead, Part, Request
from ezpz_tui.core.watching.followers import RunFollower
from runtime.rundir import RankState
from tests.unit.test_followers import Writer, log_texts
from tests.unit.test_followers import writer as writer  # the fixture

RANKS = 3


def _request(run: Path) -> Request:
    return Request(str(run), RANKS, 0, 100, 1000, 1.5, 1 << 20, 20_000, None, 60.0, 512)


def _record(rank: int, step: int) -> bytes:
    return json.dumps({"rank": rank, "step": step, "timestamp": 1.0 + step, "loss": 1.0}).encode()


def test_a_live_run_read_in_a_child_then_followed_from_where_it_left(
    tmp_path: Path, writer: Writer
) -> None:
    run = tmp_path / "run"
    writer.do("replace", run / "state.json", b'{"state": "running"}')
    for rank in range(RANKS):
        status = {"rank": rank, "state": "running", "host": "nid001"}
        writer.do("replace", run / "status" / f"rank-{rank:05d}.json", json.dumps(status).encode())
        writer.do("append", run / "logs" / f"rank-{rank:05d}.log", b"one\ntwo\nthr")  # torn
        records = b"".join(_record(rank, s) + b"\n" for s in range(5)) + _record(rank, 5)[:9]
        writer.do("append", run / "metrics" / f"rank-{rank:05d}.jsonl", records)

    reader = FirstRead(_request(run))
    try:
        assert reader.pid != os.getpid()
        items = list(reader.items(threading.Event()))
    finally:
        reader.close()
    *parts, ending = items
    assert parts and all(isinstance(p, Part) for p in parts) and isinstance(ending, Ending)
    assert ending.pid == reader.pid and not ending.finished
    ranks = {r: i for p in parts for r, i in p.ranks.items()}
    assert sorted(ranks) == list(range(RANKS))
    assert {i.status for i in ranks.values()} == {RankState.RUNNING}
    lines = {r: [line[1] for line in held] for p in parts for r, held in p.lines.items()}
    assert lines == {r: ["one", "two"] for r in range(RANKS)}
    assert all(ending.store.points(r) == 5 for r in range(RANKS))

    follower = RunFollower(run, rescan_s=0, resume=ending.resume)
    first = follower.poll()
    assert not first.logs and not first.records  # nothing read twice
    for rank in range(RANKS):
        writer.do("append", run / "logs" / f"rank-{rank:05d}.log", b"ee\nfour\n")
        writer.do(
            "append", run / "metrics" / f"rank-{rank:05d}.jsonl", _record(rank, 5)[9:] + b"\n"
        )
    batch = follower.poll()
    assert log_texts(batch) == {r: ["three", "four"] for r in range(RANKS)}
    assert {r: [c for c in cols.steps] for r, cols in batch.records.items()} == {
        r: [5] for r in range(RANKS)
    }
    assert not batch.garbage
