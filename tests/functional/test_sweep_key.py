"""W: a sweep from the TUI on real 2-rank mpiexec runs, ranked in the Compare tab at its end;
X during a sweep stops the run going on and starts no more."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input, TabbedContent

from ezpz_tui.core.comparing.sweep_record import read_sweep
from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.ui.screens.confirm import ConfirmScreen
from ezpz_tui.ui.screens.search import SearchScreen
from ezpz_tui.ui.widgets.compare import CompareView
from runtime.rundir import RunDir
from tests.functional.test_app import make_app, settle
from tests.pilots import until
from tests.procs import processes_of


def run_dirs(outputs: Path) -> list[Path]:
    """The runs in ``outputs`` (not the sweeps' records beside them)."""
    found = outputs.iterdir() if outputs.exists() else []
    return sorted(p for p in found if RunDir(p).looks_like_run())


async def sweep(pilot, text: str) -> None:  # type: ignore[no-untyped-def]
    """W, the prompt filled in from the plan, replaced by ``text``, Enter."""
    app = pilot.app
    await pilot.press("W")
    await until(pilot, lambda: isinstance(app.screen, SearchScreen), "the sweep prompt", 10)
    field = app.screen.query_one(Input)
    assert field.value == "tp=1,2 pp=1 cp=1 steps=20", "two CPU slots: TP 1 and 2"
    field.value = text
    await pilot.press("enter")


async def test_a_sweep_runs_every_layout_and_ends_ranked(tmp_path: Path, mpiexec: str) -> None:
    outputs = tmp_path / "outputs"
    app = make_app(outputs)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await sweep(pilot, "tp=1,2 steps=3")
        tabs = app.query_one(TabbedContent)
        await until(pilot, lambda: not app.main.sweeps.sweeping, "the sweep's end", 120)
        await until(pilot, lambda: tabs.active == "tab-compare", "the Compare tab", 10)
        view = app.query_one(CompareView)

        def both_ended() -> bool:  # not a read made while the last run still went on
            shown = view.comparison
            return (
                shown is not None
                and len(shown.runs) == 2
                and not any(facts.partial for facts in shown.runs)
            )

        await until(pilot, both_ended, "the comparison of both ended runs", 20)
        runs = run_dirs(outputs)
        assert [p.name[-9:] for p in runs] == ["tp1pp1cp1", "tp2pp1cp1"]
        sweep_id = read_run_toml(runs[0])["parent"]
        record = read_sweep(outputs, sweep_id)
        assert record is not None and record.runs == tuple(p.name for p in runs)
        assert [run_state(p).state for p in runs] == ["succeeded", "succeeded"]
        shown = {facts.run_id for facts in view.comparison.runs}
        assert shown == {p.name for p in runs}, "the sweep's runs, ranked"
        row = view.comparison.row("tokens_per_s")
        assert row is not None and all(v is not None and v > 0 for v in row.values)


async def test_x_stops_the_sweep_and_starts_no_more(tmp_path: Path, mpiexec: str) -> None:
    outputs = tmp_path / "outputs"
    app = make_app(outputs)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await sweep(pilot, "tp=1,2 steps=100000")
        await until(pilot, lambda: len(run_dirs(outputs)) == 1, "the first run", 30)
        [first] = run_dirs(outputs)
        await until(pilot, lambda: run_state(first).state == "running", "it to run", 30)
        await pilot.press("X")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question", 10)
        await pilot.press("y")
        await until(pilot, lambda: not app.main.sweeps.sweeping, "the sweep's end", 60)
        assert run_state(first).state == "stopped"
        assert run_dirs(outputs) == [first], "no other run started"
        assert processes_of(first) == []
