"""A relaunch with TP changed continues the run it replaces at the step it saves now.

Real runs of the demo on two gloo ranks through the real Session and mpiexec; only keys drive
the app. The parent also saves a checkpoint every 5 steps; ``e``, ``+`` (TP 1 -> 2) and ``R``
ask the question, which says the new run continues at the step the parent is at, saved now,
and switches to a fresh start with ``f``; ``y`` asks the parent to save at its step and stop,
the child's ranks load that checkpoint (not the newest periodic one), its metrics start at
that step, no step of the parent's is run twice, and the Metrics tab draws the two as one curve
with the join marked. A script without a Checkpointer is said to start at step 0.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from textual.widgets import Input, Static, TabbedContent

from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.ui.screens.confirm import ConfirmScreen, RelaunchScreen
from ezpz_tui.ui.widgets.metrics import MetricsView
from ezpz_tui.ui.widgets.panels import SummaryBar
from runtime.checkpoint_dirs import newest
from tests.functional.test_app import SIZE, make_app, run_dirs, settle, type_into
from tests.pilots import text_of, until
from tests.procs import processes_of

SAVED_NOW = re.compile(r"The new run continues at step (\d+) \(saved now\)\.")


def last_step(run: Path) -> int | None:
    path = run / "metrics" / "b0000" / "rank-00000.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return json.loads(lines[-1])["step"] if lines else None


def first_step(run: Path) -> int | None:
    path = run / "metrics" / "b0000" / "rank-00000.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return json.loads(lines[0])["step"] if lines else None


async def test_relaunch_with_tp_changed_resumes_and_joins_the_curves(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        try:
            await settle(pilot)
            extra = " --sleep 0.05 --steps 100000 --checkpoint-every 5"
            await type_into(pilot, "command", extra, append=True)
            await pilot.press("r")
            await settle(pilot)
            [parent] = run_dirs(outputs)
            await until(pilot, lambda: newest(parent) is not None, "a checkpoint", 120)

            await pilot.press("e", "+")
            await settle(pilot)
            assert app.query_one("#tp", Input).value == "2"
            await pilot.press("R")
            asked = lambda: isinstance(app.screen, RelaunchScreen)  # noqa: E731
            await until(pilot, asked, "the question, after the preflight", 120)
            await settle(pilot)  # the question composed
            question = text_of(app.screen.query_one("#question"))
            assert "it saves at the step it is at and stops first" in question
            start = text_of(app.screen.query_one("#resume"))
            found = SAVED_NOW.fullmatch(start)
            assert found is not None, start
            shown = int(found.group(1))
            assert shown > 0
            assert "f: switch" in text_of(app.screen.query_one("#answers"))
            await pilot.press("f")
            assert text_of(app.screen.query_one("#resume")) == "The new run starts fresh (step 0)."
            await pilot.press("f")
            assert text_of(app.screen.query_one("#resume")) == start
            await pilot.press("y")
            await until(pilot, lambda: len(run_dirs(outputs)) == 2, "the child", 150)
            await settle(pilot)

            assert run_state(parent).state == "stopped"
            [child] = [d for d in run_dirs(outputs) if d != parent]
            record = read_run_toml(child)
            assert record["parent"] == parent.name and record["plan"]["tp"] == 2
            assert record["plan"]["env"]["EZPZ_RESUME_FROM"] == str(parent)
            saved = newest(parent)
            assert saved is not None and saved.step >= shown
            assert record["handover"]["step"] == saved.step
            assert last_step(parent) == saved.step - 1  # no step after the saved one
            await until(pilot, lambda: first_step(child) is not None, "the child's first step", 120)
            resumed = first_step(child)
            assert resumed == saved.step
            # The header says when the child will finish: --steps 100000, no walltime here.
            summary = app.query_one(SummaryBar)
            await until(pilot, lambda: "finish in " in text_of(summary), "the finish", 30)
            log = (child / "logs" / "b0000" / "rank-00000.log").read_text()
            assert f"resumed at step {resumed} from {parent}/checkpoints/step-{resumed}" in log

            tabs = app.query_one(TabbedContent)
            assert tabs.active == "tab-run"
            await pilot.press("t")  # the next tab: Metrics
            await until(pilot, lambda: tabs.active == "tab-metrics", "the Metrics tab", 5)
            view = app.query_one(MetricsView)

            def joined() -> bool:
                return f"resumed at step {resumed} from {parent.name}" in text_of(
                    view.query_one("#metrics-status", Static)
                )

            await until(pilot, joined, "the join in the status line", 30)
            drawing = view.drawing(80)
            assert drawing is not None and drawing.join == resumed
            parts = [t for t in drawing.traces if t.label == parent.name]
            assert len(parts) == 1 and parts[0].colour == 0  # the run's colour: one curve
            assert max(parts[0].x) < resumed
        finally:
            if app.main.session is not None:
                app.main.session.supervisor.stop_all(grace_s=(1.0, 1.0))
    assert processes_of(*run_dirs(outputs)) == []


async def test_a_script_without_a_checkpointer_is_said_to_start_at_step_0(tmp_path: Path) -> None:
    """Its ranks never said they answer a request (no runtime.checkpoint.Checkpointer): the
    question says so at once, without asking the run anything; ``n`` leaves it running."""
    outputs = tmp_path / "outputs"
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        try:
            await settle(pilot)
            command = f"{sys.executable} -c 'import time; time.sleep(300)'"
            await type_into(pilot, "command", command)
            await pilot.press("r")
            await settle(pilot)
            [run] = run_dirs(outputs)
            await until(pilot, lambda: run_state(run).state == "running", "the run", 60)
            await pilot.press("R")
            # the preflight of a script that never calls runtime.setup() waits out its timeout
            question = lambda: isinstance(app.screen, ConfirmScreen)  # noqa: E731
            await until(pilot, question, "the question, after the preflight", 180)
            await settle(pilot)  # the question composed
            assert not isinstance(app.screen, RelaunchScreen)  # nothing to switch between
            assert text_of(app.screen.query_one("#question")).startswith(
                f"Relaunch? {run.name} is running: it is stopped first"
            )
            details = text_of(app.screen.query_one("#details")).splitlines()
            said = (
                f"The new run starts at step 0: {run.name} saves no checkpoints "
                "(see runtime.checkpoint)."
            )
            assert said in details
            await pilot.press("n")
            await settle(pilot)
            assert run_state(run).state == "running" and not (run / "checkpoint.request").exists()
        finally:
            if app.main.session is not None:
                app.main.session.supervisor.stop_all(grace_s=(1.0, 1.0))
    assert processes_of(*run_dirs(outputs)) == []
