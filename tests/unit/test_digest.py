"""``digest.json``'s reader and writer: what is written reads back, and anything else
(torn, another version, a wrong shape) reads as none, never raises."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ezpz_tui.core.runs.digest import (
    BAND_COLUMNS,
    FROM_FILES,
    RANK_COLUMNS,
    SAMPLE_COLUMNS,
    VERSION,
    rank_statuses,
    read_digest,
    write_digest,
)
from runtime.rundir import RankState, RankStatus, RunDir, RunState, State, write_status


def _digest(world: int = 2) -> dict:
    ranks: dict = {name: [None] * world for name in RANK_COLUMNS}
    ranks["hosts"], ranks["commands"] = ["x0", "x1"], [["python", "train.py"]]
    ranks["host"], ranks["command"] = [0, 1][:world], [0] * world
    ranks["state"] = ["succeeded", "failed"][:world]
    ranks["exit_code"] = [0, 3][:world]
    ranks["destroyed_at_exit"] = [False, True][:world]
    ranks["signals_received"] = [None, ["SIGTERM"]][:world]
    ranks["last"] = {"loss": [1.5, "NaN"][:world]}
    ranks["telemetry"] = {name: [None] * world for name in SAMPLE_COLUMNS}
    ranks["telemetry"]["time"] = [100.0, None][:world]
    ranks["telemetry"]["rss_bytes"] = [1 << 20, None][:world]
    band = {name: [0] for name in BAND_COLUMNS}
    return {
        "version": VERSION,
        "run_id": "r",
        "written": 5.0,
        "world": world,
        "ranks": ranks,
        "bands": {"loss": band},
        "reads": {"notes": []},
    }


def test_round_trip(tmp_path: Path) -> None:
    write_digest(tmp_path, _digest())
    got = read_digest(tmp_path)
    assert got is not None and got.world == 2 and got.written == 5.0
    first, second = got.statuses()
    assert first == RankStatus(
        0, host="x0", command=("python", "train.py"), state=RankState.SUCCEEDED, exit_code=0
    )
    assert second.state == RankState.FAILED and second.destroyed_at_exit
    assert second.signals_received == ("SIGTERM",)
    assert got.host(1) == "x1" and got.host(7) == ""
    assert got.last(0) == {"loss": 1.5} and got.last(1) == {}  # NaN: no finite value
    sample = got.sample(0)
    assert sample is not None and sample.time == 100.0 and sample.rss_bytes == 1 << 20
    assert got.sample(1) is None
    assert got.metrics() == ["loss"] and got.band("loss")["step"] == [0]


def test_nonfinite_is_refused_by_the_writer(tmp_path: Path) -> None:
    data = _digest()
    data["ranks"]["last"]["loss"][0] = float("nan")
    with pytest.raises(ValueError):
        write_digest(tmp_path, data)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda text: text[: len(text) // 2],  # torn
        lambda text: text.replace(f'"version":{VERSION}', '"version":0'),  # another version
        lambda text: text.replace('"world":2', '"world":3'),  # columns too short
        lambda text: "[]",
    ],
)
def test_spoilt_digest_reads_as_none(tmp_path: Path, spoil) -> None:
    write_digest(tmp_path, _digest())
    path = RunDir(tmp_path).digest_json
    path.write_text(spoil(path.read_text()))
    assert read_digest(tmp_path) is None


def test_missing_digest_reads_as_none(tmp_path: Path) -> None:
    assert read_digest(tmp_path) is None
    assert json.loads(json.dumps(_digest()))["world"] == 2


def test_a_digest_written_before_the_run_ended_is_not_used(tmp_path: Path) -> None:
    """One written by a finalize asked of the live run holds no rank's end: the files do."""
    RunDir(tmp_path).make_folders()
    write_status(tmp_path, RankStatus(0, state=RankState.FAILED, exit_code=3))
    write_digest(tmp_path, _digest(world=1))  # written at 5.0
    ended = RunState(State.FAILED, end=10.0)
    found = rank_statuses(tmp_path, ended)
    assert found.digest is None and found.notes == (FROM_FILES,)
    assert [s.exit_code for s in found.read] == [3]
    found = rank_statuses(tmp_path, replace(ended, end=4.0))
    assert found.digest is not None and found.notes == ()
    assert [s.exit_code for s in found.read] == [0]
    assert rank_statuses(tmp_path, RunState(State.RUNNING)).digest is None  # a live run's files


def test_what_compare_and_goodput_take_reads_back_or_is_none(tmp_path: Path) -> None:
    """A digest without them (written before digests held them), or with a wrong shape, is
    none: its readers read the ranks' files instead."""
    data = _digest()
    write_digest(tmp_path, data)
    got = read_digest(tmp_path)
    assert got is not None
    assert got.peaks() is None and got.others_garbage() is None
    assert got.highest_step() == (False, None)
    data["ranks"]["peak"] = {"mem_peak_gb": [2.5, None]}
    data["reads"].update(others_garbage=3, highest_step=41)
    write_digest(tmp_path, data)
    got = read_digest(tmp_path)
    assert got is not None and got.peaks() == {"mem_peak_gb": [2.5, None]}
    assert got.others_garbage() == 3 and got.highest_step() == (True, 41)
    data["ranks"]["peak"] = {"mem_peak_gb": [2.5]}  # not one value a rank
    data["reads"].update(others_garbage="3", highest_step="41")
    write_digest(tmp_path, data)
    got = read_digest(tmp_path)
    assert got is not None and got.peaks() is None and got.others_garbage() is None
    assert got.highest_step() == (False, None)
    data["reads"]["highest_step"] = None  # no rank recorded a step: held, and none
    write_digest(tmp_path, data)
    got = read_digest(tmp_path)
    assert got is not None and got.highest_step() == (True, None)
