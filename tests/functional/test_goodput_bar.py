"""The summary bar's ``goodput N%``: the productive share of the opened run's wall time
(``ezpz_tui/core/watching/goodput.py``), for an ended run as soon as it opens, and for a live
one read again as it goes, until the figure its end leaves."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

from ezpz_tui.core.launching.processes import supervised_here
from ezpz_tui.core.watching.goodput import percent, run_ledger
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.panels import SummaryBar
from runtime.rundir import State, read_state, write_state
from tests.fixtures.ledger_runs import T, resumed_pair, steps_from, write_run
from tests.pilots import LOCAL, started, text_of, until

SIZE = (120, 40)


async def test_an_opened_run_shows_its_goodput(tmp_path: Path) -> None:
    """The retry of a failed run: 4 s of its 13 were productive (4 of restart, 3 redone)."""
    _, child = resumed_pair(tmp_path / "outputs")
    app = EzpzApp(outputs=child.parent, alloc=LOCAL, clock=lambda: T + 40, checks=[], attach=child)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        bar = app.query_one(SummaryBar)
        await until(pilot, lambda: "goodput" in text_of(bar), "the goodput", 10)
        assert "  goodput 31%" in text_of(bar), text_of(bar)


async def test_a_live_run_s_goodput_follows_it_to_its_end(tmp_path: Path) -> None:
    """Made 30 s ago, ten steps of 1 s to 11 s ago, still running: its step under way counts,
    so most of its time is productive; once it has ended, succeeded, its last 11 s are after
    its last step and the bar says the figure its end leaves."""
    now = time.time()
    run = write_run(
        tmp_path / "outputs",
        "run-live",
        created=now - 30,
        start=now - 29,
        end=now,
        steps=steps_from(0, 9, now - 20),
    )
    live = replace(supervised_here(read_state(run)), state=State.RUNNING, end=None)
    write_state(run, live)
    app = EzpzApp(outputs=run.parent, alloc=LOCAL, clock=time.time, checks=[], attach=run)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        bar = app.query_one(SummaryBar)
        await until(pilot, lambda: "goodput" in text_of(bar), "the goodput", 10)
        shown = int(text_of(bar).split("goodput ")[1].split("%")[0])
        assert shown >= 65, text_of(bar)  # 21 of 30 s at least, and growing
        write_state(run, replace(live, state=State.SUCCEEDED, end=time.time()))
        final = f"goodput {percent(run_ledger(run).goodput)}"
        assert final != f"goodput {shown}%"
        # The end is read within a second or two, the goodput within 5 s of the last read.
        await until(pilot, lambda: final in text_of(bar), "the goodput at its end", 20)


async def test_compare_has_a_goodput_row(tmp_path: Path) -> None:
    """The retry beside its failed parent (compared unasked): 4 of its 13 s against 8 of
    17, the parent's marked best."""
    from ezpz_tui.ui.widgets.compare import CompareView
    from tests.functional.test_compare_tab import table_rows

    _, child = resumed_pair(tmp_path / "outputs")
    app = EzpzApp(outputs=child.parent, alloc=LOCAL, clock=lambda: T + 40, checks=[], attach=child)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        view = app.query_one(CompareView)
        await until(pilot, lambda: view.comparison is not None, "read in the background", 20)
        await pilot.press("J", "t", "t")  # Run -> Metrics -> Compare
        rows = table_rows(view)
        assert sorted(rows["goodput"]) == ["30.8%", "47.1%*"], rows
