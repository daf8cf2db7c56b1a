"""The collectives' matcher on the Flight Recorder files of a 1,024-rank job (written by
``tests/fixtures/flights.py`` as ``runtime.flight`` writes them): one rank missing, a hang in
a second group, a mismatch, a clean job, and the rank that arrives last."""

from __future__ import annotations

import json
from pathlib import Path

from ezpz_tui.core.watching.collectives import (
    LAG_MIN_CALLS,
    Mismatch,
    Missing,
    arrival_lags,
    read_flights,
    verdict,
)
from ezpz_tui.core.watching.why import why_report
from runtime.rundir import RunDir
from tests.fixtures.flights import entry, record, write_flights
from tests.fixtures.runs import make_run

WORLD = 1024
T0 = 1_800_000_000.0  # when the job's first collective was called
STEP = 0.1  # seconds between two collectives


def clean_job(steps: int = 8) -> dict[int, dict]:
    """Every rank called the same ``steps`` all_reduces at the same times."""
    return {
        r: record(r, [entry(s, T0 + s * STEP) for s in range(1, steps + 1)], T0 + steps)
        for r in range(WORLD)
    }


def read(tmp_path: Path, records: dict[int, dict]):
    write_flights(tmp_path, records)
    return read_flights(tmp_path)


def test_clean_job_has_no_verdict_and_no_straggler(tmp_path: Path) -> None:
    flights = read(tmp_path, clean_job())
    assert len(flights.dumps) == WORLD and flights.notes == []
    assert verdict(flights, now=T0 + 60, world=WORLD) is None
    lags = arrival_lags(flights.dumps, WORLD)
    assert lags.slow == frozenset()
    assert set(lags.lag_s) == set(range(WORLD)) and max(lags.lag_s.values()) == 0


def test_one_rank_missing_from_the_sixth_collective(tmp_path: Path) -> None:
    records = clean_job(steps=5)
    for r in range(WORLD):
        if r != 517:
            records[r]["entries"].append(entry(6, T0 + 6 * STEP))
    found = verdict(read(tmp_path, records), now=T0 + 6 * STEP + 30, world=WORLD)
    assert isinstance(found, Missing)
    assert (found.collective.op, found.collective.seq, found.collective.desc) == (
        "all_reduce",
        6,
        "default_pg",
    )
    assert found.missing == (517,)
    assert found.waiting == tuple(r for r in range(WORLD) if r != 517)
    assert found.last[517] is not None and found.last[517].seq == 5
    assert round(found.waiting_s) == 30
    assert found.lines() == [
        "all_reduce #6 (default group, 4 floats): ranks 0-516,518-1023 waiting for 30 s; "
        "rank 517 never entered it",
        "  rank 517: last collective all_reduce #5",
    ]
    data = found.to_json()
    assert (data["seq"], data["missing"], data["last_collective"]) == (
        6,
        [517],
        {"517": {"collective": "all_reduce", "seq": 5}},
    )


def test_a_wait_shorter_than_two_intervals_is_no_verdict(tmp_path: Path) -> None:
    """A rank one collective behind in files written seconds apart is timing, not a hang."""
    records = clean_job(steps=5)
    for r in range(1, WORLD):
        records[r]["entries"].append(entry(6, T0 + 6 * STEP))
    assert verdict(read(tmp_path, records), now=T0 + 6 * STEP + 9, world=WORLD) is None


def test_the_recorder_status_stands_for_entries_no_longer_written(tmp_path: Path) -> None:
    """Rank 3's newest entries are all in another group; its status still says it called the
    default group's #6, which rank 8 did not."""
    records = clean_job(steps=6)
    other = ("1", "pair")
    records[3]["entries"] = [entry(s, T0 + 1 + s, op="send", group=other) for s in range(1, 9)]
    records[3]["pg_status"] = {"0": {"last_enqueued_collective": "6"}}
    records[8]["entries"] = records[8]["entries"][:4]
    records[8]["pg_status"] = {"0": {"last_enqueued_collective": "5"}}
    found = verdict(read(tmp_path, records), now=T0 + 60, world=WORLD)
    assert isinstance(found, Missing)
    assert (found.collective.seq, found.missing) == (6, (8,))
    assert 3 in found.waiting
    assert "  rank 8: last collective #5" in found.lines()


def test_a_rank_with_no_file_is_missing_too(tmp_path: Path) -> None:
    records = clean_job(steps=3)
    del records[1023]
    found = verdict(read(tmp_path, records), now=T0 + 60, world=WORLD)
    assert isinstance(found, Missing)
    assert (found.collective.seq, found.missing, found.no_record) == (1, (1023,), (1023,))
    assert "  rank 1023: no Flight Recorder record" in found.lines()


def test_hang_in_a_second_group_names_that_group(tmp_path: Path) -> None:
    """Ranks 0-511 also form group "1" (the first half); rank 3 never enters its 4th broadcast
    there while the default group runs clean."""
    half = ("1", "first_half")
    records = clean_job(steps=8)
    for r in range(512):
        last = 3 if r == 3 else 4
        more = [entry(s, T0 + s, op="broadcast", group=half) for s in range(1, last + 1)]
        records[r]["entries"] += more
    found = verdict(read(tmp_path, records), now=T0 + 60, world=WORLD)
    assert isinstance(found, Missing)
    assert (found.collective.op, found.collective.seq, found.collective.group) == (
        "broadcast",
        4,
        "1",
    )
    assert found.missing == (3,)
    assert found.waiting == tuple(r for r in range(512) if r != 3)
    assert found.headline().startswith(
        "broadcast #4 (group 1 (first_half), 4 floats): ranks 0-2,4-511"
    )


def test_mismatch_in_sizes_and_in_dtype(tmp_path: Path) -> None:
    records = clean_job(steps=6)
    records[700]["entries"][2] = entry(3, T0 + 3 * STEP, sizes=[[8]])
    records[701]["entries"][4] = entry(5, T0 + 5 * STEP, dtype="Int")
    found = verdict(read(tmp_path, records), now=T0 + 60, world=WORLD)
    assert isinstance(found, Mismatch)
    assert found.seq == 3  # the first one
    assert [(ranks[:2], call.sizes) for ranks, call in found.calls] == [
        ((0, 1), ((4,),)),
        ((700,), ((8,),)),
    ]
    assert found.headline() == (
        "mismatch at collective #3 (default group): ranks 0-699,701-1023 all_reduce with "
        "4 floats; rank 700 all_reduce with 8 floats"
    )
    records[700]["entries"][2] = entry(3, T0 + 3 * STEP)
    found = verdict(read(tmp_path, records), now=T0 + 60, world=WORLD)
    assert isinstance(found, Mismatch) and found.seq == 5
    assert found.calls[1][0] == (701,) and found.calls[1][1].dtypes == ("Int",)


def test_different_op_at_one_sequence_number_is_a_mismatch(tmp_path: Path) -> None:
    records = clean_job(steps=4)
    records[5]["entries"][3] = entry(4, T0 + 4 * STEP, op="all_gather")
    found = verdict(read(tmp_path, records), now=T0 + 60, world=WORLD)
    assert isinstance(found, Mismatch) and found.seq == 4
    assert found.calls[1][1].op == "all_gather" and found.calls[1][0] == (5,)


def test_a_scatter_whose_other_members_hold_no_tensors_is_no_mismatch(tmp_path: Path) -> None:
    """torch.distributed.checkpoint scatters its plan from rank 0: the others pass none."""
    records = clean_job(steps=4)
    for r in range(WORLD):
        sizes = [[2, 1]] if r == 0 else []
        records[r]["entries"][3] = entry(4, T0 + 4 * STEP, op="scatter", sizes=sizes, dtype="Long")
    assert verdict(read(tmp_path, records), now=T0 + 60, world=WORLD) is None
    records[9]["entries"][3] = entry(4, T0 + 4 * STEP, op="all_reduce")
    found = verdict(read(tmp_path, records), now=T0 + 60, world=WORLD)
    assert isinstance(found, Mismatch) and found.calls[1][0] == (9,)


def test_the_rank_that_arrives_last_is_slow(tmp_path: Path) -> None:
    records = clean_job(steps=0)
    for r in range(WORLD):
        late = 0.040 if r == 42 else 0.0001 * (r % 7)  # a little jitter everywhere else
        records[r]["entries"] = [entry(s, T0 + s * STEP + late) for s in range(1, 41)]
    lags = arrival_lags(read(tmp_path, records).dumps, WORLD)
    assert lags.slow == frozenset({42})
    assert abs(lags.lag_s[42] - 0.0397) < 0.001
    assert lags.why(42) == "arrives 40 ms after the median at all_reduce"
    assert lags.last_share[42] == 1.0


def test_a_few_collectives_in_common_name_no_straggler(tmp_path: Path) -> None:
    """A job's set-up calls a collective or two, where one rank may well come last: that rank
    is slow only once it has come last at :data:`LAG_MIN_CALLS` of them."""
    for calls, slow in ((LAG_MIN_CALLS - 1, frozenset()), (LAG_MIN_CALLS, frozenset({1}))):
        records = {
            r: record(r, [entry(s, T0 + s + 0.03 * (r == 1)) for s in range(1, calls + 1)], T0)
            for r in range(4)
        }
        assert arrival_lags(read(tmp_path, records).dumps, 4).slow == slow, calls


def test_bad_files_are_named_and_the_rest_still_read(tmp_path: Path) -> None:
    records = clean_job(steps=2)
    write_flights(tmp_path, records)
    RunDir(tmp_path).flight(9).write_text("{not json")
    flights = read_flights(tmp_path)
    assert len(flights.dumps) == WORLD - 1
    assert flights.notes == ["flight/rank-00009.json: not a Flight Recorder record"]


def test_why_of_a_failed_run_names_its_mismatch(tmp_path: Path) -> None:
    """The failure panel's words and ``why``'s: a failed run whose ranks called different sizes
    at one collective says so under its cause; its missing ranks are not guessed (ended)."""
    run = make_run(
        tmp_path,
        run_id="20261127-100000-000-tp1pp1cp1",
        state="failed",
        exit_code=1,
        sizes={},
        ranks=4,
        steps=10,
        created=T0,
        failing_rank=1,
    )
    records = {r: record(r, [entry(s, T0 + s) for s in (1, 2, 3)], T0 + 5) for r in range(4)}
    records[1]["entries"][1] = entry(2, T0 + 2, op="broadcast", sizes=[[8]])
    records[3]["entries"] = records[3]["entries"][:1]  # ended before #2: no verdict of its own
    write_flights(run, records)
    text = why_report(run, as_json=False)
    assert "Collectives (Flight Recorder):" in text.splitlines()
    assert (
        "  mismatch at collective #2 (default group): ranks 0,2 all_reduce with 4 floats; "
        "rank 1 broadcast with 8 floats"
    ) in text.splitlines()
    data = json.loads(why_report(run, as_json=True))
    assert data["failed"] is True and data["collectives"]["kind"] == "mismatch"
    assert [c["ranks"] for c in data["collectives"]["calls"]] == [[0, 2], [1]]
