"""The Run tab through Pilot: rank list, a rank's log (follow, read back, search, errors, whole
lines), the all-ranks view with its filter, stalls, and attach being read-only.

Runs are fixture run directories (tests/fixtures/runs.py) or directories this test writes to
while the app follows them, with real files and the real follower thread.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot

from ezpz_tui import config
from ezpz_tui.core.monitor import KEEP_PER_RANK
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.screens.line import LineScreen
from ezpz_tui.ui.screens.search import SearchScreen
from ezpz_tui.ui.widgets.logview import LogView
from ezpz_tui.ui.widgets.ranks import RankList
from tests.fixtures.runs import make_run
from tests.pilots import until
from tests.test_app import LOCAL, text_of

SIZE = (120, 40)
START = 1_795_352_400.0


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "config"
    path.mkdir()
    (path / "config.toml").write_text("[monitor]\nstall_after = 30\n")
    monkeypatch.setenv(config.ENV_CONFIG_DIR, str(path))
    return path


class Clock:
    """A wall clock the test moves: stalls are judged against it."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def attach(run: Path, clock: Clock | None = None) -> EzpzApp:
    return EzpzApp(
        outputs=run.parent, alloc=LOCAL, clock=clock or Clock(START), checks=[], attach=run
    )


def crashed_run(outputs: Path, ranks: int = 4, failing: int = 2) -> Path:
    return make_run(
        outputs,
        run_id="20261122-101010-000-tp1pp1cp1",
        state="failed",
        exit_code=1,
        sizes={"tp": 1},
        ranks=ranks,
        steps=40,
        created=START - 100,
        failing_rank=failing,
        crash_signal=11,
    )


def row(ranks: RankList, rank: int) -> str:
    return ranks.render_row(ranks._order.index(rank)).plain


def log_texts(log: LogView) -> list[str]:
    return [line.text for line in log.lines]


async def opened(pilot: Pilot[None], ranks: int) -> tuple[RankList, LogView]:
    app = pilot.app
    rank_list, log = app.query_one(RankList), app.query_one(LogView)
    await until(pilot, lambda: rank_list.row_count == ranks and log.lines, "the run", 10)
    return rank_list, log


async def test_a_segfaulted_rank_is_shown_failed_with_its_signal_and_last_lines(
    tmp_path: Path,
) -> None:
    run = crashed_run(tmp_path)
    app = attach(run)
    async with app.run_test(size=SIZE) as pilot:
        ranks, log = await opened(pilot, 4)
        await until(pilot, lambda: log.rank == 2, "the first failing rank's log", 5)
        assert row(ranks, 2).startswith("✗    2 SIGSEGV")
        assert "SIGTERM" in row(ranks, 0) and not row(ranks, 0).startswith("✗")
        assert "Segmentation fault" in "\n".join(log_texts(log))
        assert app.focused is ranks
        # ] / [ in the rank list stop at failed ranks; typing a number picks a rank.
        await pilot.press("3")
        assert ranks.selected == 3 and log.rank == 3
        await pilot.press("1")
        assert ranks.selected == 1, "no rank 31: the digit starts a new number"
        # a: every rank interleaved, with the place where rank 2 died marked.
        await pilot.press("a")
        assert log.rank is None
        texts = log_texts(log)
        assert "✗ rank 2 SIGSEGV" in texts
        assert {line.rank for line in log.lines} == {0, 1, 2, 3}
        rendered = log.render_row(0).plain
        assert rendered.startswith("0 │ ") and "\x1b" not in rendered
        # Enter in the rank list moves to the log; ] / [ jump between error lines.
        await pilot.press("enter")
        assert app.focused is log
        await pilot.press("g", "]")
        assert "Traceback" in log.lines[log.cursor].text
        await pilot.press("]")
        first = log.cursor
        await pilot.press("[")
        assert log.cursor < first
        # & filters by rank and text; an empty filter shows everything again.
        await pilot.press("ampersand")
        assert isinstance(app.screen, SearchScreen)
        await pilot.press(*"@1,3 error", "enter")
        assert {line.rank for line in log.lines} == {1, 3}
        assert all("error" in line.text.lower() for line in log.lines)
        assert "filter ranks 1,3 'error'" in log.status_text().plain
        await pilot.press("ampersand", "ctrl+u", "enter")
        assert {line.rank for line in log.lines} == {0, 1, 2, 3}
        # X on a run this process did not start: refused, nothing is touched.
        await pilot.press("X")
        await pilot.pause()
        assert type(app.screen).__name__ == "Screen"
        assert any("read-only" in n.message for n in app._notifications)


def _append(path: Path, lines: list[str]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))


def live_run(outputs: Path, ranks: int, lines: int) -> Path:
    run = outputs / "20261122-111111-000-tp1pp1cp1"
    for sub in ("logs", "status", "metrics"):
        (run / sub).mkdir(parents=True)
    (run / "state.json").write_text(json.dumps({"state": "running", "created": START}))
    for rank in range(ranks):
        status = {"rank": rank, "host": "nid0001", "pid": 100 + rank, "state": "running"}
        (run / "status" / f"rank-{rank:05d}.json").write_text(json.dumps(status))
        text = [f"rank {rank} line {i} \x1b[32mok\x1b[0m" for i in range(lines)]
        _append(run / "logs" / f"rank-{rank:05d}.log", text)
    return run


async def test_follow_pause_unseen_lines_read_back_and_search(tmp_path: Path) -> None:
    total = KEEP_PER_RANK + 1500
    run = live_run(tmp_path, 2, total)
    log0 = run / "logs" / "rank-00000.log"
    app = attach(run)
    async with app.run_test(size=SIZE) as pilot:
        _, log = await opened(pilot, 2)
        await pilot.press("enter")
        assert app.focused is log and log.rank == 0
        assert len(log.lines) == KEEP_PER_RANK and log.follow
        assert log.cursor == len(log.lines) - 1
        _append(log0, ["fresh 1", "fresh 2"])
        await until(pilot, lambda: log.lines[-1].text == "fresh 2", "new lines followed", 5)
        assert log.cursor == len(log.lines) - 1, "following keeps the cursor on the end"
        # k pauses following; new lines are counted, not scrolled to.
        await pilot.press("k")
        assert not log.follow
        where = log.cursor
        _append(log0, [f"more {i}" for i in range(7)])
        await until(pilot, lambda: log.unseen == 7, "unseen lines counted", 5)
        assert log.cursor == where
        assert "paused +7 (G)" in text_of(app.query_one("#log-status"))
        await pilot.press("G")
        assert log.follow and log.unseen == 0 and log.cursor == len(log.lines) - 1
        # g reaches the first line held: the lines before it are read back from disk.
        held = len(log.lines)
        await pilot.press("g")
        await until(pilot, lambda: len(log.lines) > held, "older lines read back", 5)
        await pilot.press("g")
        await until(pilot, lambda: log.lines[0].offset == 0, "the file's first line", 5)
        assert log_texts(log)[: total + 2] == [
            f"rank 0 line {i} \x1b[32mok\x1b[0m" for i in range(total)
        ] + ["fresh 1", "fresh 2"]
        # / searches (ANSI codes do not count), n / N move between matches.
        await pilot.press("slash", *"line 123 ok", "enter")
        assert log.lines[log.cursor].text.startswith("rank 0 line 123 ")
        await pilot.press("n")
        assert log.lines[log.cursor].text.startswith("rank 0 line 123 "), "the only match"
        await pilot.press("slash", *"line 123", "enter", "n")
        assert log.lines[log.cursor].text.startswith("rank 0 line 1230 ")
        await pilot.press("N")
        assert log.lines[log.cursor].text.startswith("rank 0 line 123 ")
        # f turns following back on.
        await pilot.press("f")
        assert log.follow and log.cursor == len(log.lines) - 1


async def test_a_long_line_is_cut_and_shown_whole_on_enter(tmp_path: Path) -> None:
    run = live_run(tmp_path, 1, 3)
    long = "payload " + "x" * 200_000 + " end"
    _append(run / "logs" / "rank-00000.log", [long])
    app = attach(run)
    async with app.run_test(size=SIZE) as pilot:
        _, log = await opened(pilot, 1)
        await until(pilot, lambda: len(log.lines) == 4, "the long line", 5)
        await pilot.press("enter")
        assert log.lines[-1].cut > 0 and "bytes cut" in log.lines[-1].text
        await pilot.press("G", "enter")
        await until(pilot, lambda: isinstance(app.screen, LineScreen), "the whole line", 5)
        shown = app.screen.query_one("Static").render()
        assert str(shown).endswith(" end") and len(str(shown)) == len(long)
        await pilot.press("escape")
        assert not isinstance(app.screen, LineScreen)


async def test_a_silent_rank_turns_stalled_while_others_progress(tmp_path: Path) -> None:
    run = live_run(tmp_path, 3, 5)
    clock = Clock(START)
    app = attach(run, clock)
    async with app.run_test(size=SIZE) as pilot:
        ranks, _ = await opened(pilot, 3)
        assert all("running" in row(ranks, r) for r in range(3))
        clock.now += 45  # beyond stall_after = 30 from the config file
        for rank in (0, 2):
            _append(run / "logs" / f"rank-{rank:05d}.log", ["step 9"])
        await until(pilot, lambda: "stalled" in row(ranks, 1), "rank 1 stalled", 5)
        assert "running" in row(ranks, 0) and "running" in row(ranks, 2)
        await pilot.press("g", "]")
        assert ranks.selected == 1, "] stops at the stalled rank"
        status = {"rank": 1, "host": "nid0001", "state": "succeeded", "exit_code": 0}
        (run / "status" / "rank-00001.json").write_text(json.dumps(status))
        await until(pilot, lambda: "exited 0" in row(ranks, 1), "rank 1 exited", 5)


def test_follow_thread_ends_with_the_app(tmp_path: Path) -> None:
    import threading

    run = crashed_run(tmp_path)

    async def main() -> None:
        async with attach(run).run_test(size=SIZE) as pilot:
            await opened(pilot, 4)

    import asyncio

    asyncio.run(main())
    deadline = time.monotonic() + 3
    while any(t.name.startswith("follow ") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the follower outlived the app"
        time.sleep(0.05)
