"""An attached run that has ended, left alone (issue 34: back to idle within seconds of the
rows): the app's 1-s tick and its look at the outputs every 2 s read and repaint only what
changed. Nothing is posted by the runs list while the outputs directory is as it was, no
widget is repainted and the screen is not laid out again; what shows time still moves with
the clock (a run's age in the runs list)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from textual.message import Message
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widget import Widget

from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.main.screen import RUNS_REFRESH_S
from ezpz_tui.ui.messages import BadHostsRead
from ezpz_tui.ui.widgets.logview import LogView
from ezpz_tui.ui.widgets.panels import SummaryBar
from ezpz_tui.ui.widgets.ranks import RankList
from ezpz_tui.ui.widgets.runs import RunsPanel
from ezpz_tui.ui.widgets.table import VimTable
from runtime.rundir import RunDir
from tests.fixtures.runs import make_run
from tests.pilots import FIXED, LOCAL, attached, painted, text_of, until

SIZE = (120, 40)


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def ended_run(outputs: Path, created: float) -> Path:
    run = make_run(
        outputs,
        run_id="20261122-101010-000-tp1pp1cp1",
        state="succeeded",
        exit_code=0,
        sizes={"tp": 1},
        ranks=4,
        steps=20,
        created=created,
    )
    hour_ago = os.stat(run).st_mtime - 3600
    for folder in (run, outputs):  # written an hour ago: settled
        os.utime(folder, (hour_ago, hour_ago))
    return run


def counting(widget: Widget) -> list[int]:
    """How often ``widget`` is asked to repaint, from now on."""
    calls = [0]
    real = widget.refresh

    def refresh(*args: object, **kwargs: object) -> Widget:
        calls[0] += 1
        return real(*args, **kwargs)  # type: ignore[arg-type]

    widget.refresh = refresh  # type: ignore[method-assign]
    return calls


def counting_layouts(screen: Screen[None]) -> list[int]:
    """How often ``screen`` lays out its widgets, from now on."""
    calls = [0]
    real: Callable[..., None] = screen._refresh_layout

    def layout(*args: object, **kwargs: object) -> None:
        calls[0] += 1
        real(*args, **kwargs)

    screen._refresh_layout = layout  # type: ignore[method-assign]
    return calls


async def opened(pilot: Pilot[None]) -> None:
    await attached(pilot)
    runs = pilot.app.query_one(RunsPanel)
    await until(pilot, lambda: len(runs.runs) == 1, "the runs list", 10)
    await until(pilot, lambda: pilot.app.main.doctor_checks is not None, "the doctor", 10)


async def test_an_idle_ended_run_lists_paints_and_lays_out_nothing(tmp_path: Path) -> None:
    run = ended_run(tmp_path, created=FIXED - 7200)  # its age moves by the hour
    posted: list[Message] = []
    app = EzpzApp(outputs=tmp_path, alloc=LOCAL, clock=lambda: FIXED, checks=[], attach=run)
    async with app.run_test(size=SIZE, message_hook=posted.append) as pilot:
        await opened(pilot)
        await pilot.pause(RUNS_REFRESH_S)  # what start-up asked for is in
        layouts = counting_layouts(app.main)
        bar = counting(app.query_one(SummaryBar))
        header = counting(app.query_one("#run-header"))
        posted.clear()
        await pilot.pause(2 * RUNS_REFRESH_S + 1.5)  # two looks at the outputs, five ticks
        listed = [m for m in posted if isinstance(m, RunsPanel.Listed | BadHostsRead)]
        assert listed == []
        assert (bar[0], header[0], layouts[0]) == (0, 0, 0)


async def test_a_runs_age_moves_with_the_clock_without_a_listing(tmp_path: Path) -> None:
    clock = Clock(FIXED)
    run = ended_run(tmp_path, created=FIXED - 100)
    posted: list[Message] = []
    app = EzpzApp(outputs=tmp_path, alloc=LOCAL, clock=clock, checks=[], attach=run)
    async with app.run_test(size=SIZE, message_hook=posted.append) as pilot:
        await opened(pilot)
        table = app.query_one(RunsPanel).query_one(VimTable)
        assert table.get_row_at(0)[2] == "100s"
        posted.clear()
        clock.now += 60
        await until(pilot, lambda: table.get_row_at(0)[2] == "2m", "the age in minutes", 5)
        assert not [m for m in posted if isinstance(m, RunsPanel.Listed)]


async def test_a_key_that_shows_another_ranks_log_lays_nothing_out(tmp_path: Path) -> None:
    """``j`` in the rank list repaints the list's two rows, the log and its status line: the
    screen is not laid out again (a layout of every widget took most of a key's time), though
    the two ranks' logs hold different numbers of lines (each more than the log's height)."""
    run = ended_run(tmp_path, created=FIXED - 7200)
    for rank, more in ((0, 40), (1, 90)):
        with RunDir(run).log(rank).open("a") as log:
            log.writelines(f"rank {rank} line {i}\n" for i in range(more))
    app = EzpzApp(outputs=tmp_path, alloc=LOCAL, clock=lambda: FIXED, checks=[], attach=run)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        ranks, log = app.query_one(RankList), app.query_one(LogView)
        await until(pilot, lambda: app.focused is ranks and log.rank == 0, "rank 0's log", 10)
        await pilot.pause(RUNS_REFRESH_S)
        layouts = counting_layouts(app.main)
        counts = set()
        for key, rank in (("j", 1), ("k", 0), ("j", 1)):
            await pilot.press(key)
            await until(pilot, lambda r=rank: log.rank == r, f"rank {rank}'s log", 5)
            await painted(pilot)
            assert f"rank {rank} · " in text_of(app.query_one("#log-status"))
            assert log.cursor == log.row_count - 1  # at the end of the new rank's lines
            counts.add(log.row_count)
        assert len(counts) == 2 and min(counts) > log.size.height
        assert layouts[0] == 0
