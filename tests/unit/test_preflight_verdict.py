"""A preflight's verdict (ezpz_tui.core.launching.preflight): which ranks run, in what
environment, and what their ends say.

The ranks here are real processes of small scripts that leave runtime.preflight's marks the
way runtime.setup() and History.record do, without torch: what is under test is the reading
of how they ended, in seconds.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from ezpz_tui.core.launching.allocation import detect_allocation
from ezpz_tui.core.launching.plan import CheckedPlan, LaunchPlan, check
from ezpz_tui.core.launching.preflight import (
    FAILED,
    NOT_PREFLIGHTED,
    PASSED,
    preflight_ranks,
    rank_env,
    run_preflight,
)

SET_UP = "from runtime import preflight\npreflight.set_up(*preflight.requested())\n"


def plan_of(monkeypatch: pytest.MonkeyPatch, script: str, **more: object) -> CheckedPlan:
    monkeypatch.setenv("EZPZ_ACCELERATORS_PER_HOST", "cpu:2")
    plan = LaunchPlan(ppn=2, command=(sys.executable, "-c", script), **more)  # type: ignore[arg-type]
    return check(plan, detect_allocation())


@pytest.mark.parametrize(
    ("world", "pp", "ranks"), [(2, 1, (0,)), (2, 2, (0, 1)), (8, 2, (0, 4)), (8, 4, (0, 6))]
)
def test_rank_0_and_the_last_stage_s_first_rank_run(world: int, pp: int, ranks: tuple) -> None:
    assert preflight_ranks(world, pp) == ranks


def test_a_rank_is_told_its_place_and_never_the_checkpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env_of_plan = (("EZPZ_RESUME_FROM", "/runs/a"), ("MY_FLAG", "1"))
    checked = plan_of(monkeypatch, "pass", tp=2, env=env_of_plan)
    base = {"PATH": "/bin", "RANK": "5", "MASTER_PORT": "1234", "EZPZ_RESUME_FROM": "/runs/b"}
    env = rank_env(base, checked, 1, tmp_path)
    assert env["EZPZ_PREFLIGHT"] == "1,2" and env["EZPZ_RUN_DIR"] == str(tmp_path)
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"]) == ("1", "2", "0")
    assert (env["EZPZ_TP"], env["TORCH_DEVICE"], env["MY_FLAG"]) == ("2", "cpu", "1")
    assert "EZPZ_RESUME_FROM" not in env and "MASTER_PORT" not in env
    assert env["PATH"] == "/bin"


def test_a_raise_after_setup_fails_with_its_exception_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    script = SET_UP + "raise ValueError('heads 3 is not divisible by TP 2')"
    found = run_preflight(plan_of(monkeypatch, script))
    assert found.verdict == FAILED and found.refuses
    assert found.cause == "ValueError: heads 3 is not divisible by TP 2"
    [line] = found.lines()
    assert line.startswith("Preflight failed on rank 0 of 2 (")
    assert line.endswith("): ValueError: heads 3 is not divisible by TP 2")


def test_an_exit_with_a_message_fails_with_that_message(monkeypatch: pytest.MonkeyPatch) -> None:
    """SystemExit("...") prints only its message: the demo refuses a layout so."""
    script = SET_UP + "raise SystemExit('--heads 3 must be divisible by tp=2')"
    found = run_preflight(plan_of(monkeypatch, script))
    assert (found.verdict, found.cause) == (FAILED, "--heads 3 must be divisible by tp=2")


def test_a_silent_failure_says_how_it_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    found = run_preflight(plan_of(monkeypatch, SET_UP + "import os\nos._exit(3)"))
    assert (found.verdict, found.cause) == (FAILED, "it ended with exit 3 and said nothing")


def test_setup_without_a_recorded_step_is_not_preflighted(monkeypatch: pytest.MonkeyPatch) -> None:
    found = run_preflight(plan_of(monkeypatch, SET_UP))
    assert found.verdict == NOT_PREFLIGHTED and not found.refuses
    assert found.cause == "it reached runtime.setup() but recorded no step (runtime.History)"


def test_a_rank_that_takes_too_long_is_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    began = time.monotonic()
    found = run_preflight(plan_of(monkeypatch, SET_UP + "import time\ntime.sleep(600)"), 3)
    assert time.monotonic() - began < 30
    assert (found.verdict, found.cause) == (NOT_PREFLIGHTED, "no step recorded in time")


def test_a_recorded_step_passes_with_its_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    script = "from runtime import History\nHistory().record(0, {'loss': 1.0})\nraise SystemExit(9)"
    found = run_preflight(plan_of(monkeypatch, script, pp=2))
    assert [(r.rank, r.verdict) for r in found.ranks] == [(0, PASSED), (1, PASSED)]
    assert found.peak_rss_bytes is not None and found.peak_rss_bytes > 1 << 20


def test_a_command_that_cannot_start_fails_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EZPZ_ACCELERATORS_PER_HOST", "cpu:2")
    plan = LaunchPlan(ppn=2, command=("/nonexistent/python", "train.py"))
    found = run_preflight(check(plan, detect_allocation()))
    assert found.verdict == FAILED
    assert found.cause == "/nonexistent/python cannot start: No such file or directory"
