"""The launch form's trackers field: it sets the ranks' EZPZ_TRACKERS, rejects an unknown name,
and shows a reopened plan's trackers in their own field, not in env."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual.widgets import Input

from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.launch_form import LaunchForm
from tests.pilots import FIXED, LOCAL, started, workers_done


async def test_trackers_field_becomes_the_ranks_environment(tmp_path: Path) -> None:
    app = EzpzApp(outputs=tmp_path / "outputs", alloc=LOCAL, clock=lambda: FIXED, checks=[])
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await workers_done(pilot)
        form = app.query_one(LaunchForm)
        form.query_one("#trackers", Input).value = "TensorBoard, csv"
        form.query_one("#env", Input).value = "A=1 EZPZ_TRACKERS=wandb"  # the field wins
        plan, problems = form.read_plan()
        assert plan is not None and not [p for p in problems if p.level == "error"]
        assert dict(plan.env) == {"A": "1", "EZPZ_TRACKERS": "tensorboard,csv"}

        form.query_one("#trackers", Input).value = "csv,neptune"
        _, problems = form.read_plan()
        errors = [(p.field, p.message) for p in problems if p.level == "error"]
        assert errors == [
            ("trackers", "Unknown tracker 'neptune' (known: wandb, tensorboard, mlflow, csv).")
        ]

        assert form.alloc is not None
        form.set_plan(form.alloc, replace(plan, env=(("A", "1"), ("EZPZ_TRACKERS", "mlflow"))))
        assert form.query_one("#trackers", Input).value == "mlflow"
        assert form.query_one("#env", Input).value == "A=1"
