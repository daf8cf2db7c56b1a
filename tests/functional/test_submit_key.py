"""``b`` in the runs list: the finished run's plan as a batch job, the script shown first.

The run is a finished Polaris run on disk, so the job goes to PBS; PBS cannot run here, so a
stand-in ``qsub`` on PATH answers as the PBS server does (and keeps what it was given).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from textual.widgets import Static

from ezpz_tui.core.checking.check import Check
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.screens.confirm import ConfirmScreen
from ezpz_tui.ui.widgets.runs import RunsPanel
from ezpz_tui.ui.widgets.table import VimTable
from tests.fixtures.runs import make_run
from tests.pilots import FIXED, LOCAL, started, text_of, until, workers_done

JOB = "9001.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"


@pytest.fixture
def qsub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "qsub"
    tool.write_text(f'#!/bin/sh\ncp "$1" "$1.submitted"\necho {JOB}\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return tool


async def test_b_shows_the_script_and_submits_on_yes(tmp_path: Path, qsub: Path) -> None:
    outputs = tmp_path / "outputs"
    run = make_run(
        outputs,
        run_id="20261126-100000-000-tp2pp1cp1",
        state="succeeded",
        exit_code=0,
        sizes={"tp": 2},
        ranks=8,
        steps=4,
        created=FIXED - 60,
    )
    app = EzpzApp(outputs=outputs, alloc=LOCAL, clock=lambda: FIXED, checks=[Check("p", "ok", "")])
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await workers_done(pilot)
        panel = app.query_one(RunsPanel)
        await until(pilot, lambda: len(panel.runs) == 1, "the run listed", 10)
        app.query_one("#runs-table", VimTable).focus()
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question", 10)
        question = text_of(app.screen.query_one("#question", Static))
        assert question == f"Submit the plan of {run.name} with qsub?"
        shown = text_of(app.screen.query_one("#details", Static))
        assert "#PBS -l select=2:system=polaris" in shown and "#PBS -l walltime=01:00:00" in shown
        assert "ezpz_tui launch" in shown and "--tp=2" in shown
        assert not (outputs / ".batch").exists(), "nothing is submitted before the answer"
        await pilot.press("y")
        await until(pilot, lambda: any(r.queued for r in panel.runs), "the job listed", 10)
        job = panel.runs[0]
        assert (job.state, job.job_id) == ("queued", JOB)
        (submitted,) = (outputs / ".batch").glob("*.sh.submitted")
        assert "#PBS -l select=2:system=polaris" in submitted.read_text()

        # On the queued job: nothing to open, nothing to submit again.
        table = app.query_one("#runs-table", VimTable)
        table.move_cursor(row=0)
        await pilot.press("b", "enter")
        await workers_done(pilot)
        assert not isinstance(app.screen, ConfirmScreen) and app.main.opened is None
        assert len(list((outputs / ".batch").glob("*.sh"))) == 1


async def test_no_means_nothing_is_submitted(tmp_path: Path, qsub: Path) -> None:
    outputs = tmp_path / "outputs"
    make_run(
        outputs,
        run_id="20261126-100000-000-tp1pp1cp1",
        state="failed",
        exit_code=1,
        failing_rank=1,
        sizes={},
        ranks=4,
        steps=4,
        created=FIXED - 60,
    )
    app = EzpzApp(outputs=outputs, alloc=LOCAL, clock=lambda: FIXED, checks=[Check("p", "ok", "")])
    async with app.run_test(size=(80, 24)) as pilot:
        await started(pilot)
        await workers_done(pilot)
        await until(pilot, lambda: len(app.query_one(RunsPanel).runs) == 1, "the run", 10)
        app.query_one("#runs-table", VimTable).focus()
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question", 10)
        await pilot.press("n")
        await workers_done(pilot)
        assert not isinstance(app.screen, ConfirmScreen)
        assert not (outputs / ".batch").exists()
