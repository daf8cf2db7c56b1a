"""A relaunch asks the live run to save at the step it is at and stop: the child continues there.

Real 2-rank demo runs (mpiexec, gloo) through the real Session and Supervisor, relaunched as
the TUI's ``R`` and the headless command do (``Session.relaunch`` with the plan continuing from
the live run). The parent saves no periodic checkpoint: the one the child loads is the one the
relaunch asked for. It is at the step the parent stopped at, the parent ran no step after it,
the child's first step is that one, and from there the child's losses (TP 2 on 2 ranks, where
the parent was DP 2) are those of a run never interrupted, to 1e-5 (float32 rounding across
layouts, as in test_checkpoint_resume.py). The parent's end is a stop by the user, not a failure.

The bad input: a second relaunch while a save is asked is refused with what it waits for; a
save that cannot be written (the disk fills) ends the parent, and the newest complete
checkpoint is what the child gets, said in words.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ezpz_tui.core.comparing.facts import read_facts
from ezpz_tui.core.launch_result import NotStarted, Started
from ezpz_tui.core.launching.handover import hand_over
from ezpz_tui.core.launching.plan import LaunchPlan
from ezpz_tui.core.launching.resuming import checked_with_resume, parent_resume
from ezpz_tui.core.launching.supervisor import RunHandle, Supervisor
from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.core.session import Session
from runtime.checkpoint_dirs import complete, newest, request_path
from runtime.rundir import RankState, RunDir, read_state, read_statuses
from tests.fixtures.mounts import tmpfs
from tests.pilots import LOCAL
from tests.procs import processes_of

pytestmark = pytest.mark.mpi

STEPS, AT = 100, 60
RTOL = 1e-5
TINY = (
    *("-m", "runtime.examples.train", "--steps", str(STEPS), "--layers", "2"),
    *("--global-batch", "8", "--seq-len", "16", "--dim", "32", "--heads", "4"),
    *("--vocab", "32", "--dtype", "float32"),
)


def steps_of(run: Path) -> dict[int, tuple[float, float]]:
    path = RunDir(run).metrics(0)
    lines = path.read_text().splitlines(keepends=True) if path.is_file() else []
    found = {}
    for line in lines:
        if line.endswith("\n"):
            record = json.loads(line)
            found[record["step"]] = (record["metrics"]["loss"], record["metrics"]["grad_norm"])
    return found


def wait_for_steps(handle: RunHandle, steps: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while len(steps_of(handle.run_dir)) < steps:
        assert handle.wait(0.2) is None, RunDir(handle.run_dir).launcher_log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"fewer than {steps} steps in {seconds} s"


def straight_run(mpiexec: str, run: Path) -> dict[int, tuple[float, float]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EZPZ_", "PMI_"))}
    env |= {"EZPZ_RUN_DIR": str(run), "EZPZ_DIST_TIMEOUT": "60", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, *TINY],
        env=env,
        timeout=180,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return steps_of(run)


def relaunched(session: Session, parent: RunHandle, plan: LaunchPlan, said: list[str]) -> Path:
    """What ``R`` then ``y`` does: the plan checked, continuing from the live parent."""
    resume = parent_resume(parent.run_dir, alive=parent.wait(0) is None)
    checked = checked_with_resume(session.check(plan), resume)
    result = session.relaunch(checked, progress=said.append)
    assert isinstance(result, Started), result
    return result.handle.run_dir


@pytest.mark.timeout(420)
def test_a_relaunch_with_tp_changed_continues_at_the_step_saved_now(
    mpiexec: str, tmp_path: Path
) -> None:
    session = Session(LOCAL, tmp_path / "outputs", Supervisor(relaunch_save_s=120.0))
    command = (sys.executable, *TINY, "--sleep", "0.05")
    started = session.launch(LaunchPlan(ppn=2, command=command))
    assert isinstance(started, Started), started
    parent = started.handle
    try:
        wait_for_steps(parent, AT, 180)
        resume = parent_resume(parent.run_dir, alive=True)
        assert resume is not None and resume.saved_now is not None
        assert resume.describe() == f"continues at step {resume.saved_now} (saved now)"
        assert resume.saved_now >= AT and newest(parent.run_dir) is None  # no periodic save
        said: list[str] = []
        child = relaunched(session, parent, LaunchPlan(ppn=2, tp=2, command=command), said)
        handle = session.current
        assert handle is not None and handle.wait(240) == 0, RunDir(child).launcher_log
    finally:
        session.supervisor.stop_all(grace_s=(1.0, 1.0))

    run = parent.run_dir
    saved = newest(run)
    assert saved is not None and [c.step for c in complete(run)] == [saved.step]
    parent_steps = steps_of(run)
    assert max(parent_steps) == saved.step - 1, "no step after the saved one was run"
    assert saved.step >= resume.saved_now
    assert said[-1] == (
        f"{run.name}: saved step {saved.step} now and stopped; the new run continues at step "
        f"{saved.step}"
    )
    state = read_state(run)
    assert state.state == "stopped" and state.stopped_by_user and state.failed_rank is None
    assert state.cause is None and state.exit_code == 0
    assert {s.state for s in read_statuses(run)} == {RankState.SUCCEEDED}
    assert not request_path(run).exists()

    record = read_run_toml(child)
    assert record["parent"] == run.name and record["plan"]["tp"] == 2
    assert record["handover"]["step"] == saved.step
    child_steps = steps_of(child)
    assert min(child_steps) == saved.step and max(child_steps) == STEPS - 1
    log = RunDir(child).log(0).read_text()
    assert f"resumed at step {saved.step} from {saved.path}" in log
    assert "pp=1 dp=1 cp=1 tp=2" in log

    want = straight_run(mpiexec, tmp_path / "straight")
    for step in range(saved.step, STEPS):
        (loss, norm), (ref_loss, ref_norm) = child_steps[step], want[step]
        assert math.isclose(loss, ref_loss, rel_tol=RTOL), f"step {step}: {loss} vs {ref_loss}"
        assert math.isclose(norm, ref_norm, rel_tol=RTOL), f"step {step}: {norm} vs {ref_norm}"
    for step in range(saved.step):  # and the parent trained what the straight run did
        assert math.isclose(parent_steps[step][0], want[step][0], rel_tol=RTOL), step

    restart = read_facts(child).restart
    assert restart is not None and restart.save_s is not None and restart.load_s is not None
    parts = [restart.save_s, restart.stop_s, restart.start_s, restart.load_s]
    assert all(p >= 0 for p in parts), restart
    assert math.isclose(sum(parts) + restart.first_step_s, restart.total_s, abs_tol=1e-6)
    assert processes_of(run, child) == []


@pytest.mark.timeout(240)
def test_a_second_relaunch_while_a_save_is_asked_is_refused(tmp_path: Path) -> None:
    """Another process (a second ``ezpz-tui relaunch``) has asked the run to save and stop;
    its answer has not come yet (the run is still starting): this relaunch waits for nothing
    and asks nothing, it says so, and the run goes on."""
    session = Session(LOCAL, tmp_path / "outputs")
    command = (sys.executable, *TINY, "--sleep", "0.05")
    started = session.launch(LaunchPlan(ppn=2, command=command))
    assert isinstance(started, Started), started
    parent = started.handle
    try:
        wait_for_steps(parent, 2, 180)
        asked = time.time() - 3
        request = {"stop": True, "id": "another", "asked": asked}
        plan = checked_with_resume(
            session.check(LaunchPlan(ppn=2, tp=2, command=command)),
            parent_resume(parent.run_dir, alive=True),
        )
        request_path(parent.run_dir).write_text(json.dumps(request))
        result = session.relaunch(plan)
        assert isinstance(result, NotStarted) and result.kind == "busy"
        assert result.reasons[0].startswith(f"{parent.run_dir.name} was asked to save and stop ")
        assert result.reasons[0].endswith(" s ago already: wait for it.")
        assert session.current is parent and len(list((tmp_path / "outputs").iterdir())) == 1
    finally:
        session.supervisor.stop_all(grace_s=(1.0, 1.0))


@pytest.mark.timeout(300)
def test_a_save_the_disk_cannot_hold_leaves_the_newest_complete_checkpoint(
    tmp_path: Path,
) -> None:
    """A 2 MB tmpfs holds one checkpoint of the run (1.1 MB), saved at step 20, and not a
    second: the save asked now fails on every rank, the run ends, and the handover says the
    child starts at step 20, with the steps it redoes."""
    with tmpfs(tmp_path / "fs", "2m") as fs:
        session = Session(LOCAL, fs / "outputs")
        saving = ("--checkpoint-every", "20", "--checkpoint-keep", "1", "--sleep", "0.05")
        started = session.launch(LaunchPlan(ppn=2, command=(sys.executable, *TINY, *saving)))
        assert isinstance(started, Started), started
        handle = started.handle
        try:
            wait_for_steps(handle, 24, 180)
            said: list[str] = []
            done = hand_over(handle, 60.0, (1.0, 1.0), said.append)
        finally:
            session.supervisor.stop_all(grace_s=(1.0, 1.0))
        run = handle.run_dir
        assert done.saved is None and done.found is not None and done.found.step == 20
        assert said[-1].startswith(f"{run.name} ended before its save was complete (failed)")
        assert said[-1].endswith(" steps redone)")
        assert "the new run starts at step 20, the newest checkpoint (" in said[-1]
        assert newest(run) == done.found


@pytest.mark.timeout(180)
def test_the_ranks_answer_a_save_and_stop_the_step_after_it_is_seen(
    mpiexec: str, tmp_path: Path
) -> None:
    """Rank 0 writes the request at step 5, before its look: the look goes into the all-reduce
    that every rank reads at step 6, where they save, run no step more and end with status 0
    (tests/ranks/asked_to_stop.py), having said at their start that they answer."""
    run = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EZPZ_", "PMI_"))}
    env |= {"EZPZ_RUN_DIR": str(run), "EZPZ_DIST_TIMEOUT": "60", "OMP_NUM_THREADS": "1"}
    script = str(Path(__file__).parents[1] / "ranks" / "asked_to_stop.py")
    proc = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, script, "5"],
        env=env,
        timeout=150,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "checkpoint: saved step 6; stopping, as asked" in proc.stderr
    assert "Traceback" not in proc.stderr
    for rank in range(2):  # step 6 saved, its record not written: step_done ended the rank
        assert (run / "steps" / f"rank-{rank:05d}.txt").read_text().split() == list("12345")
    assert [c.step for c in complete(run)] == [6]
    answer = json.loads((run / "checkpoint.request.done").read_text())
    assert answer["id"] == "test" and answer["step"] == 6
    assert json.loads((run / "checkpoint.answers").read_text())["poll_every"] == 1


@pytest.mark.timeout(300)
def test_a_run_another_process_supervises_is_handed_over_through_its_directory(
    tmp_path: Path,
) -> None:
    """What the headless ``ezpz-tui relaunch RUN`` meets: RUN was started by ``ezpz-tui
    launch`` in another terminal, whose supervisor records its end. The relaunch asks through
    the run directory; the ranks save and end by themselves; that supervisor records the run
    stopped by the user (the request says a stop was asked), and the child continues at the
    saved step."""
    from tests.fixtures.cli import REPO, base_env, kill_leftovers

    outputs = tmp_path / "outputs"
    command = [sys.executable, *TINY, "--sleep", "0.05"]
    with (tmp_path / "cli.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ezpz_tui", "launch", "--ppn", "2", "--", *command],
            env=base_env(outputs),
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    session = Session(LOCAL, outputs)
    try:
        deadline = time.monotonic() + 180
        while not outputs.is_dir() or not any(outputs.iterdir()):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.2)
        [run] = [p for p in outputs.iterdir() if p.is_dir()]
        while len(steps_of(run)) < 10:
            assert proc.poll() is None, (tmp_path / "cli.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "fewer than 10 steps"
            time.sleep(0.2)
        plan = checked_with_resume(
            session.check(LaunchPlan(ppn=2, tp=2, command=tuple(command))),
            parent_resume(run, alive=True),
        )
        said: list[str] = []
        result = session.relaunch(plan, progress=said.append, replacing=run)
        assert isinstance(result, Started), result
        assert proc.wait(timeout=60) is not None
        saved = newest(run)
        assert saved is not None and max(steps_of(run)) == saved.step - 1
        assert said[-1].endswith(
            f"saved step {saved.step} now and stopped; the new run continues at step {saved.step}"
        )
        state = read_state(run)
        assert state.state == "stopped" and state.stopped_by_user and state.exit_code == 0
        child = result.handle
        assert read_run_toml(child.run_dir)["parent"] == run.name
        deadline = time.monotonic() + 180
        while not steps_of(child.run_dir):
            assert child.wait(0.2) is None and time.monotonic() < deadline
        assert min(steps_of(child.run_dir)) == saved.step
    finally:
        session.supervisor.stop_all(grace_s=(1.0, 1.0))
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        kill_leftovers(outputs)
