"""Straggler detection from the records' step times, in the monitor and in ``ezpz-tui top``."""

from __future__ import annotations

from pathlib import Path

from ezpz_tui.core.watching.followers import RunFollower
from ezpz_tui.core.watching.monitor import RunMonitor
from ezpz_tui.core.watching.stragglers import StepTimes
from runtime.record_columns import RecordColumns
from runtime.rundir import RankState
from tests.fixtures.telemetry import write_running, write_steps

T0 = 1_800_000_000.0


def columns(rank: int, dts: list[float], with_dt: bool = True, start: float = T0) -> RecordColumns:
    stamps, now = [], start
    for dt in dts:
        now += dt
        stamps.append(now)
    metrics = {"dt": list(dts)} if with_dt else {}
    return RecordColumns(rank, list(range(len(dts))), stamps, metrics)


def test_the_rank_with_twice_the_median_step_time_is_slow() -> None:
    steps = StepTimes(slow_factor=1.5)
    steps.update({r: columns(r, [0.2, 0.21, 0.2]) for r in range(7)} | {7: columns(7, [0.4] * 3)})
    assert steps.slow == {7}
    assert steps.median is not None and abs(steps.median - 0.2) < 0.011
    assert steps.recent(7) == 0.4


def test_step_times_come_from_timestamps_when_records_have_no_dt() -> None:
    steps = StepTimes()
    steps.update({0: columns(0, [0.1] * 4, with_dt=False), 1: columns(1, [0.5] * 4, False)})
    assert steps.slow == {1}
    assert abs((steps.recent(1) or 0) - 0.5) < 1e-6


def test_one_odd_step_is_no_flag_but_three_are() -> None:
    steps = StepTimes()
    steps.update({0: columns(0, [0.2] * 3), 1: columns(1, [0.2] * 3)})
    steps.update({0: columns(0, [0.2]), 1: columns(1, [0.9])})
    assert steps.slow == frozenset(), "the median of the last three steps ignores one hiccup"
    steps.update({0: columns(0, [0.2, 0.2]), 1: columns(1, [0.9, 0.9])})
    assert steps.slow == {1}


def test_equal_ranks_or_a_single_rank_are_never_slow() -> None:
    steps = StepTimes()
    steps.update({0: columns(0, [0.3] * 5)})
    assert steps.slow == frozenset() and steps.median == 0.3
    steps.update({1: columns(1, [0.3] * 5)})
    assert steps.slow == frozenset()


def test_a_restarted_metrics_file_forgets_the_old_times() -> None:
    steps = StepTimes()
    steps.update({0: columns(0, [0.2] * 3), 1: columns(1, [0.8] * 3)})
    assert steps.slow == {1}
    steps.update({}, restarted={1})
    assert steps.recent(1) is None and steps.slow == frozenset()


def test_the_monitor_shows_the_slow_rank_slow_and_the_other_running(tmp_path: Path) -> None:
    for rank in (0, 1):
        write_running(tmp_path, rank, "vm", rank)
    write_steps(tmp_path, 0, [0.2] * 3, T0)
    write_steps(tmp_path, 1, [0.5] * 3, T0)
    monitor = RunMonitor(tmp_path, slow_factor=1.5)
    follower = RunFollower(tmp_path)
    follower.rescan()
    monitor.apply(monitor.prepare(follower.poll()), T0 + 2)
    assert monitor.state_of(1, T0 + 2) == RankState.SLOW
    assert monitor.state_of(0, T0 + 2) == RankState.RUNNING
    # Silent for longer than stall_after while its peer writes: stalled wins over slow.
    write_steps(tmp_path, 0, [0.2], T0 + 100, first=3)
    monitor.apply(monitor.prepare(follower.poll()), T0 + 100)
    assert monitor.state_of(1, T0 + 100) == RankState.STALLED
