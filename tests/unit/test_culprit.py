"""The culprit of a failed run: the rank that failed first on its own account, by the ranks'
own records of what they raised and when, not the first to exit.

Run directories are written as the capture wrapper (statuses, logs) and the ranks' raise hook
(``status/rank-NNNNN.raised``: :mod:`runtime.raise_hook`'s shape) leave them; real ranks:
tests/integration/test_culprit.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from ezpz_tui.core.runs.culprit import INTERRUPTED, culprit_cause, symptom_of, verdict
from ezpz_tui.core.watching.failure import explain, format_failure
from runtime.rundir import (
    RankState,
    RankStatus,
    RunDir,
    RunState,
    State,
    read_statuses,
    write_state,
    write_status,
)

T0 = 1_795_600_000.0
GLOO = (
    "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer "
    "[127.0.0.1]:27852. This is typically caused by a remote worker crashing."
)


def a_run(tmp_path: Path, ends: dict[int, float], state: State = State.FAILED) -> Path:
    """A run whose ranks all exited 1 at ``ends`` (seconds after T0), none of them stopped."""
    run = RunDir(tmp_path / "20261128-100000-000-tp1pp1cp1")
    run.make_folders()
    for rank, end in ends.items():
        status = RankStatus(
            rank, world_size=len(ends), host="vm", start=T0, end=T0 + end, exit_code=1
        )
        write_status(run.path, replace(status, state=RankState.FAILED))
        run.log(rank).write_text(f"rank {rank} up\n")
    write_state(run.path, RunState(state, start=T0, end=T0 + max(ends.values()) + 1))
    return run.path


def raised(
    run_dir: Path, rank: int, kind: str, message: str, at: float, thread: str | None = None
) -> None:
    """The record the rank's raise hook writes when ``kind`` leaves a thread at T0 + ``at``."""
    entry = {
        "type": kind,
        "message": message,
        "where": "/work/train.py:7",
        "function": "<module>",
        "time": T0 + at,
        "thread": thread,
        "traceback": [
            "Traceback (most recent call last):",
            '  File "/work/train.py", line 7, in <module>',
            f"{kind}: {message}",
        ],
    }
    path = RunDir(run_dir).raised(rank)
    raises = json.loads(path.read_text())["raises"] if path.exists() else []
    path.write_text(json.dumps({"pid": 4200 + rank, "raises": [*raises, entry]}))


def culprit_of(run_dir: Path, max_log_reads: int = 16) -> int | None:
    found = verdict(run_dir, read_statuses(run_dir), max_log_reads)
    return found.culprit.rank if found.culprit is not None else None


def test_a_raise_beats_a_symptom_whose_rank_ended_first(tmp_path: Path) -> None:
    """The issue's run: rank 1 raised at step 5, rank 0 lost it in the next all_reduce and
    exited first while rank 1 destroyed its process group at exit."""
    run_dir = a_run(tmp_path, {0: 2.0, 1: 2.5})
    raised(run_dir, 1, "ValueError", "bad batch at step 5", at=1.0)
    raised(run_dir, 0, "RuntimeError", GLOO, at=1.9)
    found = verdict(run_dir, read_statuses(run_dir))
    assert found.culprit is not None and found.culprit.rank == 1
    assert [(f.rank, f.symptom) for f in found.symptoms] == [(0, "connection closed by peer")]
    assert culprit_cause(run_dir, found.culprit, read_statuses(run_dir)) == (
        "rank 1 on vm: raised ValueError: bad batch at step 5"
    )


def test_an_own_raise_beats_an_earlier_symptom(tmp_path: Path) -> None:
    """Even a symptom raised before it (clocks of two nodes, a record written late): a closed
    connection is never a rank's own failure while another rank has one."""
    run_dir = a_run(tmp_path, {0: 2.0, 1: 2.5})
    raised(run_dir, 0, "RuntimeError", GLOO, at=0.5)
    raised(run_dir, 1, "ValueError", "bad batch", at=1.0)
    assert culprit_of(run_dir) == 1


def test_the_earliest_of_two_own_failures(tmp_path: Path) -> None:
    run_dir = a_run(tmp_path, {0: 2.0, 1: 3.0, 2: 2.0})
    raised(run_dir, 2, "KeyError", "'x'", at=1.5)
    raised(run_dir, 1, "ValueError", "bad batch", at=1.0)
    found = verdict(run_dir, read_statuses(run_dir))
    assert found.culprit is not None and found.culprit.rank == 1
    assert found.symptoms == ()  # rank 0 ended failed with nothing to say: its own, later


def test_when_every_failure_is_a_symptom_the_earliest_is_named(tmp_path: Path) -> None:
    run_dir = a_run(tmp_path, {0: 2.0, 1: 2.5})
    raised(run_dir, 1, "RuntimeError", "Timed out waiting 1800000ms for recv operation", at=1.2)
    raised(run_dir, 0, "RuntimeError", GLOO, at=1.5)
    found = verdict(run_dir, read_statuses(run_dir))
    assert found.culprit is not None and found.culprit.rank == 1
    assert found.culprit.symptom == "a collective timed out"
    assert [f.rank for f in found.symptoms] == [0]


def test_a_thread_raise_counts_only_for_a_rank_that_then_failed_itself(tmp_path: Path) -> None:
    """A thread may raise and the program go on: rank 1's loader thread raised first, but rank
    1 was stopped after rank 0's own raise; rank 2's thread raise is what failed it."""
    run_dir = a_run(tmp_path, {0: 2.0, 1: 2.5})
    statuses = {s.rank: s for s in read_statuses(run_dir)}
    write_status(run_dir, replace(statuses[1], signals_received=("SIGINT",)))
    raised(run_dir, 1, "OSError", "the loader's file is gone", at=0.1, thread="loader")
    raised(run_dir, 0, "ValueError", "bad batch", at=1.0)
    assert culprit_of(run_dir) == 0

    other = a_run(tmp_path / "b", {0: 2.0, 1: 2.5})
    raised(other, 1, "OSError", "the loader's file is gone", at=0.1, thread="loader")
    raised(other, 0, "RuntimeError", GLOO, at=1.0)
    found = verdict(other, read_statuses(other))
    assert found.culprit is not None and found.culprit.rank == 1
    assert found.culprit.raised is not None and found.culprit.raised.thread == "loader"


def test_the_stops_interrupt_is_a_symptom_and_only_killed(tmp_path: Path) -> None:
    run_dir = a_run(tmp_path, {0: 2.0, 1: 1.5, 2: 3.0})
    raised(run_dir, 1, "ValueError", "bad batch", at=1.0)
    raised(run_dir, 0, "KeyboardInterrupt", "", at=1.8)
    raised(run_dir, 2, "RuntimeError", GLOO, at=1.6)
    found = verdict(run_dir, read_statuses(run_dir))
    assert [(f.rank, f.symptom) for f in found.symptoms] == [
        (2, "connection closed by peer"),
        (0, INTERRUPTED),
    ]
    failure = explain(run_dir)
    assert failure is not None and failure.rank == 1
    assert [s.rank for s in failure.symptoms] == [2]


def test_a_raise_counts_though_its_rank_status_cannot_be_read(tmp_path: Path) -> None:
    """Rank 1 raised and its status file is garbage; rank 0, stopped by the fail-fast's SIGINT,
    raised KeyboardInterrupt: the stop's consequence, no failure at all."""
    run_dir = a_run(tmp_path, {0: 2.0, 1: 2.5})
    statuses = {s.rank: s for s in read_statuses(run_dir)}
    write_status(run_dir, replace(statuses[0], signals_received=("SIGINT",)))
    RunDir(run_dir).status(1).write_text("garbage")
    raised(run_dir, 1, "ValueError", "bad batch", at=1.0)
    raised(run_dir, 0, "KeyboardInterrupt", "", at=1.5)
    found = verdict(run_dir, read_statuses(run_dir))
    assert found.culprit is not None and found.culprit.rank == 1 and found.symptoms == ()
    write_state(run_dir, replace(RunState(State.FAILED), failed_rank=1, cause="rank 1: exit 1"))
    failure = explain(run_dir)
    assert failure is not None and failure.rank == 1
    assert failure.exception is not None and failure.exception.line == "ValueError: bad batch"


def test_without_records_the_logs_tell_and_fill_the_exception(tmp_path: Path) -> None:
    """A run whose ranks recorded no raise (an earlier version): each log's last traceback,
    torch.distributed's ``[rankN]: `` prefix and all, timed by the rank's end; its supervisor
    named the rank that ended first."""
    run_dir = a_run(tmp_path, {0: 2.0, 1: 2.5})
    run = RunDir(run_dir)
    write_state(
        run_dir, replace(RunState(State.FAILED), failed_rank=0, cause="rank 0 on vm: exit 1")
    )
    run.log(0).write_text(
        "[rank0]: Traceback (most recent call last):\n"
        '[rank0]:   File "/work/train.py", line 8, in <module>\n'
        "[rank0]:     dist.all_reduce(t)\n"
        f"[rank0]: RuntimeError: {GLOO}\n"
    )
    run.log(1).write_text(
        "[rank1]: Traceback (most recent call last):\n"
        '[rank1]:   File "/work/train.py", line 7, in <module>\n'
        '[rank1]:     raise ValueError("bad batch at step 5")\n'
        "[rank1]: ValueError: bad batch at step 5\n"
    )
    failure = explain(run_dir)
    assert failure is not None and failure.rank == 1
    assert failure.cause == "rank 1 on vm: exit 1"
    said = failure.to_json()
    assert said["exception"] == {
        "type": "ValueError",
        "message": "bad batch at step 5",
        "where": "/work/train.py:7",
        "thread": None,
    }
    assert [(s["rank"], s["symptom"]) for s in said["symptoms"]] == [
        (0, "connection closed by peer")
    ]
    assert failure.traceback[-1] == "ValueError: bad batch at step 5"


def test_the_report_quotes_the_culprit_and_names_the_symptoms(tmp_path: Path) -> None:
    run_dir = a_run(tmp_path, {0: 2.0, 1: 2.5})
    raised(run_dir, 1, "ValueError", "bad batch at step 5", at=1.0)
    raised(run_dir, 0, "RuntimeError", GLOO, at=1.9)
    write_state(
        run_dir,
        replace(
            RunState(State.FAILED),
            failed_rank=1,
            cause="rank 1 on vm: raised ValueError: bad batch at step 5",
        ),
    )
    failure = explain(run_dir)
    assert failure is not None
    text = format_failure(failure)
    lines = text.splitlines()
    assert lines[0].endswith("failed: rank 1 on vm: raised ValueError: bad batch at step 5")
    assert "first failing rank: 1 on vm, exit 1" in lines
    at = lines.index("last traceback in logs/rank-00001.log:")  # as the rank raised it
    assert lines[at + 1 : at + 4] == [
        "    Traceback (most recent call last):",
        '      File "/work/train.py", line 7, in <module>',
        "    ValueError: bad batch at step 5",
    ]
    at = lines.index("failed after rank 1 (symptoms, not causes):")
    assert lines[at + 1] == (
        "    rank 0 on vm: connection closed by peer (RuntimeError) after rank 1 failed"
    )
    assert "Connection closed" not in text.partition("the launcher")[2]
    assert "Fix the exception in the program: ValueError: bad batch at step 5" in text


def test_a_cascade_is_one_line_and_a_thread_raise_is_said(tmp_path: Path) -> None:
    ends = {rank: 2.0 for rank in range(6)}
    run_dir = a_run(tmp_path, ends)
    raised(run_dir, 4, "OSError", "the shard is gone", at=1.0, thread="loader")
    for rank in (0, 1, 2, 5):
        raised(run_dir, rank, "RuntimeError", GLOO, at=1.5)
    failure = explain(run_dir)
    assert failure is not None and failure.rank == 4
    lines = format_failure(failure).splitlines()
    assert "  raised: OSError: the shard is gone at /work/train.py:7 in thread loader" in lines
    assert "    ranks 0-2,5: connection closed by peer (RuntimeError) after rank 4 failed" in lines
    assert "    rank 3 " not in "\n".join(lines)  # it failed with nothing to say: its own


def test_a_symptom_is_words_for_a_peers_failure() -> None:
    assert symptom_of(GLOO) == "connection closed by peer"
    assert symptom_of("Watchdog caught collective operation timeout: WorkNCCL(...)") == (
        "a collective timed out"
    )
    assert symptom_of("NCCL communicator was aborted on rank 3") == "a collective was aborted"
    assert symptom_of("ValueError: bad batch at step 5") is None
    assert symptom_of("loss timed out of patience") is None


def test_past_the_log_budget_the_earliest_end_is_taken(tmp_path: Path) -> None:
    """16,384 ranks that recorded nothing must not each have their log read: past the budget,
    a failure with no record is taken as its own, as ends were read before."""
    run_dir = a_run(tmp_path, {0: 2.0, 1: 2.5})
    RunDir(run_dir).log(0).write_text(f"RuntimeError: {GLOO}\n")
    assert culprit_of(run_dir, max_log_reads=0) == 0
    assert culprit_of(run_dir) == 1
