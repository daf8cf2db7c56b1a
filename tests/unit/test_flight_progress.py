"""The collectives' verdicts from the ranks' compact progress (``runtime.flight.progress``, as
their node digests hold it) rather than their files: a 1,024-rank job's missing rank, mismatch
and straggler, the waits too short or the records too old to judge, and where the files are
still read (a stale digest, a live run without digests)."""

from __future__ import annotations

import json
from pathlib import Path

from ezpz_tui.core.watching.collectives import (
    NO_DIGEST,
    Flights,
    Mismatch,
    Missing,
    arrival_lags,
    parse_progress,
    read_records,
    verdict,
)
from runtime.flight import ARRIVALS
from runtime.rundir import RunDir
from tests.fixtures.flights import entry, progress_of, record, write_digest, write_flights

WORLD = 1024
T0 = 1_800_000_000.0
STEP = 0.1


def dumps_of(progress_by_rank: dict[int, dict], written: float = 0.0) -> Flights:
    return Flights({r: parse_progress(p, r, written) for r, p in progress_by_rank.items()})


def test_the_progress_keeps_the_newest_arrivals_of_each_group() -> None:
    calls = [entry(s, T0 + s * STEP) for s in range(1, 101)]
    calls += [entry(s, T0 + 20 + s, op="broadcast", group=("1", "tp")) for s in range(1, 4)]
    said = progress_of(calls, at=T0 + 30, completed=99)
    default, tp = said["groups"]["0"], said["groups"]["1"]
    assert (default["entered"], default["completed"], default["op"]) == (100, 99, "all_reduce")
    assert (default["seq"], len(default["dt_us"])) == (100 - ARRIVALS + 1, ARRIVALS - 1)
    assert default["dt_us"][-1] == round((ARRIVALS - 1) * STEP * 1e6)
    assert (tp["desc"], tp["entered"], tp["op"], tp["seq"]) == ("tp", 3, "broadcast", 1)
    assert len(json.dumps(said)) < 1000  # what a rank adds to its node's digest


def test_a_rank_missing_from_the_sixth_collective_by_its_progress() -> None:
    at = T0 + 6 * STEP + 30
    ranks = {}
    for r in range(WORLD):
        last = 5 if r == 517 else 6
        calls = [entry(s, T0 + s * STEP) for s in range(1, last + 1)]
        ranks[r] = progress_of(calls, at, completed=5)
    found = verdict(dumps_of(ranks), now=at, world=WORLD)
    assert isinstance(found, Missing)
    assert (found.collective.op, found.collective.seq, found.missing) == ("all_reduce", 6, (517,))
    assert found.lines() == [
        "all_reduce #6 (default group, 4 floats): ranks 0-516,518-1023 waiting for 30 s; "
        "rank 517 never entered it",
        "  rank 517: last collective all_reduce #5",
    ]


def test_a_short_wait_a_completed_collective_or_an_older_record_is_no_verdict() -> None:
    def job(at: float, behind_at: float, completed: int = 5) -> dict[int, dict]:
        ranks = {
            r: progress_of([entry(s, T0 + s) for s in range(1, 7)], at, completed) for r in range(4)
        }
        ranks[3] = progress_of([entry(s, T0 + s) for s in range(1, 6)], behind_at, completed)
        return ranks

    assert isinstance(verdict(dumps_of(job(T0 + 30, T0 + 30)), T0 + 30, 4), Missing)
    assert verdict(dumps_of(job(T0 + 15, T0 + 15)), T0 + 15, 4) is None  # 9 s < 2 x 5 s
    assert verdict(dumps_of(job(T0 + 30, T0 + 30, completed=6)), T0 + 30, 4) is None
    # rank 3 last looked before the others entered #6, and its digest is no newer
    assert verdict(dumps_of(job(T0 + 30, T0 + 5)), T0 + 30, 4) is None
    # ... but its digest, written since, still held that progress
    assert isinstance(verdict(dumps_of(job(T0 + 30, T0 + 5), T0 + 30), T0 + 30, 4), Missing)


def test_waiting_ranks_past_the_collective_give_its_number_and_a_wait_at_least() -> None:
    """Ranks that entered 100 more collectives (queued, as NCCL's are) than the one rank 1
    never entered: their progress no longer holds #6, only that they entered it earlier."""
    at = T0 + 200
    ranks = {0: progress_of([entry(s, T0 + s) for s in range(1, 106)], at, completed=5)}
    ranks[1] = progress_of([entry(s, T0 + s) for s in range(1, 6)], at, completed=5)
    found = verdict(dumps_of(ranks), now=at, world=2)
    assert isinstance(found, Missing) and found.collective.seq == 6
    assert found.headline().startswith("collective #6 (default group): rank 0 waiting for ")
    assert found.waiting_s >= 200 - (105 - ARRIVALS + 1)
    assert found.to_json()["collective"] is None


def test_a_mismatch_by_the_progress_at_one_sequence_number() -> None:
    ranks = {
        r: progress_of([entry(1, T0), entry(2, T0 + 1, op="broadcast")], T0 + 9) for r in range(4)
    }
    ranks[1] = progress_of([entry(1, T0), entry(2, T0 + 1, op="broadcast", sizes=[[8]])], T0 + 9)
    found = verdict(dumps_of(ranks), now=T0 + 9, world=4)
    assert isinstance(found, Mismatch) and found.seq == 2
    assert [(r, c.sizes) for r, c in found.calls] == [((0, 2, 3), ((4,),)), ((1,), ((8,),))]


def test_the_rank_arriving_last_by_its_progress() -> None:
    ranks = {}
    for r in range(WORLD):
        late = 0.05 if r == 700 else 0.0
        calls = [entry(s, T0 + s * STEP + late) for s in range(1, 101)]
        ranks[r] = progress_of(calls, T0 + 20)
    lags = arrival_lags(dumps_of(ranks).dumps, WORLD)
    assert lags.slow == frozenset({700}) and lags.op == "all_reduce"
    assert round(lags.lag_s[700], 3) == 0.05 and lags.last_share[700] == 1.0


def test_a_live_run_reads_the_digests_and_a_stale_one_s_ranks_files(tmp_path: Path) -> None:
    now = T0 + 60
    calls = [entry(s, T0 + s) for s in range(1, 7)]
    write_digest(tmp_path, "x1", {0: progress_of(calls, now), 1: progress_of(calls, now)}, now)
    old = progress_of(calls[:3], T0 + 4)
    write_digest(tmp_path, "x2", {2: old, 3: old}, T0 + 4)  # its writer died at T0 + 4
    write_flights(tmp_path, {2: {**record(2, calls[:5], now - 1), "written": "asked"}})
    write_flights(tmp_path, {0: {**record(0, calls[:1], now - 1), "written": "asked"}})
    found = read_records(tmp_path, live=True, now=now)
    assert {r: d.newest["0"] for r, d in found.dumps.items()} == {0: 6, 1: 6, 2: 5, 3: 3}
    [note] = found.notes
    assert note.startswith("node digest of 1 node (x2) not rewritten for ")
    assert note.endswith("its writer is gone, so ranks 2-3 read from their own files")
    # Once ended: every file (written at the end or asked), the digests for the rest.
    ended = read_records(tmp_path, live=False, now=now)
    assert {r: d.newest["0"] for r, d in ended.dumps.items()} == {0: 6, 1: 6, 2: 5, 3: 3}
    assert ended.notes == []


def test_a_live_run_without_digests_is_read_from_its_files_and_says_so(tmp_path: Path) -> None:
    write_flights(tmp_path, {0: record(0, [entry(1, T0)], T0 + 1)})
    found = read_records(tmp_path, live=True, now=T0 + 2)
    assert list(found.dumps) == [0] and found.notes == [NO_DIGEST]
    assert not RunDir(tmp_path).nodes_dir.exists()
