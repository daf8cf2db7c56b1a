"""An attached live run is read from its node digests (issue 34): every rank's row, its step and
telemetry from one file a node, and only the shown ranks' own files (rank 0's log and series,
the launcher's log, a rank once a person opens it); a node whose writer stops has its ranks read
from their own files, and the screen says so.

The run is real: four gloo ranks under ``ezpz-tui launch`` (the mpich wheel's mpiexec and the
capture wrapper) recording History steps, one node digest written by one of them. What the app
opens is recorded by an audit hook on ``open``: the interpreter's own record of every file it
opened, whoever opened it.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from ezpz_tui.ui import opened_run
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.panels import SummaryBar
from runtime.rundir import RankState
from tests.integration.test_node_digests import (
    INTERVAL_S,
    RANKS,
    digest,
    launched,
    stepped,
)
from tests.integration.test_node_digests import wait_for as wait_until
from tests.pilots import LOCAL, attached, text_of, until

SIZE = (120, 40)


def rank_files(opened: list[str], run: Path) -> set[str]:
    """The rank files of ``run`` opened, named without their block: ``logs/rank-00002.log``."""
    inside = (path[len(str(run)) + 1 :] for path in opened if path.startswith(f"{run}/"))
    named = (re.sub(r"/b\d{4}/", "/", path) for path in inside)
    return {path for path in named if "/rank-" in path}


@pytest.mark.mpi
async def test_an_attached_live_run_shows_every_rank_from_its_node_digest(
    tmp_path: Path, mpiexec: str, opened: list[str]
) -> None:
    with launched(tmp_path) as (run, _marks, _env):
        wait_until(lambda: stepped(run, 10))
        opened.clear()
        app = EzpzApp(outputs=run.parent, alloc=LOCAL, clock=time.time, checks=[], attach=run)
        async with app.run_test(size=SIZE) as pilot:
            run_open = await attached(pilot)
            monitor = run_open.monitor

            def every_row() -> bool:
                ranks = monitor.ranks
                return len(ranks) == RANKS and all(
                    info.status == RankState.RUNNING and r in monitor.telemetry
                    for r, info in ranks.items()
                )

            await until(pilot, every_row, "every rank's row from the digest", 60)
            bar = app.query_one(SummaryBar)
            await until(pilot, lambda: "step " in text_of(bar), "the summary bar's step", 30)
            assert run_open.live_nodes is not None
            assert run_open.follower is None and run_open.first_read_pid is None
            assert all(monitor.steps.recent(r) for r in range(RANKS))  # each rank's dt
            # Only rank 0's own files (its log shown first, its series for the plot) and the
            # launcher's: ranks 1-3 came from the node's digest.
            await pilot.pause(2.0)
            seen = rank_files(opened, run)
            assert seen <= {
                "logs/rank-00000.log",
                "telemetry/rank-00000.jsonl",
                "metrics/rank-00000.jsonl",
            }, seen
            assert "metrics/rank-00000.jsonl" in seen

            # A person opens rank 2: its own files are read from then on.
            app.main.run_panel.ranks.select_rank(2)  # type: ignore[attr-defined]
            await until(
                pilot,
                lambda: "logs/rank-00002.log" in rank_files(opened, run),
                "rank 2's log read once shown",
                30,
            )
            assert not any("rank-00001" in p or "rank-00003" in p for p in rank_files(opened, run))

            # The node's writer stops: after three heartbeats its digest is stale, the ranks'
            # own files are read, and the screen says so.
            writer = digest(run)["writer"]["pid"]
            os.kill(writer, signal.SIGSTOP)
            try:
                said = f"writer is gone, so ranks 0-{RANKS - 1} read from their own files"

                def fell_back() -> bool:
                    return any(said in line for line in monitor.problems_of(None))

                await until(pilot, fell_back, "the fallback said", 3 * 5 * INTERVAL_S + 30)
                notes = [str(n.message) for n in app._notifications]
                assert any(said in note for note in notes), notes
                await until(
                    pilot,
                    lambda: "status/rank-00003.json" in rank_files(opened, run),
                    "rank 3's own status read",
                    30,
                )
                # The sentence shows above the log of the rank on screen (rank 2, of that node).
                status = app.query_one("#log-status")
                await until(pilot, lambda: said in text_of(status), "the note on screen", 10)
            finally:
                os.kill(writer, signal.SIGCONT)


@pytest.mark.mpi
async def test_a_live_run_read_from_its_node_digest_opens_from_its_digest_json_at_its_end(
    tmp_path: Path, mpiexec: str
) -> None:
    with launched(tmp_path, ends=True) as (run, marks, _env):
        wait_until(lambda: stepped(run, 10))
        app = EzpzApp(outputs=run.parent, alloc=LOCAL, clock=time.time, checks=[], attach=run)
        async with app.run_test(size=SIZE) as pilot:
            run_open = await attached(pilot)
            monitor = run_open.monitor
            await until(pilot, lambda: run_open.live_nodes is not None, "the node digests", 30)
            await until(pilot, lambda: len(monitor.ranks) == RANKS, "every rank's row", 30)
            (marks / "stop").touch()  # the ranks end; the finalizer writes digest.json
            await until(pilot, lambda: run_open.shown_files is not None, "the digest's rows", 180)
            await until(
                pilot,
                lambda: all(i.status == RankState.SUCCEEDED for i in monitor.ranks.values()),
                "every rank's end from the digest",
                30,
            )
            assert run_open.follower is None and run_open.first_read_pid is None


@pytest.mark.mpi
async def test_a_run_opened_before_its_ranks_reported_moves_to_its_node_digests(
    tmp_path: Path, mpiexec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run this app launched is opened before any node digest exists: read from its files,
    then from its digests once they appear (here 4 ranks count as many)."""
    monkeypatch.setattr(opened_run, "NODES_AFTER_RANKS", RANKS - 1)
    monkeypatch.setattr(opened_run, "NODES_LOOK_S", 0.5)
    with launched(tmp_path, hold=True) as (run, marks, _env):
        app = EzpzApp(outputs=run.parent, alloc=LOCAL, clock=time.time, checks=[], attach=run)
        async with app.run_test(size=SIZE) as pilot:
            run_open = await attached(pilot)
            await until(pilot, lambda: run_open.follower is not None, "its files followed", 60)
            assert run_open.live_nodes is None and not list(run.glob("nodes/*/node-*.json"))
            (marks / "hold").unlink()  # the ranks step, and their node's digest is written
            await until(pilot, lambda: run_open.live_nodes is not None, "its node digests", 60)
            assert run_open.follower is None
            monitor = run_open.monitor

            def stepping() -> bool:  # each rank's step time, as its node's digest has it
                return len(monitor.ranks) == RANKS and all(
                    info.status == RankState.RUNNING and monitor.steps.recent(r)
                    for r, info in monitor.ranks.items()
                )

            await until(pilot, stepping, "every rank stepping, from the digest", 60)
            bar = app.query_one(SummaryBar)
            await until(pilot, lambda: "step " in text_of(bar), "the summary bar's step", 30)
