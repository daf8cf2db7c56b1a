"""W with ``tune``: a race from the TUI on real 2-rank mpiexec runs, its leaderboard live in the
Compare tab, and at its end the best layout on the launch form, one key from launching."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input, Static

from ezpz_tui.core.comparing.sweep_record import latest_sweep
from tests.functional.test_app import make_app, settle
from tests.functional.test_sweep_key import run_dirs, sweep
from tests.pilots import until


def race_text(app) -> str:  # type: ignore[no-untyped-def]
    return str(app.query_one("#compare-race", Static).content)


async def test_tune_races_and_leaves_the_best_on_the_form(tmp_path: Path, mpiexec: str) -> None:
    outputs = tmp_path / "outputs"
    app = make_app(outputs)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await sweep(pilot, "tune tp=1,2 steps=4")
        seen: list[str] = []

        def racing() -> bool:
            seen.append(race_text(app))
            return "racing" in seen[-1] and "tp2 pp1 cp1" in seen[-1]

        await until(pilot, racing, "the leaderboard while the race goes on", 60)
        await until(pilot, lambda: not app.main.sweeps.sweeping, "the tune's end", 240)
        final = race_text(app).splitlines()
        assert final[0].split()[:3] == ["#", "LAYOUT", "STATE"]
        best = next(line for line in final if " best " in line)
        dropped = next(line for line in final if " dropped " in line)
        assert "in the slower half after 4 steps" in dropped
        assert best.split()[-1] == "last" and "%" in best  # the race's last, with its MFU
        tp = best.split()[1].removeprefix("tp")
        assert app.query_one("#tp", Input).value == tp  # on the form: the launch key starts it
        record = latest_sweep(outputs)
        assert record is not None and record.state == "finished"
        assert sorted(record.runs) == [p.name for p in run_dirs(outputs)] and len(record.runs) == 2


async def test_a_tune_that_nothing_fits_says_so_and_starts_nothing(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    app = make_app(outputs)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await sweep(pilot, "tune tp=1,2 mem=0.0001")
        await pilot.pause()
        assert not app.main.sweeps.sweeping
        assert run_dirs(outputs) == []
        said = [n.message for n in app._notifications]
        assert any(m.startswith("No layout fits: tp1 pp1 cp1: estimate ") for m in said), said
