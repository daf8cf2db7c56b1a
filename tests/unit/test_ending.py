"""The words a run's ranks end with, decided from their records and the run's end."""

from __future__ import annotations

from pathlib import Path

from ezpz_tui.core.runs.ending import (
    cause_of,
    derived_state,
    final_statuses,
    finalise,
    first_failure,
    how,
)
from ezpz_tui.core.runs.full_disk import NO_SPACE
from ezpz_tui.core.watching.monitor import RunMonitor
from runtime.rundir import (
    RankState,
    RankStatus,
    RunDir,
    RunState,
    State,
    read_statuses,
    write_status,
)

RUNNING, FAILED = RankState.RUNNING, RankState.FAILED


def rank(n: int, state: RankState = RUNNING, end: float | None = None, **kw: object) -> RankStatus:
    return RankStatus(rank=n, host=f"x{n}", state=state, end=end, **kw)  # type: ignore[arg-type]


def ends(changed: list[RankStatus]) -> dict[int, tuple[str, str | None]]:
    return {s.rank: (str(s.state), s.cause) for s in changed}


def test_the_first_own_failure_wins_over_ranks_torn_down_by_a_signal_sent_to_them() -> None:
    torn = rank(0, FAILED, 5.0, signal=15, signal_name="SIGTERM", signals_received=("SIGTERM",))
    crashed = rank(1, FAILED, 9.0, exit_code=3)
    assert first_failure([torn, crashed]) == crashed
    assert cause_of(crashed) == "rank 1 on x1: exit 3"
    oom = rank(2, FAILED, 1.0, signal=9, signal_name="SIGKILL")
    assert first_failure([torn, crashed, oom]) == oom
    assert how(oom) == "SIGKILL (signal 9)"
    assert first_failure([rank(0), rank(1, RankState.SUCCEEDED, 1.0)]) is None


def test_after_a_failure_the_others_are_killed_with_its_rank_as_cause() -> None:
    statuses = [
        rank(0),  # its wrapper was SIGKILLed by the launcher: no end of its own
        rank(1, FAILED, 2.0, exit_code=3),
        rank(2, FAILED, 2.5, signal=15, signal_name="SIGTERM", signals_received=("SIGINT",)),
        rank(3, FAILED, 2.6, signal=9, signal_name="SIGKILL"),  # after rank 1: teardown
        rank(4, RankState.SUCCEEDED, 1.0, exit_code=0),
    ]
    run = RunState(State.FAILED, end=3.0, failed_rank=1)
    changed = final_statuses(statuses, run, world_size=6, now=3.0)
    after = ("killed", "after rank 1 failed")
    assert ends(changed) == {
        0: after,
        2: after,
        3: after,
        5: ("lost", "no status: the rank never started, or its wrapper could not write"),
    }
    assert all(s.ended_by == "supervisor" and s.end is not None for s in changed)
    assert next(s for s in changed if s.rank == 2).signal_name == "SIGTERM"  # kept


def test_a_users_stop_is_no_failure() -> None:
    statuses = [
        rank(0),
        rank(1, FAILED, 2.0, signal=2, signal_name="SIGINT", signals_received=("SIGINT",)),
        rank(2, RankState.SUCCEEDED, 1.0, exit_code=0),
    ]
    run = RunState(State.STOPPED, end=3.0, stopped_by_user=True)
    changed = final_statuses(statuses, run, world_size=3, now=3.0)
    assert ends(changed) == {
        0: ("stopped", "stopped by the user"),
        1: ("stopped", "stopped by the user"),
    }


def test_a_launcher_that_ended_alone_leaves_its_running_ranks_lost() -> None:
    run = RunState(State.FAILED, end=3.0, exit_code=255)
    changed = final_statuses([rank(0)], run, world_size=1, now=3.0)
    assert ends(changed) == {0: ("lost", "no end recorded; the launcher ended (255)")}


def test_on_a_full_disk_the_ranks_that_could_not_record_their_end_failed_of_it() -> None:
    """The supervisor knows why they have no end: not ``lost``, but failed for want of space."""
    run = RunState(State.FAILED, end=3.0, exit_code=255, cause=NO_SPACE)
    changed = final_statuses([rank(0), rank(1, FAILED, 2.0, exit_code=1)], run, 3, now=3.0)
    assert ends(changed) == {0: ("killed", "after rank 1 failed")} | {
        2: ("failed", "no status: no space left on device")
    }
    none_wrote = final_statuses([rank(0), rank(1)], run, world_size=2, now=3.0)
    word = ("failed", "no end recorded: no space left on device")
    assert ends(none_wrote) == {0: word, 1: word}
    assert derived_state(0, RUNNING, run) == RankState.FAILED


def test_finalise_rewrites_the_status_files(tmp_path: Path) -> None:
    RunDir(tmp_path).make_folders()
    write_status(tmp_path, rank(0))
    write_status(tmp_path, rank(1, FAILED, 2.0, exit_code=3))
    finalise(tmp_path, RunState(State.FAILED, end=3.0, failed_rank=1), 2, now=3.0)
    assert [(s.rank, s.state, s.cause) for s in read_statuses(tmp_path)] == [
        (0, RankState.KILLED, "after rank 1 failed"),
        (1, RankState.FAILED, None),
    ]


def test_readers_derive_the_end_of_a_stale_running_rank(tmp_path: Path) -> None:
    failed = RunState(State.FAILED, failed_rank=1)
    assert derived_state(0, RUNNING, failed) == RankState.KILLED
    assert derived_state(1, RUNNING, failed) == RankState.LOST
    assert derived_state(0, RUNNING, RunState(State.STOPPED)) == RankState.STOPPED
    assert derived_state(0, RUNNING, RunState(State.LOST)) == RankState.LOST
    assert derived_state(0, RUNNING, RunState(State.RUNNING)) == RUNNING
    assert derived_state(0, RankState.SUCCEEDED, failed) == RankState.SUCCEEDED

    monitor = RunMonitor(tmp_path)
    monitor.expect_ranks(2)
    monitor.ranks[0].status = RUNNING
    assert monitor.state_of(0, now=0.0) == RUNNING
    monitor.run_state = RunState(State.LOST)
    assert monitor.state_of(0, now=0.0) == RankState.LOST
    assert monitor.state_of(1, now=0.0) == RankState.WAITING  # never wrote: nothing to derive
