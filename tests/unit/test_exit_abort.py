"""A rank that aborted at interpreter exit after its work is said as such, not as a crash.

Runs are written by :func:`tests.fixtures.runs.make_run` as a finished 2-rank run, then changed
the way the capture wrapper and the supervisor would have written an abort at exit: rank 1 died
of SIGABRT with torch's terminate message last in its log, rank 0 was killed after it, and the
run is ``failed`` with the cause a supervisor before this was recognised recorded.
"""

from __future__ import annotations

import json
import signal as _signal
from dataclasses import replace
from pathlib import Path

import pytest

from ezpz_tui.core.comparing.compare import compare
from ezpz_tui.core.launching.finalize import finalize
from ezpz_tui.core.runs.ending import cause_in, cause_of
from ezpz_tui.core.runs.exit_abort import TERMINATE, aborted_at_exit
from ezpz_tui.core.runs.store import RunStore
from ezpz_tui.core.watching.failure import explain, format_failure
from runtime import records
from runtime.rundir import (
    RankState,
    RunDir,
    State,
    read_state,
    read_statuses,
    write_state,
    write_status,
)
from tests.fixtures.runs import make_run

CREATED = 1_795_600_000.0
RUN_ID = "20261126-100000-000-tp1pp1cp1"
CAUSE = (
    "rank 1 aborted at exit after its work finished (a process group still alive at interpreter "
    "exit: call dist.destroy_process_group(), or let ezpz-tui's exit hook do it)"
)


def aborted_run(
    outputs: Path,
    last_lines: tuple[str, ...] = (TERMINATE,),
    run_id: str = RUN_ID,
    signal: int | None = 6,
    exit_code: int | None = None,
) -> Path:
    """A finished 2-rank run whose rank 1 then aborted: ``last_lines`` end its log."""
    run_dir = make_run(
        outputs,
        run_id=run_id,
        state="succeeded",
        exit_code=0,
        sizes={"tp": 1, "pp": 1, "cp": 1},
        ranks=2,
        steps=8,
        created=CREATED,
        hosts=("vm",),
        scheduler="none",
        job_id=None,
        machine="workstation",
    )
    run = RunDir(run_dir)
    with open(run.log(1), "a") as fh:
        fh.write("".join(f"{line}\n" for line in last_lines))
    zero, one = read_statuses(run_dir)
    name = _signal.Signals(signal).name if signal else None
    one = replace(one, state=RankState.FAILED, exit_code=exit_code, signal=signal, signal_name=name)
    write_status(run_dir, one)
    write_status(
        run_dir, replace(zero, state=RankState.KILLED, cause="after rank 1 failed", exit_code=None)
    )
    state = read_state(run_dir)
    state = replace(state, state=State.FAILED, exit_code=15, failed_rank=1, cause=cause_of(one))
    write_state(run_dir, state)
    return run_dir


def drop_last_records(run_dir: Path, rank: int, count: int) -> None:
    """Rank ``rank`` recorded ``count`` steps fewer: it died while its peers went on."""
    path = RunDir(run_dir).metrics(rank)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-count]))


def test_an_abort_after_the_last_step_is_said_with_the_fix(tmp_path: Path) -> None:
    failure = explain(aborted_run(tmp_path))
    assert failure is not None
    assert (failure.rank, failure.signal, failure.state) == (1, 6, "failed")
    assert failure.cause == CAUSE
    assert failure.last_lines[-1] == TERMINATE
    assert failure.killed == (0,)
    assert failure.advice[0].startswith("End the script with dist.barrier() and dist.destroy")
    assert not any("native crash" in line for line in failure.advice)
    assert "teardown" in (failure.meaning or "")
    text = format_failure(failure)
    assert CAUSE in text and "native crash" not in text
    assert json.loads(json.dumps(failure.to_json()))["cause"] == CAUSE


def test_the_supervisor_records_the_same_cause(tmp_path: Path) -> None:
    run_dir = aborted_run(tmp_path)
    statuses = read_statuses(run_dir)
    assert cause_in(run_dir, statuses[1], statuses) == CAUSE
    write_state(run_dir, replace(read_state(run_dir), cause=CAUSE))  # as it now writes it
    failure = explain(run_dir)
    assert failure is not None and failure.cause == CAUSE
    # ``runs --json`` reads the cause the supervisor recorded.
    listed = [r for r in RunStore(tmp_path).list_runs() if r.run_id == RUN_ID]
    assert [r.cause for r in listed] == [CAUSE]


def test_exit_134_and_our_own_lines_after_the_message(tmp_path: Path) -> None:
    last = (TERMINATE, "ezpz capture: ended 1 process the rank left behind", "")
    run_dir = aborted_run(tmp_path, last, signal=None, exit_code=134)
    failure = explain(run_dir)
    assert failure is not None and failure.cause == CAUSE


def test_a_rank_behind_its_peers_aborted_mid_run_a_native_crash(tmp_path: Path) -> None:
    run_dir = aborted_run(tmp_path)
    drop_last_records(run_dir, 1, 2)
    failure = explain(run_dir)
    assert failure is not None and failure.rank == 1
    assert failure.cause == "rank 1 on vm: SIGABRT (signal 6)"
    assert any(line.startswith("A native crash") for line in failure.advice)
    statuses = read_statuses(run_dir)
    assert cause_in(run_dir, statuses[1], statuses) == "rank 1 on vm: SIGABRT (signal 6)"


@pytest.mark.parametrize(
    "last",
    [
        ("Fatal Python error: Aborted", "", "Current thread 0x00007f3a (most recent call first):"),
        (TERMINATE, "loss 0.25 at step 8"),  # it went on after the message
        ("Traceback (most recent call last):", '  File "t.py", line 3', "ValueError: x", TERMINATE),
        ("terminate called after throwing an instance of 'c10::Error'",),
    ],
    ids=["faulthandler", "said-more", "traceback-first", "a-throw"],
)
def test_other_last_words_keep_the_native_crash_cause(
    tmp_path: Path, last: tuple[str, ...]
) -> None:
    run_dir = aborted_run(tmp_path, last)
    statuses = read_statuses(run_dir)
    assert not aborted_at_exit(run_dir, statuses[1], statuses)
    failure = explain(run_dir)
    assert failure is not None and failure.cause != CAUSE


def test_another_signal_or_exit_is_not_an_abort(tmp_path: Path) -> None:
    segv = explain(aborted_run(tmp_path / "a", signal=11))
    assert segv is not None and segv.cause == "rank 1 on vm: SIGSEGV (signal 11)"
    failed = explain(aborted_run(tmp_path / "b", signal=None, exit_code=1))
    assert failed is not None and failed.cause == "rank 1 on vm: exit 1"


def test_a_cause_the_supervisor_knew_better_is_kept(tmp_path: Path) -> None:
    run_dir = aborted_run(tmp_path)
    write_state(run_dir, replace(read_state(run_dir), cause="the outputs disk is full"))
    failure = explain(run_dir)
    assert failure is not None and failure.cause == "the outputs disk is full"


def test_without_history_records_the_log_decides(tmp_path: Path) -> None:
    run_dir = aborted_run(tmp_path)
    for rank in (0, 1):
        RunDir(run_dir).metrics(rank).unlink()
    failure = explain(run_dir)
    assert failure is not None and failure.cause == CAUSE


def test_the_hook_destroyed_the_group_and_it_still_aborted(tmp_path: Path) -> None:
    run_dir = aborted_run(tmp_path)
    one = read_statuses(run_dir)[1]
    write_status(run_dir, replace(one, destroyed_at_exit=True))
    failure = explain(run_dir)
    assert failure is not None and failure.cause == CAUSE
    assert failure.advice[0].startswith("The exit hook destroyed the process group")


def test_compare_and_finalize_count_its_figures(tmp_path: Path) -> None:
    aborted = aborted_run(tmp_path)
    clean = aborted_run(tmp_path, run_id="20261126-110000-000-tp1pp1cp1")
    write_state(
        clean, replace(read_state(clean), state=State.SUCCEEDED, cause=None, failed_rank=None)
    )
    comparison = compare([aborted, clean])
    by_dir = {facts.path: facts.numbers for facts in comparison.runs}
    assert by_dir[aborted] == by_dir[clean]  # the same figures: nothing was lost at exit
    assert by_dir[aborted].last_step == 7 and by_dir[aborted].tokens_per_s == 2048.0
    finalize(aborted)
    summary = json.loads(RunDir(aborted).summary_json.read_text())
    assert (summary["state"], summary["steps"], summary["speed"]["last_step"]) == ("failed", 8, 7)
    assert summary["metrics"]["loss"]["records"] == 8


def test_a_torn_or_odd_metrics_file_never_raises(tmp_path: Path) -> None:
    run_dir = aborted_run(tmp_path)
    path = RunDir(run_dir).metrics(0)
    path.write_bytes(path.read_bytes() + records.encode(0, 99, {"loss": 1.0}, 1.0)[:-9])
    statuses = read_statuses(run_dir)
    assert aborted_at_exit(run_dir, statuses[1], statuses)  # the torn step 99 is not read
    RunDir(run_dir).metrics(0).write_bytes(b"\xff\x00garbage\n")
    assert aborted_at_exit(run_dir, statuses[1], statuses)
