"""The main screen's other objects, each driven without a terminal through a stand-in host:
the failure of the opened run, the Compare tab's reads, sweeps, submissions, the opened run's
tools, and the region history and room arithmetic."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from ezpz_tui.core.failover import Failover
from ezpz_tui.core.launching.allocation import detect_allocation
from ezpz_tui.core.launching.plan import LaunchPlan
from ezpz_tui.core.session import Session
from ezpz_tui.ui.main.comparison import COMPARE_TAB, Comparison
from ezpz_tui.ui.main.failures import Failures
from ezpz_tui.ui.main.launches import Launches
from ezpz_tui.ui.main.regions import RUN_VIEW_MIN, ViewHistory, sidebars_to_hide
from ezpz_tui.ui.main.run_tools import RunTools
from ezpz_tui.ui.main.run_views import wrap_step
from ezpz_tui.ui.main.submissions import Submissions, essential
from ezpz_tui.ui.main.sweeps import BUSY, Sweeps
from ezpz_tui.ui.messages import ComparisonReady, FailureExplained, SweepProgress
from tests.fixtures.host import FakeHost
from tests.fixtures.runs import make_run


def _failed_run(outputs: Path, run_id: str = "20261127-100000-tp1pp1cp1") -> Path:
    return make_run(
        outputs,
        run_id=run_id,
        state="failed",
        exit_code=1,
        sizes={},
        ranks=4,
        steps=20,
        created=1.8e9,
        failing_rank=1,
    )


def _opened(path: Path) -> SimpleNamespace:
    """What the failure object reads of the opened run (ui.opened_run.OpenedRun's fields)."""
    return SimpleNamespace(path=path, failure=None, watched=False, explaining=False)


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Session:
    monkeypatch.setenv("EZPZ_ACCELERATORS_PER_HOST", "cpu:2")
    return Session(detect_allocation(), tmp_path / "outputs")


# --- failures --------------------------------------------------------------------------------


def test_a_watched_run_that_fails_shows_its_failure_once(tmp_path: Path) -> None:
    run = _failed_run(tmp_path)
    opened = _opened(run)
    host = FakeHost(opened=opened)
    failures = Failures(host, Launches(host))
    failures.seen(opened, "running", started_here=False)
    assert opened.watched and not host.groups  # nothing to read yet
    failures.seen(opened, "failed", started_here=False)
    failures.seen(opened, "failed", started_here=False)  # the next poll: read once only
    assert host.groups == ["explain"]
    [explained] = host.posted
    assert isinstance(explained, FailureExplained) and explained.failure is not None
    assert explained.failure.rank == 1
    failures.explained(explained)
    assert opened.failure is explained.failure and host.bindings_refreshed == 1
    [(shown, _)] = host.dialogs.failures
    assert shown is explained.failure
    failures.explained(explained)  # read again at the next state: no second dialog
    assert len(host.dialogs.failures) == 1
    assert failures.on_screen() is explained.failure


def test_an_old_failed_run_opened_from_the_list_waits_for_w(tmp_path: Path) -> None:
    opened = _opened(_failed_run(tmp_path))
    host = FakeHost(opened=opened)
    failures = Failures(host, Launches(host))
    failures.seen(opened, "failed", started_here=False)
    failures.explained(host.posted[-1])
    assert not host.dialogs.failures  # not watched live: the Run tab's line says it
    failures.show()  # w
    failures.explained(host.posted[-1])
    assert len(host.dialogs.failures) == 1


def test_w_on_a_run_that_did_not_fail_says_so(tmp_path: Path) -> None:
    host = FakeHost(opened=_opened(tmp_path / "missing"))
    Failures(host, Launches(host)).show()
    assert host.said() == "No failed run is open."


def test_exclude_asks_about_the_ranks_host_when_no_node_fault_was_named(
    tmp_path: Path, session: Session
) -> None:
    opened = _opened(_failed_run(tmp_path))
    host = FakeHost(opened=opened, session=session, plan=LaunchPlan(ppn=2))
    failures = Failures(host, Launches(host))
    failures.failover = Failover(session, retries=0)
    failures.seen(opened, "failed", started_here=False)
    failures.explained(host.posted[-1])
    failures.exclude_and_relaunch()
    planned = host.posted[-1].exclusion
    assert not planned.blamed and planned.host == opened.failure.host
    failures.planned(host.posted[-1])
    # The rank's host is not one of this allocation's: the plan stays whole, and the question
    # says the blame is a guess.
    [asked] = host.dialogs.asked
    assert asked.question.startswith(
        f"No node fault was named: {planned.host} is rank 1's host, and the fault may be the "
        "program's."
    )
    assert "bad_hosts.txt" in asked.question and not host.dialogs.errors


# --- comparison ------------------------------------------------------------------------------


def test_the_comparison_is_read_when_its_runs_change_or_a_shown_one_is_live(
    tmp_path: Path,
) -> None:
    run = _failed_run(tmp_path)
    host = FakeHost()
    comparison = Comparison(host)
    wanted = (run, ())
    comparison.refresh(wanted, visible=False, live=False, only_if_live=False)
    [ready] = host.posted
    assert isinstance(ready, ComparisonReady)
    assert [r.run_id for r in ready.comparison.runs] == [run.name]
    comparison.refresh(wanted, visible=True, live=False, only_if_live=False)
    comparison.refresh((None, (run,)), visible=False, live=False, only_if_live=True)
    assert len(host.posted) == 1  # same runs, or only-if-live with nothing live: no read
    comparison.refresh(wanted, visible=True, live=True, only_if_live=True)
    assert len(host.posted) == 2 and host.groups == ["compare", "compare"]


# --- sweeps ----------------------------------------------------------------------------------


def test_a_sweep_asks_first_and_refuses_what_does_not_fit(session: Session) -> None:
    host = FakeHost(session=session, plan=LaunchPlan(ppn=2))
    sweeps = Sweeps(host)
    assert not sweeps.refuses_launch() and not sweeps.stop()
    sweeps.start()
    [(_, value, answer)] = host.dialogs.prompts
    assert "tp=" in value
    answer("tp=banana")
    assert host.notes[-1][1:] == ("No sweep", "error")
    answer("tp=3 pp=1 cp=1 steps=5")  # 3 does not divide 2 ranks
    assert host.notes[-1][0].startswith("No layout of that sweep fits: tp3 pp1 cp1")
    assert not sweeps.sweeping and not host.groups
    answer(None)  # closed: nothing
    assert len(host.notes) == 2


def test_the_end_of_a_sweep_shows_its_runs_compared() -> None:
    host = FakeHost()
    sweeps = Sweeps(host)
    sweeps._stop = asyncio.Event()  # type: ignore[assignment]  # as a started sweep has it
    assert sweeps.refuses_launch() and host.notes[-1][0] == BUSY
    asyncio.run(sweeps.progress(SweepProgress(None, "Sweep s1: 2 runs")))
    assert not sweeps.sweeping
    assert host.tabs == [COMPARE_TAB] and host.comparisons_refreshed == 1


# --- submissions and the run's tools ---------------------------------------------------------


def test_essential_lines_leave_the_plumbing_out() -> None:
    plumbing = ["#!/bin/bash", "#PBS -N x", "# a comment", "export A=1"]
    script = "\n".join([*plumbing, "#PBS -l select=2", "cd /w", "mpiexec -n 8 python t.py"])
    assert essential(script) == ["#PBS -l select=2", "cd /w", "mpiexec -n 8 python t.py"]


def test_submitting_before_the_allocation_is_read_waits() -> None:
    host = FakeHost()
    Submissions(host).submit(Path("/nowhere"))
    assert "still being read" in host.said() and not host.groups


def test_submitting_a_run_with_no_plan_says_why(tmp_path: Path, session: Session) -> None:
    host = FakeHost(session=session)
    Submissions(host).submit(tmp_path / "outputs" / "no-such-run")
    [(said, title, severity)] = host.notes
    assert (title, severity) == ("Not submitted", "error") and said
    assert not host.dialogs.asked


def test_run_tools_need_an_opened_run_and_say_when_it_feeds_no_tracker(tmp_path: Path) -> None:
    host = FakeHost()
    tools = RunTools(host)
    tools.show_stacks()
    tools.copy_trackers()
    assert not host.groups and len(host.notes) == 2
    host.opened = _opened(_failed_run(tmp_path))
    tools.copy_trackers()
    assert host.notes[-1][0].startswith("This run feeds no tracker") and not host.dialogs.clipboard


# --- regions and documents -------------------------------------------------------------------


def test_view_history_goes_back_and_forth_like_a_browser() -> None:
    history = ViewHistory()
    for region in ("main:tab-launch", "left", "left", "right"):
        history.visited(region)
    assert history.past == ["main:tab-launch", "left", "right"]
    assert history.back() == "left" and history.back() == "main:tab-launch"
    assert history.back() is None
    assert history.forward() == "left"
    history.visited("main:tab-run")  # a new visit drops the way forward
    assert history.forward() is None


@pytest.mark.parametrize(
    ("width", "left", "right", "hidden"),
    [
        (200, 40, 37, []),
        (150, 40, 37, ["#left"]),  # 73 left; without the left sidebar 113
        (100, 40, 37, ["#left", "#right"]),
        (100, None, 37, ["#right"]),
        (100, None, None, []),
    ],
)
def test_sidebars_step_aside_in_turn_for_a_run_view(
    width: int, left: int | None, right: int | None, hidden: list[str]
) -> None:
    assert sidebars_to_hide(width, left, right) == hidden
    shown = width - sum(w for s, w in (("#left", left), ("#right", right)) if w and s not in hidden)
    assert shown >= RUN_VIEW_MIN or hidden == [
        s for s, w in (("#left", left), ("#right", right)) if w
    ]


def test_documents_wrap_round() -> None:
    assert wrap_step([1, 2, 3], 3, 1) == 1
    assert wrap_step([1, 2, 3], 1, -1) == 3
    assert wrap_step([1, 2, 3], None, 1) == 1 and wrap_step([1, 2, 3], None, -1) == 3


def test_the_main_screen_is_composed_not_inherited() -> None:
    """Each concern is an object the screen owns: at most 3 project classes in its MRO."""
    from ezpz_tui.ui.main.screen import MainScreen

    ours = [c for c in MainScreen.__mro__ if c.__module__.startswith("ezpz_tui.")]
    assert len(ours) <= 3, ours
