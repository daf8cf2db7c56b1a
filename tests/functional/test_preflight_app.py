"""``R`` preflights the new layout before the healthy run is touched, in the TUI.

A real demo run on two gloo ranks (the real Session and mpiexec), driven by keys only. With
``--heads 3`` TP 1 runs; ``e + R`` asks about TP 2, whose preflight (rank 0 of the new layout
alone on a fake process group) fails in the demo's own check: the question names the cause,
``y`` does nothing, the run goes on, and ``o`` relaunches all the same.
"""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input

from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.ui.screens.confirm import ConfirmScreen
from tests.functional.test_app import SIZE, make_app, run_dirs, settle, type_into
from tests.pilots import text_of, until


async def test_a_failed_preflight_refuses_yes_and_one_key_overrides(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        try:
            await settle(pilot)
            await type_into(pilot, "command", " --heads 3 --sleep 0.05 --steps 100000", True)
            await pilot.press("r")
            await settle(pilot)
            [parent] = run_dirs(outputs)
            await until(pilot, lambda: run_state(parent).state == "running", "the run", 90)

            await pilot.press("e", "+")
            await settle(pilot)
            assert app.query_one("#tp", Input).value == "2"
            await pilot.press("R")
            asked = lambda: isinstance(app.screen, ConfirmScreen)  # noqa: E731
            await until(pilot, asked, "the question, after the preflight", 120)
            await settle(pilot)
            refused = text_of(app.screen.query_one("#refused"))
            cause = "--heads 3 must be divisible by tp=2"
            assert refused == f"y is refused: the preflight failed: {cause}. o: relaunch anyway."
            details = text_of(app.screen.query_one("#details")).splitlines()
            assert "TP 1 → 2" in details
            assert details[-1].startswith("Preflight failed on rank 0 of 2 (")
            assert details[-1].endswith(f"): {cause}")

            await pilot.press("y")
            await settle(pilot)
            assert isinstance(app.screen, ConfirmScreen), "y does not answer a refused question"
            assert run_state(parent).live and run_dirs(outputs) == [parent]

            await pilot.press("o")
            await settle(pilot)
            assert not isinstance(app.screen, ConfirmScreen)
            assert run_state(parent).state == "stopped"
            [child] = [d for d in run_dirs(outputs) if d != parent]
            record = read_run_toml(child)
            assert record["parent"] == parent.name and record["plan"]["tp"] == 2
        finally:
            if app.main.session is not None:
                app.main.session.supervisor.stop_all(grace_s=(1.0, 1.0))
