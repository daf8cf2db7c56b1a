"""``S`` on a hung run: every rank's Python stacks, grouped, in a dialog; the run goes on.

The run is real: two ranks under the real mpiexec and capture wrapper, both sleeping in the
same function (a job stuck in a collective looks the same to faulthandler). The app attaches
to it read-only, as a user who comes back to a job does.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Static

from ezpz_tui.core.checking.check import Check
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.screens.stacks import StacksScreen
from tests.fixtures.cli import PY, REPO, base_env, kill_leftovers, run_dirs
from tests.pilots import LOCAL, text_of, until

STUCK = """
import os, time
def wait_for_peers():
    time.sleep(300)
print(f"rank {os.environ['RANK']} up", flush=True)
wait_for_peers()
"""


@pytest.fixture
def hung_run(tmp_path: Path) -> Iterator[Path]:
    outputs = tmp_path / "outputs"
    script = tmp_path / "stuck.py"
    script.write_text(STUCK)
    launch = subprocess.Popen(
        [PY, "-m", "ezpz_tui", "launch", "--ppn", "2", "--quiet", "--", PY, str(script)],
        env=base_env(outputs),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            dirs = run_dirs(outputs)
            logs = sorted((dirs[0] / "logs").glob("b0000/rank-*.log")) if dirs else []
            if len(logs) == 2 and all("up" in p.read_text() for p in logs):
                break
            assert time.monotonic() < deadline, "the ranks did not start"
            time.sleep(0.2)
        yield dirs[0]
    finally:
        launch.terminate()
        launch.wait(60)
        kill_leftovers(outputs)


async def test_s_shows_where_every_rank_waits(hung_run: Path) -> None:
    app = EzpzApp(
        outputs=hung_run.parent, alloc=LOCAL, checks=[Check("python", "ok", "")], attach=hung_run
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: app.main.opened is not None, "the run opened", 30)
        await pilot.press("S")
        # Composed, not only pushed: the report is read from the dialog next.
        shown = lambda: isinstance(app.screen, StacksScreen) and bool(app.screen.query("#stacks"))  # noqa: E731
        await until(pilot, shown, "the stacks", 30)
        shown = text_of(app.screen.query_one("#stacks", Static))
        assert "ranks 0-1: wait_for_peers at stuck.py:4" in shown, shown
        await pilot.press("escape")
        assert not isinstance(app.screen, StacksScreen)
