"""The launch form's trackers field: it sets the ranks' EZPZ_TRACKERS, rejects an unknown name,
and shows a reopened plan's trackers in their own field, not in env."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual.widgets import Input

from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.launch_form import LaunchForm
from runtime.rundir import RunDir
from tests.pilots import FIXED, LOCAL, started, workers_done


async def test_trackers_field_becomes_the_ranks_environment(tmp_path: Path) -> None:
    app = EzpzApp(outputs=tmp_path / "outputs", alloc=LOCAL, clock=lambda: FIXED, checks=[])
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await workers_done(pilot)
        form = app.query_one(LaunchForm)
        await pilot.press("z", "a")  # the form has the focus: its folded fields open
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


async def test_capital_y_copies_the_commands_that_open_the_runs_trackers(tmp_path: Path) -> None:
    """The run header names the trackers; Y puts their commands, with absolute paths, on the
    clipboard (one per line), and says when a run feeds none."""
    from tests.fixtures.runs import make_run
    from tests.functional.test_app import make_app, settle

    outputs = tmp_path / "outputs"
    common = dict(state="succeeded", exit_code=0, sizes={"tp": 1, "pp": 1, "cp": 1}, ranks=2)
    plain = make_run(outputs, run_id="plain", steps=5, created=FIXED - 60, **common)
    tracked = make_run(outputs, run_id="tracked", steps=5, created=FIXED - 30, **common)
    run = RunDir(tracked)
    run.tensorboard_dir.mkdir()
    offline = run.wandb_dir / "offline-run-20261126_120000-tracked"
    offline.mkdir(parents=True)
    app = make_app(outputs)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await app.main.open_run(plain)
        await settle(pilot)
        await pilot.press("Y")
        await workers_done(pilot)
        await pilot.pause()
        assert app.clipboard == ""
        assert any("feeds no tracker" in str(n.message) for n in app._notifications)

        await app.main.open_run(tracked)
        await settle(pilot)
        await pilot.press("Y")
        await workers_done(pilot)
        await pilot.pause()
        assert app.clipboard.splitlines() == [
            f"wandb sync {offline}",
            f"tensorboard --logdir {run.tensorboard_dir}",
        ]
