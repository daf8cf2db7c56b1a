"""A relaunch with TP changed continues the run it replaces from its newest checkpoint.

Real runs of the demo on two gloo ranks through the real Session and mpiexec; only keys drive
the app. The parent saves a checkpoint every 5 steps; ``e``, ``+`` (TP 1 -> 2) and ``R`` ask
the question, which says where the new run starts and switches with ``f``; the child's ranks
load the parent's newest complete checkpoint (a save cut short by the stop is skipped), its
metrics start at that step, and the Metrics tab draws the two as one curve with the join marked.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from textual.widgets import Input, Static, TabbedContent

from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.ui.screens.confirm import RelaunchScreen
from ezpz_tui.ui.widgets.metrics import MetricsView
from ezpz_tui.ui.widgets.panels import SummaryBar
from runtime.checkpoint_dirs import newest
from tests.functional.test_app import SIZE, make_app, run_dirs, settle, type_into
from tests.pilots import text_of, until
from tests.procs import processes_of

RESUMES = re.compile(r"The new run resumes at step (\d+) from (\S+) \(or a newer one")


def first_step(run: Path) -> int | None:
    path = run / "metrics" / "rank-00000.jsonl"
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
            start = text_of(app.screen.query_one("#resume"))
            found = RESUMES.match(start)
            assert found is not None, start
            shown = int(found.group(1))
            assert found.group(2) == str(parent / "checkpoints" / f"step-{shown}")
            assert "f: switch" in text_of(app.screen.query_one("#answers"))
            await pilot.press("f")
            assert text_of(app.screen.query_one("#resume")) == "The new run starts fresh (step 0)."
            await pilot.press("f")
            assert text_of(app.screen.query_one("#resume")) == start
            await pilot.press("y")
            await settle(pilot)

            assert run_state(parent).state == "stopped"
            [child] = [d for d in run_dirs(outputs) if d != parent]
            record = read_run_toml(child)
            assert record["parent"] == parent.name and record["plan"]["tp"] == 2
            assert record["plan"]["env"]["EZPZ_RESUME_FROM"] == str(parent)
            await until(pilot, lambda: first_step(child) is not None, "the child's first step", 120)
            resumed = first_step(child)
            assert resumed is not None and resumed >= shown and resumed % 5 == 0
            # The header says when the child will finish: --steps 100000, no walltime here.
            summary = app.query_one(SummaryBar)
            await until(pilot, lambda: "finish in " in text_of(summary), "the finish", 30)
            log = (child / "logs" / "rank-00000.log").read_text()
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
