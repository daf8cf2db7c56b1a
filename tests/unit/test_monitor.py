"""RunMonitor, read-back of older lines and the all-ranks filter, on real run directories."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ezpz_tui.core.watching.followers import LAUNCHER, RunFollower
from ezpz_tui.core.watching.monitor import (
    CUT,
    LENGTH,
    NO_FILTER,
    OFFSET,
    TEXT,
    RankInfo,
    RunMonitor,
    is_error_line,
    parse_filter,
    read_lines_before,
    read_whole_line,
)
from runtime.rundir import RankState, RunState, State, read_state, write_state
from tests.fixtures.runs import make_run


def _follow(run: Path, monitor: RunMonitor, now: float, follower: RunFollower | None = None):
    follower = follower or RunFollower(run)
    follower.rescan()  # files made since the last poll, without waiting for the periodic rescan
    changes = monitor.apply(monitor.prepare(follower.poll()), now)
    return follower, changes


def _made(
    outputs: Path,
    run_id: str,
    state: str,
    exit_code: int,
    ranks: int,
    steps: int,
    created: float,
    **more: Any,
) -> Path:
    """A finished run without model parallelism (see :func:`make_run`)."""
    named = {"run_id": run_id, "state": state, "exit_code": exit_code, "created": created}
    return make_run(outputs, sizes={"tp": 1}, ranks=ranks, steps=steps, **named, **more)


def test_segfaulting_rank_is_failed_with_its_signal_and_first(tmp_path: Path) -> None:
    run = _made(tmp_path, "r", "failed", 1, 4, 16, 1_763_800_000.0, failing_rank=2, crash_signal=11)
    monitor = RunMonitor(run)
    _follow(run, monitor, 1_763_800_100.0)
    assert monitor.first_failure == 2
    assert monitor.ranks[2].outcome == "SIGSEGV"
    assert monitor.ranks[0].outcome == "SIGTERM"
    assert "Segmentation fault" in monitor.ranks[2].last_line or any(
        "Segmentation fault" in line[TEXT] for line in monitor.lines_of(2)
    )
    marks = [line[TEXT] for line in monitor.all_lines if line[OFFSET] < 0]
    assert marks[0] == "✗ rank 2 SIGSEGV", "the rank that died first is marked first"
    assert sorted(marks[1:]) == [f"✗ rank {r} SIGTERM" for r in (0, 1, 3)]
    assert all(monitor.state_of(r, 1_763_800_100.0) == "failed" for r in range(4))


def test_the_rank_the_run_names_is_the_first_failure_not_the_first_to_end(
    tmp_path: Path,
) -> None:
    """A rank that raised may end after the peers that lost it: the rank list opens on the
    culprit the supervisor recorded (rank 3 here), not on rank 2 that ended first."""
    run = _made(tmp_path, "r", "failed", 1, 4, 16, 1_763_800_000.0, failing_rank=2)
    state = read_state(run)
    write_state(run, replace(state, failed_rank=3, cause="rank 3 on x: raised ValueError: x"))
    monitor = RunMonitor(run)
    _follow(run, monitor, 1_763_800_100.0)
    assert monitor.first_failure == 2  # before the run's state is read: the first to end
    monitor.run_state = read_state(run)  # as the screen hands it the state it read
    assert monitor.first_failure == 3


def test_exit_code_failure_and_success(tmp_path: Path) -> None:
    failed = _made(tmp_path, "f", "failed", 1, 2, 8, 1.0e9, failing_rank=1)
    ok = _made(tmp_path, "ok", "succeeded", 0, 2, 8, 1.0e9)
    mf, mo = RunMonitor(failed), RunMonitor(ok)
    _follow(failed, mf, 2.0e9)
    _follow(ok, mo, 2.0e9)
    assert mf.first_failure == 1 and mf.ranks[1].outcome == "failed 1"
    assert mo.first_failure is None and mo.ranks[0].outcome == "exited 0"
    assert mo.state_of(0, 2.0e9) == "succeeded"


def test_the_launcher_is_followed_as_its_own_row_not_a_rank(tmp_path: Path) -> None:
    """launcher.log reaches the monitor as the pseudo-rank LAUNCHER: its lines are kept and
    interleaved, its state is the run's end, and it counts as no rank (nor stalls any)."""
    run = _made(tmp_path, "f", "failed", 1, 2, 8, 1.0e9, failing_rank=1)
    said = (run / "launcher.log").read_text().splitlines()
    monitor = RunMonitor(run)
    assert monitor.launcher_state() == ("waiting", "")
    follower = RunFollower(run)
    follower.rescan()
    batch = follower.poll()
    assert batch.launcher and LAUNCHER in {chunk.rank for chunk in batch.logs}
    monitor.apply(monitor.prepare(batch), 2.0e9)
    assert monitor.has_launcher and sorted(monitor.ranks) == [0, 1]
    assert [line[TEXT] for line in monitor.lines_of(LAUNCHER)] == said
    assert monitor.launcher.last_line == said[-1]
    assert {line[0] for line in monitor.all_lines} >= {LAUNCHER, 0, 1}
    assert monitor.log_path(LAUNCHER) == run / "launcher.log"
    assert monitor.launcher_state() == ("running", "")  # no run state read yet: it wrote
    monitor.run_state = RunState(State.FAILED, exit_code=7)
    assert monitor.launcher_state() == ("failed", "failed 7")
    monitor.run_state = RunState(State.SUCCEEDED, exit_code=0)
    assert monitor.launcher_state() == ("succeeded", "exited 0")
    assert not follower.poll().launcher, "found once"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text)


def test_a_silent_rank_is_stalled_only_while_others_progress(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    for rank in (0, 1):
        _write(logs / f"rank-{rank:05d}.log", f"rank {rank} starting\n")
    monitor = RunMonitor(tmp_path, stall_after=60)
    follower, _ = _follow(tmp_path, monitor, 1000.0)
    assert monitor.state_of(1, 1000.0) == "running"  # writing, no status file yet
    assert monitor.state_of(1, 1070.0) == "idle"  # silent with everyone: a foreign run
    _write(tmp_path / "status" / "rank-00001.json", json.dumps({"state": "running"}))
    _write(tmp_path / "status" / "rank-00000.json", json.dumps({"state": "running"}))
    _write(logs / "rank-00000.log", "step 1\n")
    _follow(tmp_path, monitor, 1090.0, follower)
    assert monitor.state_of(0, 1090.0) == "running"
    assert monitor.state_of(1, 1090.0) == "stalled"
    # Everyone silent: a shared wait (a checkpoint), not one stuck rank.
    assert monitor.state_of(1, 1200.0) == "running"
    assert RunMonitor(tmp_path).state_of(0, 0.0) == "waiting"
    _write(logs / "rank-00001.log", "step 1\n")
    _follow(tmp_path, monitor, 1201.0, follower)
    assert monitor.state_of(1, 1201.0) == "running"


class _CountedRanks(dict):
    """The monitor's ranks, counting how often every rank is looked at."""

    scans = 0

    def values(self):  # type: ignore[override]
        self.scans += 1
        return super().values()


def test_every_silent_ranks_state_looks_at_the_others_once_until_one_is_active() -> None:
    """A hung run's rank list asks every rank's state: scanning the other ranks for each one
    was quadratic (seconds a repaint at 4,096 ranks)."""
    monitor = RunMonitor(Path("unused"), stall_after=60)
    ranks = monitor.ranks = _CountedRanks()
    for rank in range(4096):
        ranks[rank] = RankInfo(rank, status=RankState.RUNNING)
        monitor.mark_active(ranks[rank], 1000.0)
    monitor.mark_active(ranks[7], 1050.0)  # one rank still speaks: the others are stalled
    states = [monitor.state_of(rank, 1080.0 + rank / 1e6) for rank in range(4096)]
    assert ranks.scans == 1
    assert states[7] == "running" and set(states[:7] + states[8:]) == {"stalled"}
    monitor.mark_active(ranks[3], 1079.0)  # another spoke: looked at again, once
    assert monitor.state_of(7, 1100.0) == "running" and monitor.state_of(5, 1100.0) == "stalled"
    assert monitor.state_of(3, 1200.0) == "running" and ranks.scans == 2  # all silent: a wait


def test_buffers_are_bounded_and_older_lines_read_back_exactly(tmp_path: Path) -> None:
    lines = [f"line {i} \x1b[32mok\x1b[0m" for i in range(5000)]
    lines[10] = "progress 10%\rprogress 100%"
    lines[20] = "x" * 300_000
    log = tmp_path / "logs" / "rank-00000.log"
    _write(log, "\n".join(lines) + "\n")
    monitor = RunMonitor(tmp_path, keep_per_rank=100, keep_all=150)
    _, changes = _follow(tmp_path, monitor, 0.0)
    kept = list(monitor.lines_of(0))
    assert len(kept) == 100 and len(changes.by_rank[0]) == 100
    assert monitor.ranks[0].lines == 5000 and monitor.total_lines == 5000
    assert [line[TEXT] for line in kept] == lines[-100:]
    older = read_lines_before(log, 0, kept[0][OFFSET], 50, chunk=4096)
    assert [line[TEXT] for line in older] == lines[-150:-100]
    everything = read_lines_before(log, 0, kept[0][OFFSET], 10_000, max_line=1000, chunk=4096)
    assert len(everything) == 4900
    assert everything[10][TEXT] == "progress 100%"
    assert everything[20][CUT] > 0 and everything[20][LENGTH] == 300_000
    assert read_whole_line(log, everything[20]) == "x" * 300_000
    assert [line[TEXT] for i, line in enumerate(everything) if i not in (10, 20)] == [
        text for i, text in enumerate(lines[:4900]) if i not in (10, 20)
    ]


def test_read_back_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert read_lines_before(tmp_path / "gone.log", 0, 100, 10) == []
    line = (0, "shown", 5, 10, 3)
    assert read_whole_line(tmp_path / "gone.log", line) == "shown"


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(alphabet="ab\r\x1b[m é", max_size=40), min_size=1, max_size=60),
    st.integers(min_value=1, max_value=64),
)
def test_read_back_agrees_with_the_follower(tmp_path_factory, texts: list[str], chunk: int) -> None:
    run = tmp_path_factory.mktemp("run")
    log = run / "logs" / "rank-00000.log"
    _write(log, "\n".join(texts) + "\n")
    monitor = RunMonitor(run, keep_per_rank=10_000)
    _follow(run, monitor, 0.0)
    shown = list(monitor.lines_of(0))
    end = log.stat().st_size
    back = read_lines_before(log, 0, end, 10_000, chunk=chunk)
    assert back == shown


def test_filter_by_ranks_and_text() -> None:
    line_filter, problem = parse_filter("@0,3-5 Loss")
    assert problem == ""
    assert line_filter.ranks == frozenset({0, 3, 4, 5}) and line_filter.text == "Loss"
    assert line_filter.keeps((4, "step 3 \x1b[1mloss\x1b[0m=2", 0, 1, 0))
    assert not line_filter.keeps((1, "loss=2", 0, 1, 0))
    assert not line_filter.keeps((0, "lr=3", 0, 1, 0))
    bad, problem = parse_filter("@x,2 @5-3 nan")
    assert bad.ranks == frozenset({2}) and bad.text == "nan"
    assert "'x'" in problem and "'5-3'" in problem
    assert parse_filter("")[0] == NO_FILTER


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Traceback (most recent call last):", True),
        ("\x1b[31mRuntimeError: boom\x1b[0m", True),
        ("Fatal Python error: Segmentation fault", True),
        ("torch.distributed.DistBackendError: NCCL error", True),
        ("step 3 loss=2.31 errors=0", False),
        ("INFO ezpz.train: done after 8 steps", False),
    ],
)
def test_error_lines(text: str, error: bool) -> None:
    assert is_error_line(text) is error


def test_restart_clears_a_rank(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "rank-00000.log"
    _write(log, "one\ntwo\n")
    monitor = RunMonitor(tmp_path)
    follower, _ = _follow(tmp_path, monitor, 0.0)
    log.write_text("new\n")
    _, changes = _follow(tmp_path, monitor, 1.0, follower)
    assert changes.restarted == {0}
    assert [line[TEXT] for line in monitor.lines_of(0)] == ["new"]


def test_the_line_budget_is_shared_among_many_ranks(tmp_path: Path) -> None:
    few, many = RunMonitor(tmp_path), RunMonitor(tmp_path)
    few.expect_ranks(8)
    many.expect_ranks(1024)
    assert few.lines_of(0).maxlen == 2000
    assert many.lines_of(1023).maxlen == 125 and many.keep_per_rank == 125
    huge = RunMonitor(tmp_path)
    huge.show(0)  # the log view shows rank 0 before the run's size is known
    huge.expect_ranks(16384)  # memory follows what is shown: the rank on screen keeps 2000
    assert huge.keep_per_rank == 8 and huge.lines_of(0).maxlen == 2000
    huge.show(5)
    assert huge.lines_of(5).maxlen == 2000 and huge.lines_of(6).maxlen == 8
    huge.show(6)
    assert huge.lines_of(5).maxlen == 8 and huge.lines_of(6).maxlen == 2000
