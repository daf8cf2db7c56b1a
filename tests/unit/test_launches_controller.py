"""The main screen's launching object, driven without a terminal through a stand-in host.

A real session launches real 2-rank runs here (the demo under mpiexec): the object under test
is what turns the keys into launches, questions and messages, and what it says when it cannot.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ezpz_tui.core.launching.allocation import detect_allocation
from ezpz_tui.core.launching.plan import CheckedPlan, LaunchPlan
from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.core.session import Session
from ezpz_tui.ui.main.launches import Launches
from ezpz_tui.ui.messages import Launched, RelaunchAsked, RunsStopped
from runtime.checkpoint_dirs import RESUME_VAR, answers_path, newest
from tests.fixtures.host import FakeHost
from tests.fixtures.runs import wait_for

LONG_DEMO = (sys.executable, "-m", "runtime.examples.train", "--steps", "100000", "--sleep", "0.05")


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHost]:
    monkeypatch.setenv("EZPZ_ACCELERATORS_PER_HOST", "cpu:2")
    session = Session(detect_allocation(), tmp_path / "outputs")
    yield FakeHost(session=session, plan=LaunchPlan(ppn=2, command=LONG_DEMO))
    for result in session.supervisor.stop_all(grace_s=(1.0, 1.0)):
        assert result.clean, result


def test_launch_waits_for_the_allocation() -> None:
    host = FakeHost()
    Launches(host).launch()
    assert host.said() == "Still detecting the allocation."
    assert not host.groups  # nothing started


def test_launch_with_plan_errors_says_them(host: FakeHost) -> None:
    host.plan, host.plan_errors = None, ["TP=3 does not divide 2 ranks per node."]
    Launches(host).launch()
    assert host.notes == [
        ("Fix the plan first: TP=3 does not divide 2 ranks per node.", "", "error")
    ]
    assert not host.groups


def test_unwritable_outputs_open_a_dialog_that_stays(host: FakeHost, tmp_path: Path) -> None:
    blocker = tmp_path / "outputs"
    blocker.write_text("a file where the outputs directory should be\n")
    Launches(host).launch()
    assert host.groups == ["launch"]
    [(title, message)] = host.dialogs.errors
    assert title == "Not launched"
    assert str(blocker) in message
    assert not host.posted  # no run to open


def test_a_second_relaunch_while_a_save_runs_is_said_not_queued(host: FakeHost) -> None:
    """``R`` again while the run a relaunch replaces is saving: said, with how the save goes,
    and nothing asked or started (the session's worker holds the save)."""
    assert host.session is not None
    launches = Launches(host)
    host.session.handing_over = Path("/outputs/20261128-120000-000-tp1pp1cp1")
    launches.saving = "20261128-120000-000-tp1pp1cp1: saving step-389: 0.6 MB written (0.4 s)"
    launches.relaunch()
    assert host.notes == [
        (
            "20261128-120000-000-tp1pp1cp1 is saving for a relaunch already: "
            "20261128-120000-000-tp1pp1cp1: saving step-389: 0.6 MB written (0.4 s)",
            "",
            "warning",
        )
    ]
    assert not host.groups and not host.posted


def test_launch_then_stop_after_a_yes(host: FakeHost) -> None:
    launches = Launches(host)
    launches.launch()
    [started] = host.posted
    assert isinstance(started, Launched)
    handle = started.handle
    assert launches.handle_of(handle.run_dir) is handle
    assert launches.current() is handle
    launches.stop()
    [asked] = host.dialogs.asked
    assert asked.question == f"Stop {handle.run_dir.name}?"
    assert handle.wait(0) is None  # asked, not stopped yet
    asked.yes()
    assert isinstance(host.posted[-1], RunsStopped) and not host.posted[-1].then_exit
    assert handle.state.state == "stopped"
    launches.runs_stopped(host.posted[-1])
    assert host.runs_refreshed == 1 and not host.exited


def test_relaunch_of_a_live_run_asks_with_what_changes(host: FakeHost) -> None:
    launches = Launches(host)
    launches.launch()
    first = host.posted[-1].handle
    wait_for(lambda: first.poll() == "running", 30, "the first run to start")
    # The demo's Checkpointer says, when it is made, that the run answers a save request.
    wait_for(answers_path(first.run_dir).is_file, 60, "the demo to say it answers a request")
    host.plan = host.plan.with_changes(tp=2)
    launches.relaunch()
    asked = host.posted[-1]
    assert isinstance(asked, RelaunchAsked) and asked.handle is first
    assert "TP 1 → 2" in asked.lines, asked.lines
    assert asked.preflight[0].startswith("Preflight passed: rank 0 of 2 ran a step alone in ")
    assert asked.refused is None and "Preflight: one step of TP 2" in host.said()
    launches.relaunch_asked(asked)
    # The question offers to continue at the step the run saves now.
    [question] = host.dialogs.relaunches
    assert first.run_dir.name in question.question
    assert question.resumes.startswith("continues at step ") and "(saved now)" in question.resumes
    question.yes(True)
    second = host.posted[-1]
    assert isinstance(second, Launched) and second.handle is not first
    assert first.wait(0) is not None  # stopped before the new one started
    assert second.handle.state.state in ("pending", "running")


def counted_checks(session: Session, monkeypatch: pytest.MonkeyPatch) -> list[LaunchPlan]:
    """The plans ``session`` checks from now on, in order; each check is the real one."""
    plans: list[LaunchPlan] = []
    check = session.check

    def counting(plan: LaunchPlan) -> CheckedPlan:
        plans.append(plan)
        return check(plan)

    monkeypatch.setattr(session, "check", counting)
    return plans


def test_one_relaunch_checks_its_plan_once(host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 38: the question, its preview and the relaunch each checked the plan (three checks
    of the launcher and the staging for one ``R``). The plan is checked once and travels checked
    to the launch; the form edited while the question is up launches nothing unchecked: the
    plan asked about is the one that starts."""
    launches = Launches(host)
    launches.launch()
    first = host.posted[-1].handle
    wait_for(lambda: first.poll() == "running", 30, "the first run to start")
    # Asked once the demo said it answers a save request: the question is the saved-now one.
    wait_for(answers_path(first.run_dir).is_file, 60, "the demo to say it answers a request")
    checks = counted_checks(host.session, monkeypatch)
    asked_about = host.plan = host.plan.with_changes(tp=2)
    launches.relaunch()
    asked = host.posted[-1]
    assert isinstance(asked, RelaunchAsked)
    launches.relaunch_asked(asked)
    host.plan = host.plan.with_changes(tp=3)  # edited while the question is up: TP 3 of 2 ranks
    [question] = host.dialogs.relaunches
    question.yes(True)
    second = host.posted[-1]
    assert isinstance(second, Launched), host.dialogs.errors or host.notes
    assert checks == [asked_about], "one check per R"
    assert asked.checked.plan == asked_about
    assert read_run_toml(second.handle.run_dir)["plan"]["tp"] == 2


def test_a_relaunch_that_resumes_checks_its_plan_once(
    host: FakeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The relaunch that continues from the run's checkpoint (the question's default) launches
    the checked plan with the resume added, and checks it no more than a fresh one."""
    host.plan = host.plan.with_changes(command=(*LONG_DEMO, "--checkpoint-every", "2"))
    launches = Launches(host)
    launches.launch()
    first = host.posted[-1].handle
    wait_for(lambda: newest(first.run_dir) is not None, 120, "the first run's checkpoint")
    checks = counted_checks(host.session, monkeypatch)
    launches.relaunch()
    asked = host.posted[-1]
    assert isinstance(asked, RelaunchAsked) and asked.resume is not None
    launches.relaunch_asked(asked)
    [question] = host.dialogs.relaunches
    question.yes(resuming=True)
    second = host.posted[-1]
    assert isinstance(second, Launched), host.dialogs.errors or host.notes
    assert len(checks) == 1, "one check per R"
    env = read_run_toml(second.handle.run_dir)["plan"]["env"]
    assert env[RESUME_VAR] == str(first.run_dir), "a live parent is named itself"


def test_stop_then_exit_quits() -> None:
    host = FakeHost()
    Launches(host).runs_stopped(RunsStopped(then_exit=True))
    assert host.exited and host.runs_refreshed == 0


def test_stop_with_nothing_alive_says_so() -> None:
    host = FakeHost()
    Launches(host).stop()
    assert host.said() == "No run of this session is alive."
    assert not host.dialogs.asked
