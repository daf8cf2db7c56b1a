"""The Run tab through Pilot: rank list, a rank's log (follow, read back, search, errors, whole
lines), the all-ranks view with its filter, stalls, and attach being read-only.

Runs are fixture run directories (tests/fixtures/runs.py) or directories this test writes to
while the app follows them, with real files and the real follower thread.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from textual.pilot import Pilot

from ezpz_tui import config
from ezpz_tui.core.watching.monitor import CUT, KEEP_PER_RANK, OFFSET, RANK, TEXT
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.screens.line import LineScreen
from ezpz_tui.ui.screens.search import SearchScreen
from ezpz_tui.ui.widgets.logview import LogView
from ezpz_tui.ui.widgets.metrics import MetricsView
from ezpz_tui.ui.widgets.ranks import RankList
from ezpz_tui.ui.widgets.runs import RunsPanel
from tests.envs import without_job
from tests.fixtures.runs import make_run
from tests.pilots import LOCAL, started, text_of, until

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
    return ranks.render_row(ranks.row_of(rank)).plain


def log_texts(log: LogView) -> list[str]:
    return [line[TEXT] for line in log.lines]


async def opened(pilot: Pilot[None], ranks: int) -> tuple[RankList, LogView]:
    app = pilot.app
    await started(pilot)
    rank_list, log = app.query_one(RankList), app.query_one(LogView)

    def listed() -> bool:
        # Fixture runs have a launcher.log (a row of its own, above the ranks) and ranks on two
        # hosts (each heads its ranks).
        shown = [row for row in rank_list.rows if isinstance(row, int) and row >= 0]
        return len(shown) == ranks and bool(log.lines)

    await until(pilot, listed, "the run", 10)
    await until(pilot, lambda: app.focused is rank_list, "the rank list focused", 10)
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
        # ... and launcher.log's lines among them (the pseudo-rank -1, shown as "L").
        assert {line[RANK] for line in log.lines} == {-1, 0, 1, 2, 3}
        assert log.render_row(0).plain.startswith("L │ Launching 4 ranks")
        first_rank = next(i for i, line in enumerate(log.lines) if line[RANK] == 0)
        rendered = log.render_row(first_rank).plain
        assert rendered.startswith("0 │ ") and "\x1b" not in rendered
        # Enter in the rank list moves to the log; ] / [ jump between error lines.
        await pilot.press("enter")
        assert app.focused is log
        await pilot.press("g", "]")
        assert "Traceback" in log.lines[log.cursor][TEXT]
        await pilot.press("]")
        first = log.cursor
        await pilot.press("[")
        assert log.cursor < first
        # & filters by rank and text; an empty filter shows everything again.
        await pilot.press("ampersand")
        assert isinstance(app.screen, SearchScreen)
        await pilot.press(*"@1,3 error", "enter")
        assert {line[RANK] for line in log.lines} == {1, 3}
        assert all("error" in line[TEXT].lower() for line in log.lines)
        assert "filter ranks 1,3 'error'" in log.status_text().plain
        await pilot.press("ampersand", "ctrl+u", "enter")
        assert {line[RANK] for line in log.lines} == {-1, 0, 1, 2, 3}
        # X on a run this process did not start, which has ended: refused, nothing is touched.
        await pilot.press("X")
        said = lambda: any("read-only" in n.message for n in app._notifications)  # noqa: E731
        await until(pilot, said, "the refusal", 10)
        assert app.screen is app.main
        assert any("is not running (failed)" in n.message for n in app._notifications)


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


async def test_a_rank_chosen_away_from_the_failure_stays_when_lines_arrive(
    tmp_path: Path,
) -> None:
    """The view goes once to the rank that failed first; a rank the person then picks (here
    ``ctrl+n`` from the log, with the rank list unfocused) is not taken back by the lines the
    live run goes on writing."""
    run = live_run(tmp_path, 4, 3)
    app = attach(run)
    async with app.run_test(size=SIZE) as pilot:
        _, log = await opened(pilot, 4)
        log.focus()
        failed = {"rank": 2, "host": "nid0001", "pid": 102, "state": "failed", "exit_code": 1}
        (run / "status" / "rank-00002.json").write_text(json.dumps(failed))
        await until(pilot, lambda: log.rank == 2, "the failed rank's log", 10)
        await pilot.press("ctrl+n")
        assert log.rank == 3
        for rank in (2, 3):
            _append(run / "logs" / f"rank-{rank:05d}.log", [f"a late line of rank {rank}"])
        await until(pilot, lambda: "a late line of rank 3" in log_texts(log), "the new line", 10)
        assert log.rank == 3


async def test_a_run_toml_that_is_not_toml_costs_only_what_it_holds(tmp_path: Path) -> None:
    """The ranks come from the files on disk, the header says the record cannot be read, the
    cursor is on the rank whose log is shown (not on the launcher's row above it) and ``j``
    moves to the next rank."""
    run = make_run(
        tmp_path / "outputs",
        run_id="20261122-101010-000-tp1pp1cp1",
        state="succeeded",
        exit_code=0,
        sizes={"tp": 1},
        ranks=2,
        steps=4,
        created=START - 100,
        hosts=("x1",),  # one host: no heading rows between the ranks
    )
    (run / "run.toml").write_bytes(b"\xff\xfe not [toml")
    app = attach(run)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ranks, log = app.query_one(RankList), app.query_one(LogView)
        await until(pilot, lambda: {0, 1} <= set(ranks.rows), "both ranks listed", 10)
        header = app.query_one("#run-header")
        await until(pilot, lambda: "run.toml cannot be read" in text_of(header), "the note", 10)
        assert "ranks as their files show" in text_of(header)
        ranks.focus()
        await pilot.pause()
        assert (ranks.selected, log.rank) == (0, 0)
        await pilot.press("j")
        await until(pilot, lambda: log.rank == 1, "rank 1's log", 5)
        await pilot.press("k")
        await until(pilot, lambda: log.rank == 0, "rank 0's log", 5)


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
        await until(pilot, lambda: log.lines[-1][TEXT] == "fresh 2", "new lines followed", 5)
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
        await until(pilot, lambda: log.lines[0][OFFSET] == 0, "the file's first line", 5)
        assert log_texts(log)[: total + 2] == [
            f"rank 0 line {i} \x1b[32mok\x1b[0m" for i in range(total)
        ] + ["fresh 1", "fresh 2"]
        # / searches (ANSI codes do not count), n / N move between matches.
        await pilot.press("slash", *"line 123 ok", "enter")
        assert log.lines[log.cursor][TEXT].startswith("rank 0 line 123 ")
        await pilot.press("n")
        assert log.lines[log.cursor][TEXT].startswith("rank 0 line 123 "), "the only match"
        await pilot.press("slash", *"line 123", "enter", "n")
        assert log.lines[log.cursor][TEXT].startswith("rank 0 line 1230 ")
        await pilot.press("N")
        assert log.lines[log.cursor][TEXT].startswith("rank 0 line 123 ")
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
        assert log.lines[-1][CUT] > 0 and "bytes cut" in log.lines[-1][TEXT]
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
        # Off-screen ranks' logs are read after the first frame: every rank's last line seen
        # before the clock moves on, so rank 1's silence starts at START.
        for rank in range(3):
            await until(pilot, lambda r=rank: f"rank {r} line 4" in row(ranks, r), "read", 5)
        clock.now += 45  # beyond stall_after = 30 from the config file
        for rank in (0, 2):
            _append(run / "logs" / f"rank-{rank:05d}.log", ["step 9"])
        # Ranks off screen are looked at as the follower's budget allows: wait for both lines
        # (up to 0.5 s on a loaded machine).
        await until(pilot, lambda: "step 9" in row(ranks, 2), "rank 2's new line", 10)
        await until(pilot, lambda: "stalled" in row(ranks, 1), "rank 1 stalled", 5)
        assert "running" in row(ranks, 0) and "running" in row(ranks, 2)
        await pilot.press("g", "]")
        assert ranks.selected == 1, "] stops at the stalled rank"
        status = {"rank": 1, "host": "nid0001", "state": "succeeded", "exit_code": 0}
        (run / "status" / "rank-00001.json").write_text(json.dumps(status))
        await until(pilot, lambda: "exited 0" in row(ranks, 1), "rank 1 exited", 5)


def test_follow_thread_ends_with_the_app(tmp_path: Path) -> None:
    import threading

    run = live_run(tmp_path, 2, 3)  # a finished run's follower ends once it has read it

    def following() -> bool:
        return any(t.name.startswith("follow ") for t in threading.enumerate())

    async def main() -> None:
        async with attach(run).run_test(size=SIZE) as pilot:
            await opened(pilot, 2)
            assert following(), "the opened run has a follower thread"

    import asyncio

    asyncio.run(main())
    # Ended with the app (within 0.05 s here).
    deadline = time.monotonic() + 3
    while following():
        assert time.monotonic() < deadline, "the follower outlived the app"
        time.sleep(0.05)


CRASH = """\
import ctypes, os, sys, time
rank = int(os.environ.get("PMI_RANK", "0"))
for step in range(3):
    print(f"rank {rank} step {step}", flush=True)
    time.sleep(0.2)
if rank == 1:
    os.write(1, b"rank 1 about to touch address 0\\n")
    ctypes.string_at(0)
time.sleep(30)
"""


@pytest.mark.mpi
async def test_a_real_segfault_under_mpiexec(tmp_path: Path) -> None:
    """Two real ranks under the venv's mpiexec and the capture wrapper; rank 1 segfaults.
    The TUI attached afterwards shows rank 1 failed by SIGSEGV with its last line, first."""
    outputs = tmp_path / "outputs"
    env = without_job()
    env["EZPZ_OUTPUTS"] = str(outputs)
    launch = [sys.executable, "-m", "ezpz_tui", "launch", "--ppn", "2", "--quiet", "--"]
    started = time.monotonic()
    done = subprocess.run(
        [*launch, sys.executable, "-c", CRASH],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode != 0, done.stdout + done.stderr
    assert time.monotonic() - started < 25, "mpiexec ended the job when rank 1 crashed"
    (run,) = [p for p in outputs.iterdir() if p.is_dir()]
    app = attach(run)
    async with app.run_test(size=SIZE) as pilot:
        ranks, log = await opened(pilot, 2)
        await until(pilot, lambda: log.rank == 1, "rank 1's log", 10)
        assert row(ranks, 1).startswith("✗    1 SIGSEGV")
        assert "rank 1 about to to" in row(ranks, 1), "its last line, cut to the width"
        assert log.lines[-1][TEXT] == "rank 1 about to touch address 0"
        await pilot.press("a")
        texts = log_texts(log)
        mark = texts.index("✗ rank 1 SIGSEGV")
        assert mark > texts.index("rank 1 about to touch address 0")


async def test_overlay_an_earlier_run_and_full_screen(tmp_path: Path) -> None:
    common = {"exit_code": 0, "sizes": {"tp": 1}, "ranks": 2, "steps": 12}
    earlier = make_run(
        tmp_path,
        run_id="20261122-090000-000-tp1pp1cp1",
        state="succeeded",
        created=START - 900,
        **common,
    )
    run = make_run(
        tmp_path,
        run_id="20261122-100000-000-tp1pp1cp1",
        state="succeeded",
        created=START - 300,
        **common,
    )
    app = attach(run)
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, 2)
        view = app.query_one(MetricsView)
        await until(pilot, lambda: view.current_metric() == "loss", "the loss metric", 10)
        runs = app.query_one(RunsPanel)
        await until(pilot, lambda: len(runs.runs) == 2, "the runs list", 10)
        # c on the earlier run (the second row, newest first) overlays it on the plots.
        await pilot.press("L", "g", "j", "c")
        await until(pilot, lambda: earlier in runs.compared, "the overlay", 10)
        status = str(view.status_text(80))
        assert f"━ {earlier.name}" in status
        assert "1 overlaid" in str(app.query_one("#runs-title").render())
        await pilot.press("c")
        await until(pilot, lambda: not runs.compared, "the overlay removed", 10)
        # F: the plot alone on the screen; Esc (or F) brings the layout back.
        await pilot.press("J", "t")
        assert app.focused is view
        await pilot.press("F")
        assert app.screen.maximized is view
        await pilot.press("F")
        assert app.screen.maximized is None


def test_attach_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    env = without_job()
    empty = tmp_path / "empty"
    empty.mkdir()
    for target, words in ((empty, "holds no run"), (tmp_path / "missing", "no run")):
        done = subprocess.run(
            [sys.executable, "-m", "ezpz_tui", "attach", str(target)],
            env={**env, "EZPZ_OUTPUTS": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2 and words in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


async def test_attach_a_directory_ezpz_wrote(tmp_path: Path) -> None:
    """ezpz's own layout: metrics-<rank>.jsonl, no step key, no logs/ or status/."""
    run = tmp_path / "ezpz-run"
    run.mkdir()
    for rank in (0, 1):
        with open(run / f"metrics-{rank}.jsonl", "w") as fh:
            for i in range(5):
                record = {"timestamp": START + i, "rank": rank, "metrics": {"loss": 3.0 - i}}
                fh.write(json.dumps(record) + "\n")
    app = attach(run)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ranks = app.query_one(RankList)
        await until(pilot, lambda: ranks.row_count == 2, "ranks from the metrics files", 10)
        assert "running" in row(ranks, 0) or "idle" in row(ranks, 0)
        view = app.query_one(MetricsView)
        await until(pilot, lambda: view.current_metric() == "loss", "the loss metric", 10)
        assert view.store is not None and view.store.points(1) == 5
