"""A failed run in the app: the launcher's row, why it failed on one screen, and the one key that
excludes the failing host and relaunches.

The crashes are real: two ranks under the mpich wheel's mpiexec (Hydra), started by the real
``Session``, where rank 1 says a line and exits 3 while rank 0 sleeps, so the launcher tears
rank 0 down as a consequence. The app then opens the run as a person would (attached at start,
or watching it while it fails).

The node fault cannot be real here, so the exclude-and-relaunch test uses a stand-in launcher,
as tests/integration/test_failover.py does: on a simulated two-host Aurora PBS job (a fixture
``Allocation`` and nodefile), ``mpiexec`` on PATH is a script that records the hostfile it was
handed and prints, into ``launcher.log``, the line PALS prints when a node dies, naming the last
host of that hostfile; it exits 1 without starting ranks. Everything after the launcher is the
real path: the supervisor records the failure and the host its node fault names in
``bad_hosts.txt``, ``explain`` parses ``launcher.log``, and the relaunch the key asks for is
planned, recorded and started by the same code as any launch.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Footer

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import LaunchPlan
from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.core.session import Session
from ezpz_tui.core.watching.followers import LAUNCHER
from ezpz_tui.core.watching.monitor import TEXT
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.screens.confirm import ConfirmScreen
from ezpz_tui.ui.screens.failure import FailureScreen
from ezpz_tui.ui.screens.message import MessageScreen
from ezpz_tui.ui.widgets.logview import LogView
from ezpz_tui.ui.widgets.panels import AllocationPanel
from ezpz_tui.ui.widgets.ranks import RankList
from tests.fixtures.stand_ins import AURORA, aurora_job
from tests.pilots import FIXED, HOST, LOCAL, started, text_of, until

PY = sys.executable
SIZE = (120, 40)
RANKS = """
import os, sys, time
rank = int(os.environ["RANK"])
print(f"rank {rank} up", flush=True)
if rank == 1:
    time.sleep(float(sys.argv[1]))
    print("rank 1 gives up", flush=True)
    os._exit(3)
time.sleep(60)
"""


def crash(outputs: Path, after_s: float) -> Session:
    """A real 2-rank run in ``outputs`` whose rank 1 exits 3 after ``after_s`` seconds."""
    session = Session(LOCAL, outputs)
    session.launch(LaunchPlan(ppn=2, command=(PY, "-c", RANKS, str(after_s))))
    return session


def ended(session: Session) -> Path:
    handle = session.current
    assert handle is not None
    assert handle.wait(60) is not None, "the crashed run did not end"
    return handle.run_dir


def attach(run: Path) -> EzpzApp:
    return EzpzApp(outputs=run.parent, alloc=LOCAL, clock=lambda: FIXED, checks=[], attach=run)


async def explained(pilot: Pilot[None]) -> None:
    main = pilot.app.main  # type: ignore[attr-defined]
    await started(pilot)
    opened = lambda: main.opened is not None and main.opened.failure is not None  # noqa: E731
    await until(pilot, opened, "why the run failed", 20)


async def test_a_crashed_run_shows_why_and_the_launchers_log(tmp_path: Path, mpiexec: str) -> None:
    run = ended(crash(tmp_path / "outputs", 0.5))
    app = attach(run)
    async with app.run_test(size=SIZE) as pilot:
        await explained(pilot)
        # Opened from disk, not watched live: the summary line says it, no dialog pops up.
        assert app.screen is app.main
        summary = text_of(app.query_one("#run-failure"))
        assert summary.startswith(f"✗ rank 1 on {HOST}: exit 3")
        assert "w: why" in summary and "B: exclude host and relaunch" in summary
        await pilot.pause()
        footer = {k.key: k.description for k in app.query_one(Footer).query("FooterKey")}
        assert footer.get("B") == "exclude", footer

        await pilot.press("w")
        await until(pilot, lambda: isinstance(app.screen, FailureScreen), "the failure", 10)
        shown = text_of(app.screen.query_one("#failure-text"))
        assert f"first failing rank: 1 on {HOST}, exit 3" in shown
        assert "    rank 1 gives up" in shown, "its last lines"
        assert "killed as a consequence: rank 0" in shown
        # Its class, as `why` says it: the program's exit, not retried.
        assert "class: workload" in shown
        assert f"  evidence: rank 1 on {HOST}: exit 3" in shown
        assert "  not retried: rank 1 on " in shown
        assert "what to do:" in shown
        await pilot.press("escape")
        assert app.screen is app.main

        # The launcher is the first row of the rank list; its log reads like a rank's.
        ranks, log = app.query_one(RankList), app.query_one(LogView)
        launcher_lines = [
            line for line in (run / "launcher.log").read_text().splitlines() if line.strip()
        ]
        assert launcher_lines, "Hydra said something"
        await until(pilot, lambda: ranks.monitor.has_launcher, "the launcher's row", 10)  # type: ignore[union-attr]
        row = ranks.render_row(0).plain
        assert row.startswith(" launcher failed"), row
        assert launcher_lines[-1][:20] in row
        assert ranks.render_row(1).plain.startswith("     0 killed"), "rank 0 below it"
        ranks.focus()
        await pilot.press("g")
        await until(pilot, lambda: log.rank == LAUNCHER, "the launcher's log", 5)
        assert [line[TEXT] for line in log.lines if line[TEXT].strip()] == launcher_lines
        assert text_of(app.query_one("#log-status")).startswith("launcher · ")
        assert len(ranks.monitor.ranks) == 2, "the launcher is not counted as a rank"  # type: ignore[union-attr]


async def test_why_opens_by_itself_once_when_a_watched_run_fails(
    tmp_path: Path, mpiexec: str
) -> None:
    session = crash(tmp_path / "outputs", 4.0)
    try:
        handle = session.current
        assert handle is not None
        app = attach(handle.run_dir)
        async with app.run_test(size=SIZE) as pilot:
            await started(pilot)
            await until(
                pilot, lambda: app.main.opened is not None and app.main.opened.watched, "live", 20
            )
            # Watched live: no dialog, unless the crash has already been read (a loaded machine
            # can start the app as slowly as the rank fails).
            assert app.screen is app.main or app.main.opened.failure is not None
            popped = await failure_popped(pilot, handle.run_dir.name)
            assert "first failing rank: 1" in text_of(popped.query_one("#failure-text"))
            await pilot.press("escape")
            await pilot.pause(4.5)  # two more refreshes of the runs list: it stays closed
            assert app.screen is app.main
    finally:
        session.supervisor.stop_all(grace_s=(1.0, 1.0))


@pytest.fixture
def aurora(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Allocation:
    """A two-host Aurora PBS job whose ``mpiexec`` is the stand-in."""
    job, stand_in = aurora_job(tmp_path, checked_at=FIXED)
    path = os.environ.get("PATH", "")
    monkeypatch.setenv("PATH", f"{stand_in.parent}{os.pathsep}{path}")
    return job


async def failure_popped(pilot: Pilot[None], run: str) -> FailureScreen:
    app = pilot.app

    def shown() -> bool:
        screen = app.screen
        popped = isinstance(screen, FailureScreen) and screen.failure.run_id == run
        return popped and bool(screen.query("#failure-text"))  # composed, not only pushed

    await until(pilot, shown, f"why {run} failed", 30)
    assert isinstance(app.screen, FailureScreen)
    return app.screen


def shown(panel: AllocationPanel) -> str:
    """The allocation pane's table as text."""
    console = Console(width=80, file=io.StringIO(), record=True)
    console.print(panel.content)
    return console.export_text()


def run_dirs(outputs: Path) -> list[Path]:
    return sorted(p for p in outputs.iterdir() if p.is_dir()) if outputs.is_dir() else []


async def test_exclude_the_failing_host_and_relaunch(tmp_path: Path, aurora: Allocation) -> None:
    outputs = tmp_path / "outputs"
    app = EzpzApp(outputs=outputs, alloc=aurora, clock=lambda: FIXED, checks=[])
    short = [h.split(".")[0] for h in AURORA]
    async with app.run_test(size=SIZE) as pilot:
        try:
            await started(pilot)
            await pilot.press("r")
            await until(pilot, lambda: len(run_dirs(outputs)) == 1, "the launch", 20)
            [first] = run_dirs(outputs)
            # Launched here, so watched: the failure opens by itself, naming the dead node.
            dialog = await failure_popped(pilot, first.name)
            assert dialog.failure.node_fault_host == AURORA[1]
            assert f"{AURORA[1]}: shepherd died from signal 9" in text_of(
                dialog.query_one("#failure-text")
            )
            await pilot.press("B")
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question", 10)
            question = text_of(app.screen.query_one("#question"))
            # The run's end listed the host already: the question does not offer to add it.
            assert question.startswith(
                f"{AURORA[1]} was named by the failure. {AURORA[1]} is in bad_hosts.txt. Relaunch"
            )
            assert f"on 1 host(s) without it ({short[0]})?" in question
            await pilot.press("y")
            # The run directory appears before its run.toml is written into it.
            await until(pilot, lambda: _recorded(outputs, 2), "the relaunch", 20)
            second = run_dirs(outputs)[1]

            listed = (outputs / "bad_hosts.txt").read_text().splitlines()
            assert listed[0].startswith(f"{AURORA[1]}  # ")  # once, by the first run's end
            assert f"run {first.name}: " in listed[0]
            assert sum(line.startswith(AURORA[1]) for line in listed) == 1
            record = read_run_toml(second)
            assert record["parent"] == first.name
            assert record["hosts"] == [AURORA[0]]
            assert short[1] in record["plan"]["exclude"]
            # The stand-in launcher logs its hosts once its interpreter is up, which may come
            # after the relaunch's record.
            hostfiles = tmp_path / "bin" / "hostfiles.log"
            await until(
                pilot,
                lambda: len(hostfiles.read_text().splitlines()) == 2,
                "the relaunch's hosts",
                20,
            )
            handed = hostfiles.read_text().splitlines()
            assert len(handed) == 2 and AURORA[1] in handed[0] and AURORA[1] not in handed[1]
            panel = app.query_one(AllocationPanel)
            await until(pilot, lambda: "excluded" in shown(panel), "the excluded host", 10)
            # The relaunch's own end may have listed its host too by now.
            [row] = [line for line in shown(panel).splitlines() if line.startswith("excluded")]
            assert short[1] in row and "(bad_hosts.txt)" in row, row

            # The relaunch's node died too (its end listed that host): nothing is left to run
            # on, and the key says so with the plan's reason, writing nothing more.
            await failure_popped(pilot, second.name)
            listed = (outputs / "bad_hosts.txt").read_text().splitlines()
            assert len(listed) == 2 and listed[1].startswith(f"{AURORA[0]}  # ")
            await pilot.press("B")
            await until(pilot, lambda: isinstance(app.screen, MessageScreen), "the refusal", 10)
            said = text_of(app.screen.query_one("#message"))
            assert "Every allocated host is excluded" in said
            await pilot.press("escape")
            assert (outputs / "bad_hosts.txt").read_text().splitlines() == listed
            assert len(run_dirs(outputs)) == 2
        finally:
            if app.main.session is not None:
                app.main.session.supervisor.stop_all(grace_s=(1.0, 1.0))


async def test_the_form_sizes_the_plan_without_the_listed_host(
    tmp_path: Path, aurora: Allocation
) -> None:
    """One of the job's two hosts in bad_hosts.txt: the form's world and DP are those of the
    launch its preview shows (one host), as the dry run's are."""
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    (outputs / "bad_hosts.txt").write_text(f"{AURORA[1]}  # a node fault\n")
    app = EzpzApp(outputs=outputs, alloc=aurora, clock=lambda: FIXED, checks=[])
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        preview = app.query_one("#preview")
        await until(pilot, lambda: "--np=2" in text_of(preview), "the launch's preview", 10)
        assert "DP 2 · world 2" in text_of(app.query_one("#dp"))


async def test_the_palette_finds_exclude_host_and_relaunch(tmp_path: Path) -> None:
    app = EzpzApp(outputs=tmp_path / "outputs", alloc=LOCAL, clock=lambda: FIXED, checks=[])
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        titles = [c.title for c in app.main.palette_commands()]
        assert any(t.lower().startswith("exclude host and relaunch") for t in titles)
        footer = {k.key for k in app.query_one(Footer).query("FooterKey")}
        assert "B" not in footer, "no failed run open: the failure key stays out"
        # No failed run open: the key says so and does nothing.
        await pilot.press("B")
        await pilot.pause()
        assert app.screen is app.main and not (tmp_path / "outputs" / "bad_hosts.txt").exists()


async def test_retries_relaunch_without_the_dead_node_unattended(
    tmp_path: Path, aurora: Allocation, config_dir: Path
) -> None:
    """``[launch] retries = 1``: the first node fault is retried on the hosts left with no key
    pressed; the retry's own fault is not (the count is spent) and shows its failure."""
    (config_dir / "config.toml").write_text("[launch]\nretries = 1\n")
    outputs = tmp_path / "outputs"
    app = EzpzApp(outputs=outputs, alloc=aurora, clock=lambda: FIXED, checks=[])
    async with app.run_test(size=SIZE) as pilot:
        try:
            await started(pilot)
            await pilot.press("r")
            # The run directory appears before its run.toml is written into it.
            await until(pilot, lambda: _recorded(outputs, 2), "the retry", 30)
            first, second = run_dirs(outputs)
            assert read_run_toml(second)["parent"] == first.name
            assert read_run_toml(second)["hosts"] == [AURORA[0]]
            assert (outputs / "bad_hosts.txt").read_text().startswith(AURORA[1])
            await failure_popped(pilot, second.name)
            await pilot.pause(1.0)
            assert len(run_dirs(outputs)) == 2, "one retry only"
        finally:
            if app.main.session is not None:
                app.main.session.supervisor.stop_all(grace_s=(1.0, 1.0))


def _recorded(outputs: Path, count: int) -> bool:
    """``count`` runs made, the newest with its run.toml written."""
    runs = run_dirs(outputs)
    return len(runs) == count and (runs[-1] / "run.toml").is_file()
