"""The failure on one screen, read from run directories as a finished launch leaves them.

Runs are written by :func:`tests.fixtures.runs.make_run` (the layout the supervisor and the
capture wrapper write) and, where a test is about one shape of rank status, rewritten with
:func:`runtime.rundir.write_status`, the writer the wrapper and the supervisor use.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import tomli_w

from ezpz_tui.core.runs.exit_meanings import describe_end, meaning
from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.core.watching.failure import (
    advise,
    explain,
    format_failure,
    last_traceback,
    outcome,
    rank_ranges,
)
from ezpz_tui.core.watching.launcher_messages import parse_text
from runtime.rundir import (
    RankState,
    RunDir,
    RunState,
    State,
    read_state,
    read_statuses,
    write_state,
    write_status,
)
from tests.fixtures.runs import make_run

CREATED = 1_795_600_000.0
HOST0, HOST1 = "x3005c0s13b0n0", "x3005c0s19b0n0"


def failed_run(tmp_path: Path, **kw: object) -> Path:
    args: dict[str, object] = dict(
        run_id="20261125-100000-000-tp1pp1cp1",
        state="failed",
        exit_code=1,
        sizes={"tp": 1, "pp": 1, "cp": 1},
        ranks=4,
        steps=8,
        created=CREATED,
        failing_rank=2,
    )
    return make_run(tmp_path, **(args | kw))  # type: ignore[arg-type]


def set_scheduler(run_dir: Path, scheduler: str) -> None:
    record = read_run_toml(run_dir) | {"scheduler": scheduler}
    RunDir(run_dir).run_toml.write_text(tomli_w.dumps(record))


def test_an_exception_names_the_rank_its_host_and_the_traceback(tmp_path: Path) -> None:
    failure = explain(failed_run(tmp_path))
    assert failure is not None
    assert (failure.rank, failure.host, failure.exit_code, failure.signal) == (2, HOST1, 1, None)
    assert failure.meaning == "an error, usually an uncaught Python exception"
    assert failure.exception is not None
    assert failure.exception.type == "RuntimeError"  # read back from the log: no record
    assert failure.exception.message.startswith("Function 'LogSoftmaxBackward0'")
    assert "\x1b" not in failure.exception.message
    assert failure.traceback[0] == "Traceback (most recent call last):"
    assert "    loss.backward()" in failure.traceback
    assert failure.last_lines == ()  # the traceback says it better
    # The peers died of SIGTERM after rank 2 did: the consequence, not the cause.
    assert failure.killed == (0, 1, 3)
    assert failure.cause == f"rank 2 on {HOST1}: exit 1"
    assert [m.kind for m in failure.messages] == ["pals_rank_exit"]
    assert failure.node_fault_host is None
    assert any(
        a.startswith("Fix the exception in the program: RuntimeError") for a in failure.advice
    )
    json.dumps(failure.to_json())  # machines can read all of it


def test_a_native_crash_has_last_lines_and_its_meaning(tmp_path: Path) -> None:
    failure = explain(failed_run(tmp_path, crash_signal=11, failing_rank=1))
    assert failure is not None
    assert (failure.rank, failure.signal, failure.signal_name) == (1, 11, "SIGSEGV")
    assert failure.meaning is not None and failure.meaning.startswith("segmentation fault")
    assert failure.traceback == ()
    assert "Fatal Python error: Segmentation fault" in failure.last_lines
    assert len(failure.last_lines) <= 10
    segfault = [m for m in failure.messages if m.kind == "segfault"]
    assert segfault and segfault[0].rank == 1 and segfault[0].host == HOST0
    assert segfault[0].source == "logs/rank-00001.log"
    assert any("native crash" in a for a in failure.advice)


def test_the_recorded_first_failure_wins(tmp_path: Path) -> None:
    """Over the order of ends, when the recorded rank's log shows a failure of its own."""
    run_dir = failed_run(tmp_path)
    state = read_state(run_dir)
    write_state(run_dir, replace(state, failed_rank=3, cause="rank 3 on x: raised ValueError"))
    with open(RunDir(run_dir).log(3), "a") as fh:
        fh.write('Traceback (most recent call last):\n  File "t.py", line 3\nValueError: x\n')
    failure = explain(run_dir)
    assert failure is not None and failure.rank == 3
    assert failure.cause == "rank 3 on x: raised ValueError"


def test_a_recorded_rank_whose_log_says_it_lost_a_peer_is_a_symptom(tmp_path: Path) -> None:
    """A run recorded before ranks recorded their raises, whose supervisor named the rank that
    ended first (rank 3, "remote process exited"): its logs name rank 2, whose own exception
    is the cause, and rank 3 a symptom of it."""
    run_dir = failed_run(tmp_path)
    state = read_state(run_dir)
    write_state(run_dir, replace(state, failed_rank=3, cause=f"rank 3 on {HOST1}: SIGTERM"))
    failure = explain(run_dir)
    assert failure is not None and failure.rank == 2
    assert failure.cause == f"rank 2 on {HOST1}: exit 1"
    assert failure.exception is not None and failure.exception.type == "RuntimeError"
    assert failure.exception.where == "/opt/ezpz/runtime/examples/train.py:212"
    lost = "a peer's process exited or the network failed"
    assert [(s.rank, s.symptom) for s in failure.symptoms] == [(0, lost), (1, lost), (3, lost)]


def test_ranks_ended_by_the_launcher_in_both_shapes(tmp_path: Path) -> None:
    """The supervisor's ``killed`` with a cause, and the older shapes: a wrapper that forwarded
    the launcher's SIGTERM, one SIGKILLed before it could write (still ``running``), and a
    SIGKILL nobody sent (the OOM killer?), which is a failure of its own, not a consequence."""
    run_dir = failed_run(tmp_path)
    statuses = {s.rank: s for s in read_statuses(run_dir)}
    first_end = statuses[2].end
    assert first_end is not None
    write_status(
        run_dir,
        replace(
            statuses[0],
            state=RankState.KILLED,
            cause="after rank 2 failed",
            ended_by="supervisor",
            signal=None,
            signal_name=None,
        ),
    )
    write_status(
        run_dir,
        replace(statuses[1], state=RankState.RUNNING, end=None, signal=None, signal_name=None),
    )
    write_status(
        run_dir,
        replace(statuses[3], signal=9, signal_name="SIGKILL", end=first_end + 5),
    )
    failure = explain(run_dir)
    assert failure is not None and failure.rank == 2
    assert failure.killed == (0, 1)


def test_a_forwarded_signal_is_never_the_first_failure(tmp_path: Path) -> None:
    run_dir = failed_run(tmp_path)
    statuses = {s.rank: s for s in read_statuses(run_dir)}
    early = (statuses[2].end or 0) - 10
    write_status(
        run_dir,
        replace(
            statuses[0], end=early, signal=15, signal_name="SIGTERM", signals_received=("SIGTERM",)
        ),
    )
    failure = explain(run_dir)
    assert failure is not None and failure.rank == 2


def test_a_shepherd_kill_names_the_node_to_exclude(tmp_path: Path) -> None:
    run_dir = failed_run(tmp_path)
    line = f"{HOST1}.hsn.cm.polaris.alcf.anl.gov: shepherd died from signal 9\n"
    with open(RunDir(run_dir).launcher_log, "a") as fh:
        fh.write(line)
    failure = explain(run_dir)
    assert failure is not None
    assert failure.node_fault_host == f"{HOST1}.hsn.cm.polaris.alcf.anl.gov"
    assert failure.advice[0].startswith(f"Exclude {HOST1}.hsn.cm.polaris.alcf.anl.gov")
    set_scheduler(run_dir, "none")  # a workstation: there is no other node
    failure = explain(run_dir)
    assert failure is not None and failure.node_fault_host is None
    assert not failure.advice[0].startswith("Exclude")


def test_srun_killed_with_an_oom_report_is_memory_not_the_node(tmp_path: Path) -> None:
    run_dir = failed_run(tmp_path, crash_signal=9)
    RunDir(run_dir).launcher_log.write_text(
        "srun: error: nid001321: task 2: Killed\n"
        "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=1.0.\n"
    )
    failure = explain(run_dir)
    assert failure is not None and failure.node_fault_host is None
    assert failure.meaning is not None and "OOM killer" in failure.meaning
    assert any(a.startswith("Give each rank more memory") for a in failure.advice)
    RunDir(run_dir).launcher_log.write_text("srun: error: nid001321: task 2: Killed\n")
    failure = explain(run_dir)
    assert failure is not None and failure.node_fault_host == "nid001321"


def test_hydra_killing_a_process_on_a_named_host_is_a_node_fault(tmp_path: Path) -> None:
    run_dir = failed_run(tmp_path, crash_signal=9)
    RunDir(run_dir).launcher_log.write_text(
        "=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES\n"
        f"=   PID 4242 RUNNING AT {HOST1}\n"
        "=   KILLED BY SIGNAL: 9 (Killed)\n"
    )
    failure = explain(run_dir)
    assert failure is not None and failure.node_fault_host == HOST1
    RunDir(run_dir).launcher_log.write_text(f"=   PID 4242 RUNNING AT {HOST1}\n=   EXIT CODE: 1\n")
    failure = explain(run_dir)
    assert failure is not None and failure.node_fault_host is None  # the program's own exit


def test_no_rank_status_leaves_the_launcher_to_tell(tmp_path: Path) -> None:
    run_dir = tmp_path / "20261125-100000-000-tp1pp1cp1"
    RunDir(run_dir).make_folders()
    write_state(run_dir, RunState(State.FAILED, run_id=run_dir.name, end=CREATED, exit_code=1))
    RunDir(run_dir).launcher_log.write_text(
        "x4102c7s1b0n0.hsn.cm.aurora.alcf.anl.gov: shepherd died from signal 9\n"
    )
    failure = explain(run_dir)
    assert failure is not None and failure.rank is None
    assert failure.host == "x4102c7s1b0n0.hsn.cm.aurora.alcf.anl.gov"
    assert failure.cause.startswith("the launcher: x4102c7s1b0n0")
    where = f"bad_hosts.txt in {tmp_path}"
    listed = format_failure(failure, listed=True)
    assert f"{failure.host} is listed in {where}: later launches there skip it" in listed
    removed = format_failure(failure, listed=False)
    assert f"{failure.host} is not listed in {where}: later launches there use it" in removed
    assert f"listed in {where}" not in format_failure(failure)  # the TUI's dialog: not said


@pytest.mark.parametrize(
    ("state", "said"), [("succeeded", "succeeded"), ("stopped", "was stopped by the user")]
)
def test_a_run_that_did_not_fail_has_no_failure(tmp_path: Path, state: str, said: str) -> None:
    run_dir = make_run(
        tmp_path,
        run_id="20261125-100000-000-tp1pp1cp1",
        state=state,
        exit_code=0 if state == "succeeded" else 130,
        sizes={"tp": 1, "pp": 1, "cp": 1},
        ranks=2,
        steps=4,
        created=CREATED,
    )
    assert explain(run_dir) is None
    assert outcome(run_dir) == f"run {run_dir.name} {said}"


def test_the_text_tells_it_all(tmp_path: Path) -> None:
    failure = explain(failed_run(tmp_path))
    assert failure is not None
    text = format_failure(failure)
    assert text.splitlines()[0] == f"run {failure.run_id} failed: rank 2 on {HOST1}: exit 1"
    assert f"first failing rank: 2 on {HOST1}, exit 1" in text
    assert "last traceback in logs/rank-00002.log:" in text
    assert "killed as a consequence: ranks 0-1,3" in text
    assert "what to do:" in text


def test_last_traceback_takes_the_last_and_its_exception() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "KeyError: 'x'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "a.py", line 3, in <module>',
        "    raise ValueError('bad')",
        "ValueError: bad",
        "more output",
    ]
    exception, block = last_traceback(lines)
    assert exception == "ValueError: bad"
    assert block == tuple(lines[6:10])
    assert last_traceback(["just", "lines"]) == (None, ())


def test_meanings_and_ranges() -> None:
    assert meaning(137, None) is not None and "SIGKILL" in meaning(137, None)  # type: ignore[operator]
    assert meaning(None, 7) is not None and meaning(None, 7).startswith("bus error")  # type: ignore[union-attr]
    assert meaning(0, None) is None and meaning(42, None) is None
    assert describe_end(None, 9, "SIGKILL") == "SIGKILL (signal 9)"
    assert describe_end(3, None) == "exit 3"
    assert rank_ranges((5, 0, 1, 2, 9, 10)) == "0-2,5,9-10"


@pytest.mark.parametrize(
    "said",
    [
        "/r/checkpoints/step-10/__0_0.distcp is cut short (100 of its 200 bytes)",
        "/r/checkpoints/step-10/.metadata: unreadable checkpoint index: EOFError",
        "/r/checkpoints/step-10: checkpoint load failed: bad zip",
    ],
)
def test_a_checkpoint_that_cannot_be_read_is_advised_on_not_fixed_in_the_program(
    said: str,
) -> None:
    """runtime.checkpoint's error names the file, then the earlier checkpoint and its command:
    the advice is that command, not a line of the program to fix."""
    earlier = (
        "the newest earlier complete checkpoint is step 5, /r/checkpoints/step-5: resume from "
        "it with `ezpz-tui launch --resume-from /r/checkpoints/step-5 -- python train.py`"
    )
    error = f"runtime.checkpoint_dirs.CheckpointError: {said}; {earlier}"
    assert advise((), None, 1, error, None) == (
        f"The checkpoint the run resumed from cannot be read; {earlier}.",
    )
    (alone,) = advise((), None, 1, f"runtime.checkpoint_dirs.CheckpointError: {said}", None)
    assert "cannot be read (the file is named above)" in alone and "--resume-from" in alone
    saving = "runtime.checkpoint_dirs.CheckpointError: /r/step-10: checkpoint save failed: x"
    assert advise((), None, 1, saving, None) == (f"Fix the exception in the program: {saving}",)


def test_a_write_that_found_no_space_is_advised_on_not_fixed_in_the_program(
    tmp_path: Path,
) -> None:
    """Said in a rank's log only (a full /dev/shm, a quota): the filesystem to free, not the
    exception to fix; recorded as the run's cause: the run's own disk, and where it is."""
    said = tuple(parse_text("OSError: [Errno 28] No space left on device: '/dev/shm/x'"))
    exception = "OSError: [Errno 28] No space left on device: '/dev/shm/x'"
    advice = advise(said, None, 1, exception, None)
    assert advice[0].startswith("A write found no space (the line above says where)")
    assert not any("Fix the exception" in line for line in advice)
    (full,) = advise((), None, 1, exception, None, tmp_path)
    assert (
        full.startswith(f"The disk of {tmp_path} is full: free space on it") and "--outputs" in full
    )
