"""The one failover flow the CLI's ``--retries`` loop and the TUI's workers drive, and the one
result a launch answers with.

The node faults are real runs: a two-host Aurora PBS job whose ``mpiexec`` is the stand-in of
:mod:`tests.fixtures.stand_ins` (it prints, into ``launcher.log``, the line PALS prints when the
last host of its hostfile dies, and starts no rank), launched through the session, so the run
directories, the failure read from them and the relaunches are the real ones. Runs this process
did not start are written by :func:`tests.fixtures.runs.make_run`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ezpz_tui.core.failover import Decision, Failover
from ezpz_tui.core.launch_result import LaunchResult, NotStarted, Started, not_started
from ezpz_tui.core.launching.allocation import detect_allocation
from ezpz_tui.core.launching.plan import LaunchPlan
from ezpz_tui.core.launching.supervisor import RunHandle
from ezpz_tui.core.runs.bad_hosts import bad_hosts_path, read_bad_hosts
from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.core.session import Session
from ezpz_tui.core.watching.failure import Failure, explain
from runtime.checkpoint_dirs import COMPLETE, RESUME_VAR, step_dir
from runtime.rundir import RunDir
from tests.fixtures.runs import make_run
from tests.fixtures.stand_ins import AURORA, aurora_job

PLAN = LaunchPlan(command=("python", "-c", "pass"))
SHORT = [h.split(".")[0] for h in AURORA]


@pytest.fixture
def session(tmp_path: Path) -> Session:
    """A session on a two-host Aurora PBS job whose mpiexec loses its last node."""
    alloc, stand_in = aurora_job(tmp_path)
    return Session(alloc, tmp_path / "outputs", which={"mpiexec": str(stand_in)}.get)


def started(result: LaunchResult | None) -> RunHandle:
    assert isinstance(result, Started), result
    assert result.handle.wait(30) is not None, "the stand-in launcher did not end"
    return result.handle


def failed(handle: RunHandle) -> Failure:
    failure = explain(handle.run_dir)
    assert failure is not None, handle.run_dir
    return failure


def runs(outputs: Path) -> list[Path]:
    return sorted(p for p in outputs.iterdir() if p.is_dir() and p.name[0].isdigit())


def test_retries_drop_each_dead_host_until_nothing_fits(session: Session) -> None:
    outputs = session.store.outputs
    flow = Failover(session, retries=2)
    first = started(session.launch(PLAN))
    assert first.bad_hosts_added == (AURORA[1],), "the run's end recorded its node fault"
    step = flow.after(first, PLAN)
    second = started(step.result)
    assert step.said[0].startswith(f"retry 1 of 2 without {AURORA[1]} (after the launcher: ")
    # No spare: one host fewer, and the relaunch says so.
    assert step.said[1:] == ("no spare host: the relaunch runs 2 ranks instead of 4 (DP 4 → 2)",)
    assert step.unrecorded is None  # listed already: nothing to add
    record = read_run_toml(second.run_dir)
    assert record["parent"] == first.run_dir.name
    assert record["hosts"] == [AURORA[0]]
    assert SHORT[1] in record["plan"]["exclude"]
    assert session.current is second

    # The retry's own node fault names the last host: recorded, and the next retry refused
    # with the plan's reason before any run is made.
    last = flow.after(second, PLAN)
    assert isinstance(last.result, NotStarted) and last.result.must_fix
    assert last.result.title == f"Cannot relaunch {second.run_dir.name} without {AURORA[0]}"
    assert second.bad_hosts_added == (AURORA[0],)
    assert last.said[0].startswith(
        f"cannot retry without {AURORA[0]}: Every allocated host is excluded"
    )
    assert [h.split(".")[0] for h in read_bad_hosts(outputs)] == [SHORT[1], SHORT[0]]
    assert runs(outputs) == [first.run_dir, second.run_dir]


def test_a_retry_resumes_from_the_failed_runs_newest_complete_checkpoint(
    session: Session,
) -> None:
    """The stand-in starts no rank, so the failed run's checkpoints are written here as a
    save leaves them: step 10's complete, step 15's torn (no mark)."""
    flow = Failover(session, retries=1)
    first = started(session.launch(PLAN))
    for step, done in ((10, True), (15, False)):
        folder = step_dir(first.run_dir, step)
        folder.mkdir(parents=True)
        if done:
            (folder / COMPLETE).write_text("{}")
    step = flow.after(first, PLAN)
    second = started(step.result)
    checkpoint = step_dir(first.run_dir, 10)
    assert step.said[2] == f"the relaunch resumes at step 10 from {checkpoint}"
    record = read_run_toml(second.run_dir)
    assert record["plan"]["env"] == {RESUME_VAR: str(checkpoint)}
    assert record["parent"] == first.run_dir.name


def test_a_spare_takes_the_failed_hosts_place_and_the_sizes_stay(session: Session) -> None:
    """With one spare the run uses the first host only; the stand-in's node fault names it,
    and the retry runs on the spare with the same number of ranks."""
    flow = Failover(session, retries=1)
    plan = PLAN.with_changes(spares=1)
    first = started(session.launch(plan))
    assert read_run_toml(first.run_dir)["hosts"] == [AURORA[0]]
    step = flow.after(first, plan)
    second = started(step.result)
    assert step.said[1:] == (f"a spare host takes {AURORA[0]}'s place: the sizes stay",)
    record, before = read_run_toml(second.run_dir), read_run_toml(first.run_dir)
    assert record["hosts"] == [AURORA[1]]
    assert record["sizes"] == before["sizes"]
    assert record["plan"].get("spares", 0) == 0 and before["plan"]["spares"] == 1


def test_without_a_spare_the_demo_keeps_its_global_batch(session: Session) -> None:
    demo = PLAN.with_changes(command=("python", "-m", "runtime.examples.train", "--steps", "9"))
    flow = Failover(session, retries=1)
    first = started(session.launch(demo))
    step = flow.after(first, demo)
    second = started(step.result)
    assert step.said[-1] == "the demo keeps its global batch: --global-batch 32"
    command = read_run_toml(second.run_dir)["plan"]["command"]
    assert command[-4:] == ["--steps", "9", "--global-batch", "32"]


def test_the_count_is_spent_along_a_chain_of_retries(session: Session) -> None:
    flow = Failover(session, retries=1)
    first = started(session.launch(PLAN))
    second = started(flow.after(first, PLAN).result)
    nothing = flow.after(second, PLAN)
    assert (nothing.result, nothing.said) == (None, ())
    assert flow.decide(failed(second)).attempt == 0
    # Each run's end recorded its own node fault, whatever the count: the next launch knows.
    assert [h.split(".")[0] for h in read_bad_hosts(session.store.outputs)] == [SHORT[1], SHORT[0]]
    assert len(runs(session.store.outputs)) == 2


def test_no_retries_asked_for_means_none(session: Session) -> None:
    first = started(session.launch(PLAN))
    flow = Failover(session, retries=0)
    assert flow.after(first, PLAN).result is None
    assert len(runs(session.store.outputs)) == 1
    assert read_bad_hosts(session.store.outputs) == [AURORA[1]], "recorded by the run's end"


def test_a_failure_is_claimed_once(session: Session) -> None:
    flow = Failover(session, retries=3)
    failure = failed(started(session.launch(PLAN)))
    decision = flow.decide(failure)
    assert (decision.attempt, decision.retries, decision.under_way) == (1, 3, False)
    again = flow.decide(failure)  # the TUI reads the failure again on `w`
    assert (again.attempt, again.under_way) == (0, True)
    assert len(runs(session.store.outputs)) == 1, "deciding starts nothing"


def test_a_run_not_started_here_or_not_a_node_fault_is_not_retried(
    session: Session, tmp_path: Path
) -> None:
    outputs = session.store.outputs
    flow = Failover(session, retries=3)
    common = dict(state="failed", exit_code=1, sizes={}, ranks=2, steps=8, created=1.8e9)
    program = make_run(outputs, run_id="20261125-100000-000", failing_rank=1, **common)  # type: ignore[arg-type]
    failure = explain(program)
    assert failure is not None and failure.node_fault_host is None
    decision = flow.decide(failure)
    assert decision.attempt == 0
    assert failure.judged is not None and failure.judged.kind == "workload"
    assert decision.said == (
        f"not retrying: {failure.cause} does not look like a node fault: it would fail again "
        "anywhere"
    )

    elsewhere = make_run(outputs, run_id="20261125-100001-000", failing_rank=1, **common)  # type: ignore[arg-type]
    with RunDir(elsewhere).launcher_log.open("a") as fh:
        fh.write(f"{AURORA[1]}: shepherd died from signal 9\n")
    fault = explain(elsewhere)
    assert fault is not None and fault.node_fault_host == AURORA[1]
    assert flow.decide(fault) == Decision(), "another process's run is its to retry"
    assert not bad_hosts_path(outputs).exists()


def test_an_unwritable_bad_hosts_file_is_said_and_the_retry_goes_on(session: Session) -> None:
    outputs = session.store.outputs
    bad_hosts_path(outputs).mkdir(parents=True)  # a directory where the file should be
    flow = Failover(session, retries=1)
    first = started(session.launch(PLAN))
    step = flow.after(first, PLAN)
    second = started(step.result)
    assert step.unrecorded is not None
    assert step.unrecorded.startswith(f"cannot record {AURORA[1]} in bad_hosts.txt: ")
    assert step.said[0] == step.unrecorded
    assert read_run_toml(second.run_dir)["hosts"] == [AURORA[0]]  # its plan excludes the host


def test_a_person_is_asked_before_anything_is_written(session: Session) -> None:
    outputs = session.store.outputs
    flow = Failover(session, retries=0)
    first = started(session.launch(PLAN))
    failure = failed(first)
    recorded = bad_hosts_path(outputs).read_text()  # by the run's end, not by the flow
    exclusion = flow.exclusion(failure, None)  # the run's own record: no fallback needed
    assert (exclusion.host, exclusion.blamed, exclusion.hosts) == (AURORA[1], True, (AURORA[0],))
    assert exclusion.refused is None and exclusion.listed
    RunDir(first.run_dir).run_toml.write_text("not toml [")  # no readable plan: the fallback
    too_big = flow.exclusion(failure, PLAN.with_changes(nodes=2))
    assert too_big.plan is None and too_big.refused is not None and too_big.refused.must_fix
    assert "2 nodes asked for but only 1" in too_big.refused.text
    assert bad_hosts_path(outputs).read_text() == recorded
    assert len(runs(outputs)) == 1

    bad_hosts_path(outputs).write_text("")  # the person had emptied it, then chose to exclude
    assert not flow.exclusion(failure, None).listed
    done = flow.relaunch(exclusion)
    second = started(done.result)
    assert done.said == (f"added {AURORA[1]} to {bad_hosts_path(outputs)}",)
    assert read_run_toml(second.run_dir)["parent"] == first.run_dir.name


def test_why_a_launch_did_not_start_is_worded_once(tmp_path: Path) -> None:
    alloc = detect_allocation({"EZPZ_ACCELERATORS_PER_HOST": "cpu:2"}, probe=False, host="ws")
    outputs = tmp_path / "out"
    outputs.write_text("a file")
    result = Session(alloc, outputs).launch(LaunchPlan(ppn=1, command=("python", "-c", "")))
    assert isinstance(result, NotStarted)
    assert (result.kind, result.title, result.must_fix) == ("outputs", "Not launched", True)
    assert result.reasons == (f"cannot create a run in {outputs}: not a directory",)
    invalid = not_started(ValueError("cannot record x = 1 in run.toml"), outputs, "relaunch")
    assert (invalid.kind, invalid.title, invalid.must_fix) == ("invalid", "Relaunch failed", False)
    assert invalid.text == "cannot record x = 1 in run.toml"


def test_spares_must_leave_a_host_for_the_run(session: Session) -> None:
    from ezpz_tui.core.launching.plan import validate

    alloc = session.alloc
    assert PLAN.with_changes(spares=1).hosts_used(alloc) == (AURORA[0],)
    [problem] = [p for p in validate(PLAN.with_changes(spares=2), alloc) if p.level == "error"]
    assert problem.message == (
        "2 spares asked for but only 2 usable hosts are allocated: 1 for the run leave 1."
    )
