"""The opened run's collectives in the TUI: the rank that never entered the collective the others
wait in is marked ``?`` in the rank list and named in a notification; the rank that arrives last
is ``slow`` and colours the heatmap's arrival-lag figure; ``P`` profiles every rank's next steps.

The runs are real: gloo scripts under ``ezpz-tui launch`` (the real mpiexec, capture
wrapper and Flight Recorder), attached read-only as a user who comes back to a job.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Static

from ezpz_tui.core.checking.check import Check
from ezpz_tui.core.watching.rank_rows import heat_values
from ezpz_tui.core.watching.verdicts import ended_verdicts
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.screens.stacks import StacksScreen
from ezpz_tui.ui.widgets.panels import SummaryBar
from ezpz_tui.ui.widgets.ranks import RankList
from runtime.rundir import RunDir
from tests.fixtures.cli import PY, REPO, base_env, kill_leftovers, run_dirs
from tests.fixtures.flights import make_hung_run
from tests.integration.test_collectives import LATE, SKIPS, STEPS
from tests.pilots import LOCAL, text_of, until


@pytest.fixture
def launch_script(tmp_path: Path) -> Iterator:
    started: list[tuple[subprocess.Popen, Path]] = []

    def launch(script: str | Path, ranks: int) -> Path:
        outputs, marks = tmp_path / "outputs", tmp_path / "marks"
        marks.mkdir()
        path = script if isinstance(script, Path) else tmp_path / "job.py"
        if isinstance(script, str):
            path.write_text(script)
        env = {**base_env(outputs), "EZPZ_FLIGHT_INTERVAL_S": "0.5"}
        argv = [PY, "-m", "ezpz_tui", "launch", "--ppn", str(ranks), "--quiet", "--"]
        proc = subprocess.Popen(
            [*argv, PY, str(path), str(marks)],
            env=env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        started.append((proc, outputs))
        deadline = time.monotonic() + 120
        while not (run_dirs(outputs) and list(marks.iterdir())):
            assert time.monotonic() < deadline, "the ranks did not get there"
            time.sleep(0.2)
        return run_dirs(outputs)[0]

    yield launch
    for proc, outputs in started:
        proc.terminate()
        proc.wait(60)
        kill_leftovers(outputs)


def app_on(run: Path) -> EzpzApp:
    return EzpzApp(outputs=run.parent, alloc=LOCAL, checks=[Check("python", "ok", "")], attach=run)


@pytest.mark.mpi
async def test_missing_rank_is_marked_and_named(launch_script, mpiexec: str) -> None:
    """From the ranks' progress in their node's digest."""
    run = launch_script(SKIPS, 4)
    app = app_on(run)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.main.opened is not None, "the run opened", 30)
        monitor = app.main.opened.monitor
        await until(pilot, lambda: monitor.missing == {3}, "rank 3 named missing", 90)
        ranks = app.main.query_one(RankList)
        await until(pilot, lambda: ranks._missing == {3}, "the rank list's rows", 30)
        row = ranks.rows.index(3)
        assert ranks.render_row(row).plain.startswith("?    3 ")
        assert not ranks.render_row(ranks.rows.index(0)).plain.startswith("?")
        told = lambda: any(n.message.startswith("Collectives: ") for n in app._notifications)  # noqa: E731
        await until(pilot, told, "the notification", 10)  # posted just after the rows
        said = [n.message for n in app._notifications]
        assert any(
            m.startswith("Collectives: all_reduce #6 (default group, 4 floats): ranks 0-2 waiting")
            and m.endswith("rank 3 never entered it")
            for m in said
        ), said


@pytest.mark.mpi
async def test_late_rank_is_slow_and_on_the_heatmap(launch_script, mpiexec: str) -> None:
    run = launch_script(LATE, 4)
    app = app_on(run)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.main.opened is not None, "the run opened", 30)
        monitor = app.main.opened.monitor
        slow = lambda: monitor.state_of(2, time.time()) == "slow"  # noqa: E731
        await until(pilot, slow, "rank 2 slow by its arrival lag", 60)
        now = time.time()
        assert [monitor.state_of(r, now) for r in (0, 1, 3)] == ["running"] * 3
        _, values, _ = heat_values(monitor)
        lags = values["arrival_lag"]
        assert lags[2] > 0.02 and all(abs(lags[r]) < 0.02 for r in (0, 1, 3))


async def test_an_ended_run_shows_the_verdicts_its_summary_recorded(tmp_path: Path) -> None:
    """A run stopped while hung, with a straggler, whose ranks' files are gone: the summary's
    verdicts mark its missing rank, name the hang and count the straggler."""
    run = make_hung_run(tmp_path / "outputs", time.time() - 600, 30.0, 0.040)
    RunDir(run).summary_json.write_text(json.dumps({"verdicts": ended_verdicts(run)}))
    shutil.rmtree(RunDir(run).flight_dir)
    app = app_on(run)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.main.opened is not None, "the run opened", 30)
        ranks = app.main.query_one(RankList)
        await until(pilot, lambda: ranks._missing == {3}, "rank 3 marked missing", 30)
        assert ranks.render_row(ranks.rows.index(3)).plain.startswith("?    3 ")
        bar = app.main.query_one(SummaryBar)
        await until(pilot, lambda: "1 slow" in text_of(bar), "the straggler counted", 10)
        assert ranks.render_row(ranks.rows.index(2)).plain.split()[2] == "slow"
        assert "slow" not in ranks.render_row(ranks.rows.index(1)).plain.split()[:4]
        said = [n.message for n in app._notifications]
        assert (
            "Collectives: all_reduce #41 (default group, 4 floats): ranks 0-2 waiting for 30 s; "
            "rank 3 never entered it"
        ) in said, said


@pytest.mark.mpi
async def test_p_profiles_every_ranks_next_steps(launch_script, mpiexec: str) -> None:
    run = launch_script(STEPS, 2)
    app = app_on(run)
    async with app.run_test(size=(140, 40)) as pilot:
        await until(pilot, lambda: app.main.opened is not None, "the run opened", 30)
        await pilot.press("P")
        shown = lambda: isinstance(app.screen, StacksScreen) and bool(app.screen.query("#stacks"))  # noqa: E731
        await until(pilot, shown, "the profile", 120)
        lines = text_of(app.screen.query_one("#stacks", Static)).splitlines()
        for rank in (0, 1):
            line = next(x for x in lines if x.startswith(f"rank {rank}: 5 steps in "))
            assert "compute " in line and "communication " in line and "aten::mm" in line
            assert RunDir(run).profile_trace(rank).stat().st_size > 0
        assert any(x.startswith("traces: ") for x in lines)
