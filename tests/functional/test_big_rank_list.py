"""A rank list of 16,384 ranks (issue 14): rows recomputed off the UI thread after a batch,
at once after a key."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult

from ezpz_tui.core.watching.monitor import RunMonitor
from ezpz_tui.ui.widgets.ranks import ASYNC_ROWS, RankList
from tests.pilots import until

RANKS = 16384
PER_HOST = 12


class OneList(App[None]):
    def compose(self) -> ComposeResult:
        yield RankList(clock=lambda: 0.0)


async def test_a_batch_regroups_16384_rows_in_a_thread_and_a_key_at_once(tmp_path: Path) -> None:
    assert RANKS >= ASYNC_ROWS
    app = OneList()
    async with app.run_test(size=(100, 30)) as pilot:
        ranks = app.query_one(RankList)
        monitor = RunMonitor(tmp_path)
        monitor.expect_ranks(RANKS)
        ranks.set_monitor(monitor)
        assert ranks.row_count == RANKS and ranks.rows[:2] == (0, 1)
        for rank, info in monitor.ranks.items():  # the status files said where each runs
            info.host = f"x{rank // PER_HOST:04d}"
        ranks.update_rows(wait=False)
        assert ranks.rows[:2] == (0, 1), "not on the UI thread: the old rows until it is done"
        hosts = -(-RANKS // PER_HOST)
        await until(pilot, lambda: ranks.row_count == RANKS + hosts, "rows grouped by host", 20)
        assert ranks.rows[:3] == ("x0000", 0, 1)
        ranks.focus()
        await pilot.press("C")  # fold every host: a key's rows are there when it returns
        assert ranks.row_count == hosts and ranks.rows[:2] == ("x0000", "x0001")
