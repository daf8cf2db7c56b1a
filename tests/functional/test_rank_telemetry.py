"""The rank list's telemetry columns, its sort key, host groups and the Heatmap tab, through
Pilot on a run directory written as a live 8-rank, 2-host job's wrappers would write it."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot

from ezpz_tui import config
from ezpz_tui.core.watching.followers import LAUNCHER
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.heatmap import Heatmap
from ezpz_tui.ui.widgets.logview import LogView
from ezpz_tui.ui.widgets.ranks import RankList
from runtime.rundir import RunDir, RunState, State, write_state
from runtime.telemetry.record import Sample
from tests.fixtures.telemetry import write_running, write_samples, write_steps
from tests.pilots import LOCAL, started, text_of, until

NOW = 1_800_000_000.0
GIB = 1 << 30


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config"
    path.mkdir()
    monkeypatch.setenv(config.ENV_CONFIG_DIR, str(path))


def live_run(outputs: Path) -> Path:
    """Ranks 0-3 on nodeA, 4-7 on nodeB; rank 6 steps at 3x the others' time and its GPU is
    idle; rank 2 holds the most memory."""
    run = outputs / "20261126-120000-000-tp1pp1cp1"
    run.mkdir(parents=True)
    write_state(run, RunState(state=State.RUNNING, updated=NOW))
    RunDir(run).launcher_log.write_text("Launching 8 ranks on nodeA,nodeB\n")
    for rank in range(8):
        write_running(run, rank, "nodeA" if rank < 4 else "nodeB", rank % 4)
        slow = rank == 6
        write_steps(run, rank, [0.6 if slow else 0.2] * 4, NOW - 5)
        samples = [
            Sample(
                time=NOW - 2 * (9 - i),
                cpu_pct=100.0 + rank + i,
                rss_bytes=(2 + rank) * GIB,
                device=f"nvml:{rank % 4}",
                util_pct=5.0 if slow else 90.0 + i / 10,
                mem_used_bytes=(40 if rank == 2 else 20) * GIB,
                mem_total_bytes=80 * GIB,
            )
            for i in range(10)
        ]
        write_samples(run, rank, samples)
    return run


def attach(run: Path) -> EzpzApp:
    return EzpzApp(outputs=run.parent, alloc=LOCAL, clock=lambda: NOW, checks=[], attach=run)


def legend(heatmap: Heatmap) -> str:
    return "".join(segment.text for segment in heatmap.render_line(0))


async def opened(pilot: Pilot[None]) -> RankList:
    await started(pilot)
    ranks = pilot.app.query_one(RankList)
    await until(
        pilot,
        lambda: ranks.rows.count(6) == 1 and ranks.state(ranks.row_of(6)) == "slow",
        "rank 6 slow",
        10,
    )
    return ranks


async def test_columns_groups_sort_and_slow(tmp_path: Path) -> None:
    app = attach(live_run(tmp_path))
    async with app.run_test(size=(160, 40)) as pilot:
        ranks = await opened(pilot)
        await until(pilot, lambda: ranks.rows[0] == LAUNCHER, "the launcher's row", 10)
        assert ranks.rows[:3] == (LAUNCHER, "nodeA", 0), "each host heads its ranks"
        row = ranks.render_row(ranks.row_of(6)).plain
        assert "slow" in row and "5%" in row and "20G" in row and "8.0G" in row, row
        assert ranks.state(ranks.row_of(5)) == "running"
        head = text_of(app.query_one("#ranks-head"))
        assert all(title in head for title in ("cpu", "rss", "util", "mem")), head
        assert "nodeB" in ranks.render_row(ranks.row_of("nodeB")).plain
        assert "1 slow" in ranks.render_row(ranks.row_of("nodeB")).plain
        # The summary names the run's state once the runs listing (its own worker) read it.
        summary = app.query_one("#summary")
        await until(pilot, lambda: "1 slow" in text_of(summary), "1 slow in the summary", 10)
        # s: step time first (the straggler heads its host), then CPU, RSS, util, mem.
        ranks.focus()
        await pilot.press("s")
        assert ranks.sort == "step time" and ranks.rows[1:3] == ("nodeB", 6)
        assert "sorted by step time" in text_of(app.query_one("#ranks-head"))
        await pilot.press("s", "s", "s", "s")
        assert ranks.sort == "mem" and ranks.rows[1:3] == ("nodeA", 2)
        # C folds every host (the cursor on its host, or on the launcher's row), E unfolds
        # them, Enter folds one.
        ranks.move_to(0)
        await pilot.press("C")
        assert ranks.rows == (LAUNCHER, "nodeA", "nodeB")
        await pilot.press("E")
        ranks.move_to(ranks.row_of(5))
        await pilot.press("C")
        assert ranks.selected_row == "nodeB"
        await pilot.press("E")
        assert len(ranks.rows) == 11
        ranks.move_to(ranks.row_of("nodeB"))
        await pilot.press("enter")
        assert "nodeB" in ranks.collapsed and ranks.row_of(6) is None
        assert ranks.select_rank(6) and ranks.selected == 6, "picking a folded rank unfolds it"


async def test_heatmap_tab_shows_the_straggler_and_enter_reads_its_log(tmp_path: Path) -> None:
    app = attach(live_run(tmp_path))
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(pilot)
        await pilot.press("T", "T")  # Run, Launch, Heatmap
        heatmap = app.query_one(Heatmap)
        await until(
            pilot,
            lambda: heatmap.figure == "step_time" and "0.6 s" in legend(heatmap),
            "cells",
            10,
        )
        assert heatmap.move_to_rank(6)
        await pilot.pause()
        info = "".join(s.text for s in heatmap.render_line(heatmap.size.height - 1))
        assert "rank 6" in info and "nodeB" in info and "0.6 s" in info, info
        heatmap.focus()
        await pilot.press("enter")
        log = app.query_one(LogView)
        await until(pilot, lambda: log.rank == 6 and app.focused is log, "rank 6's log", 10)
