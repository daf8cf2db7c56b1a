"""The ranks' Flight Recorder FIFOs live only while their ranks do: removed by the wrapper at the
rank's end, swept by whoever records the run's end, and a reader that asks an ended rank is told
so (:mod:`runtime.flight`, :func:`ezpz_tui.core.runs.ending.finalise`)."""

from __future__ import annotations

import os
from pathlib import Path

from ezpz_tui.core.runs.ending import finalise
from runtime import flight
from runtime.rundir import RankStatus, RunDir, RunState, State, write_status


def test_the_sweep_removes_every_fifo_and_nothing_else(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.make_folders()
    for rank in range(3):
        os.mkfifo(run.flight_request(rank))
        run.flight(rank).write_text("{}")
    assert flight.remove_requests(run.flight(0).parent) == 3
    assert sorted(p.name for p in run.flight(0).parent.iterdir()) == [
        "rank-00000.json",
        "rank-00001.json",
        "rank-00002.json",
    ]
    assert flight.remove_requests(tmp_path / "no such folder") == 0


def test_the_rank_s_own_removal_leaves_what_is_not_a_fifo(tmp_path: Path) -> None:
    fifo, plain = tmp_path / "rank-00000.fifo", tmp_path / "rank-00001.fifo"
    os.mkfifo(fifo)
    plain.write_text("not a pipe")
    for path in (fifo, plain, tmp_path / "rank-00002.fifo"):
        flight.remove_request(path)
    assert not fifo.exists() and plain.read_text() == "not a pipe"


def test_the_fifo_s_name_is_the_one_the_sweep_looks_for(tmp_path: Path) -> None:
    assert RunDir(tmp_path).flight_request(7).name.endswith(flight.FIFO_SUFFIX)


def test_asking_an_ended_rank_says_it_has_ended(tmp_path: Path) -> None:
    why_not = flight.ask(str(RunDir(tmp_path).flight_request(0)))
    assert why_not is not None and why_not.startswith(
        "no Flight Recorder request pipe: the rank has ended"
    )


def test_recording_the_run_s_end_sweeps_the_fifos_killed_ranks_left(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.make_folders()
    os.mkfifo(run.flight_request(1))
    write_status(tmp_path, RankStatus(rank=1, host="x1", world_size=2))
    end = RunState(State.FAILED, end=10.0, failed_rank=1, cause="rank 1 on x1: SIGKILL")
    finalise(tmp_path, end, 2, 10.0)
    assert not run.flight_request(1).exists()
