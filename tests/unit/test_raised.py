"""A rank whose log ends in an uncaught traceback, read from its log's end; a hung job."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from ezpz_tui.core.watching.followers import RunFollower
from ezpz_tui.core.watching.monitor import RAISED_AFTER_S, RunMonitor
from ezpz_tui.core.watching.raised import RaisedWatch, raised_exception
from runtime.rundir import RankState, RankStatus, RunDir, write_status


def real_traceback() -> list[str]:
    """What Python prints for an uncaught exception, made by Python itself."""
    try:
        {}["missing"]
    except KeyError as exc:
        return "".join(traceback.format_exception(exc)).splitlines()
    raise AssertionError("unreachable")


def test_a_log_ending_in_a_traceback_names_its_exception() -> None:
    lines = ["step 1", "step 2", *real_traceback(), "", ""]
    assert raised_exception(lines) == "KeyError: 'missing'"


def test_a_traceback_torch_distributed_prefixed_names_its_exception() -> None:
    """Once a process group exists, torch's excepthook puts ``[rankN]: `` before each line."""
    lines = ["step 1", *(f"[rank1]: {line}" for line in real_traceback())]
    assert raised_exception(lines) == "KeyError: 'missing'"


@pytest.mark.parametrize(
    "lines",
    [
        [],
        ["step 1"],
        [*real_traceback(), "step 3: the program caught it and went on"],
        ["Traceback (most recent call last):"],  # still being written
        ["Traceback (most recent call last):", '  File "x.py", line 1, in <module>'],
        ["KeyError: 'missing'"],  # an exception line with no traceback before it
    ],
)
def test_anything_else_is_no_raise(lines: list[str]) -> None:
    assert raised_exception(lines) is None


def test_the_watch_reports_a_traceback_that_stood_past_the_grace(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.make_folders()
    run.log(0).write_text("step 1\n")
    run.log(1).write_text("step 1\n" + "\n".join(real_traceback()) + "\n")
    watch = RaisedWatch(run, grace_s=5.0)
    assert watch.look([0, 1], now=100.0) is None  # seen, but not for long enough
    assert watch.look([0, 1], now=101.0) is None  # not due yet (every 2 s)
    assert watch.look([0, 1], now=105.0) == (1, "KeyError: 'missing'")
    with run.log(1).open("a") as fh:  # it printed on after all: not stuck
        fh.write("recovered\n")
    assert watch.look([0, 1], now=110.0) is None
    assert RaisedWatch.interval(10_000) == 100.0  # a big job: ~100 stats a second


def test_the_rank_list_flags_a_raised_rank_and_a_hung_job(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.make_folders()
    for rank in (0, 1):
        write_status(run.path, RankStatus(rank, state=RankState.RUNNING))
    run.log(0).write_text("step 1\n")
    run.log(1).write_text("step 1\n" + "\n".join(real_traceback()) + "\n")
    monitor = RunMonitor(run.path, stall_after=30.0)
    follower = RunFollower(run.path)
    follower.rescan()
    monitor.apply(monitor.prepare(follower.poll()), now=10.0)
    assert monitor.ranks[1].raised == "KeyError: 'missing'"
    assert monitor.state_of(1, now=10.5) == RankState.RUNNING  # it may yet exit on its own
    assert monitor.state_of(1, now=10.0 + RAISED_AFTER_S) == RankState.RAISED
    assert monitor.state_of(0, now=10.0 + RAISED_AFTER_S) == RankState.RUNNING
    assert monitor.hung(now=30.0) is None
    monitor.mark_active(monitor.ranks[0], 5.0)  # rank 0 went quiet first
    assert monitor.hung(now=50.0) == 0
