"""The launch form's minimum of staged nodes (``min`` beside ``stage``): a count or a fraction
into the plan, a bad value an error of the field, a reopened plan's value shown again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual.widgets import Input, Select

from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.launch_form import LaunchForm
from tests.pilots import FIXED, LOCAL, started, workers_done


async def test_the_minimum_of_staged_nodes_goes_into_the_plan(tmp_path: Path) -> None:
    app = EzpzApp(outputs=tmp_path / "outputs", alloc=LOCAL, clock=lambda: FIXED, checks=[])
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await workers_done(pilot)
        form = app.query_one(LaunchForm)
        await pilot.press("z", "a")  # the form has the focus: its folded fields open
        form.query_one("#stage", Select).value = "on"
        form.query_one("#stage_min_nodes", Input).value = "0.9"
        plan, problems = form.read_plan()
        assert plan is not None and not [p for p in problems if p.level == "error"]
        assert plan.stage_min_nodes == 0.9

        form.query_one("#stage_min_nodes", Input).value = "most"
        _, problems = form.read_plan()
        [error] = [p for p in problems if p.level == "error"]
        assert error.field == "stage_min_nodes"
        assert error.message.startswith("The minimum of staged nodes must be a whole number")

        assert form.alloc is not None
        form.set_plan(form.alloc, replace(plan, stage_min_nodes=1.0))
        assert form.query_one("#stage_min_nodes", Input).value == "1"
