"""A finished run opens from its ``digest.json`` (issue 34): the rank rows, the summary bar and
the plot's band come from that one file, read in a child interpreter, and a rank's own files
are read when a person opens that rank (its log) or plots it (its metrics), not before.

The run is real: a 2-rank History run launched through ``ezpz-tui launch`` (the mpich wheel's
mpiexec), grown to 300 ranks on 25 nodes by ``bench/grow_run.py``, its digest built by the
finalizer's own builder. What the app opens is recorded by an audit hook on ``open``: the
interpreter's own record of every file it opened, whoever opened it.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ezpz_tui.core.runs.digest import read_digest, write_digest
from ezpz_tui.core.watching.digesting import build_digest
from ezpz_tui.core.watching.followers import LAUNCHER
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.metrics import MetricsView
from ezpz_tui.ui.widgets.panels import SummaryBar
from runtime.rundir import DIGEST_JSON, METRICS_NC, REPORT_MD, SUMMARY_JSON, RankState, RunDir
from runtime.telemetry.record import INTERVAL_VAR
from tests.fixtures.cli import PY, REPO, base_env, cli, kill_leftovers, run_dirs
from tests.fixtures.finished import GOOD
from tests.fixtures.runs import wait_for
from tests.pilots import LOCAL, attached, text_of, until

RANKS, PER_NODE = 300, 12
SIZE = (120, 40)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real finished 2-rank run: six History steps on each rank, telemetry every 0.2 s."""
    outputs = tmp_path_factory.mktemp("digest-source") / "outputs"
    env = {**base_env(outputs), INTERVAL_VAR: "0.2"}
    try:
        done = cli(["launch", "--quiet", "--ppn", "2", "--", PY, "-c", GOOD], env)
        assert done.returncode == 0, done.stderr
    finally:
        kill_leftovers(outputs)
    (run,) = run_dirs(outputs)
    ends = (SUMMARY_JSON, METRICS_NC, REPORT_MD, DIGEST_JSON)  # the finalizer's, written last
    wait_for(lambda: all((run / name).is_file() for name in ends), 60, "the finalizer's files")
    return run


def grown(source: Path, where: Path, digest: bool) -> Path:
    """``source`` grown to RANKS ranks in an outputs folder of its own; with its digest built
    for the grown run (a digest copied from the 2-rank run says 2 ranks)."""
    run = where / "outputs" / source.name
    run.parent.mkdir(parents=True)
    argv = [PY, str(REPO / "bench" / "grow_run.py"), str(source), str(run), str(RANKS)]
    done = subprocess.run(
        [*argv, "--ranks-per-node", str(PER_NODE)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    RunDir(run).digest_json.unlink(missing_ok=True)
    if digest:
        write_digest(run, build_digest(run))
    return run


def own_files(opened: list[str], run: Path, folder: str) -> set[str]:
    """The names of the files of ``run``'s ``folder`` in ``opened``."""
    inside = str(run / folder) + "/"
    return {Path(p).name for p in opened if p.startswith(inside)}


async def test_a_finished_run_opens_from_its_digest_and_reads_a_rank_when_shown(
    source: Path, tmp_path: Path, opened: list[str]
) -> None:
    run = grown(source, tmp_path, digest=True)
    digest = read_digest(run)
    assert digest is not None and digest.world == RANKS
    opened.clear()  # what building the digest read
    app = EzpzApp(outputs=run.parent, alloc=LOCAL, clock=time.time, checks=[], attach=run)
    async with app.run_test(size=SIZE) as pilot:
        run_open = await attached(pilot)
        main = app.main  # type: ignore[attr-defined]
        ranks = main.run_panel.ranks
        await until(pilot, lambda: len(run_open.monitor.ranks) == RANKS, "every rank's row", 30)
        bar = app.query_one(SummaryBar)
        await until(pilot, lambda: "step 5" in text_of(bar), "the summary bar's step", 10)

        assert run_open.shown_files is not None and run_open.follower is None
        monitor = run_open.monitor
        for rank in (0, 13, RANKS - 1):  # rows as the digest says: end, host, last line
            info, status = monitor.ranks[rank], digest.status(rank)
            assert status is not None and info.status == status.state == RankState.SUCCEEDED
            assert info.host == digest.host(rank) and info.local_rank == rank % PER_NODE
            assert info.last_line == digest.last_line(rank)
        assert ranks.row_count >= RANKS  # the launcher's and the hosts' headings besides
        assert f"loss {digest.last(0)['loss']:.3f}" in text_of(bar), text_of(bar)
        assert monitor.steps.recent(13) == digest.step_time(13)
        assert monitor.telemetry[13].latest == digest.sample(13) is not None

        store = app.query_one(MetricsView).store
        assert store is not None and store.lean
        band = digest.band("loss")
        assert band is not None
        shown = store.band("loss")
        assert shown.x.tolist() == band["step"]
        assert all(math.isclose(a, b) for a, b in zip(shown.mean, band["mean"], strict=True))
        assert store.at_step("loss", 13, 5) == (digest.last(13)["loss"], digest.last_time(13))

        # Only the shown rank's log and the launcher's were read, and rank 0's metrics (the
        # checkpoint gauge's and the restart's first record): no other rank's file.
        await until(pilot, lambda: len(monitor.lines_of(0)) > 0, "rank 0's log", 10)
        rank0 = RunDir(run).metrics(0).name
        assert own_files(opened, run, "logs") == {RunDir(run).log(0).name}
        assert own_files(opened, run, "metrics") <= {rank0}
        assert own_files(opened, run, "status") == set()
        assert LAUNCHER in monitor.shown_ranks()

        ranks.focus()
        await pilot.press("7")  # rank 7's row: its log is read, its metrics not yet
        await until(pilot, lambda: monitor.shown == 7, "rank 7 shown", 10)
        await until(pilot, lambda: len(monitor.lines_of(7)) > 0, "rank 7's log", 10)
        assert own_files(opened, run, "logs") == {RunDir(run).log(r).name for r in (0, 7)}
        assert own_files(opened, run, "metrics") <= {rank0}

        await pilot.press("J", "t")  # the Metrics tab plots rank 7: its series is read
        metrics = RunDir(run).metrics(7).name
        await until(pilot, lambda: metrics in own_files(opened, run, "metrics"), "its series", 10)
        await until(pilot, lambda: len(store.series("loss", 7)[1]) == 6, "rank 7's line", 10)
        assert own_files(opened, run, "metrics") - {rank0} == {metrics}


async def test_a_finished_run_without_a_digest_opens_from_its_files(
    source: Path, tmp_path: Path
) -> None:
    """An older run (or one whose finalizer never wrote its digest): every rank's files."""
    run = grown(source, tmp_path, digest=False)
    app = EzpzApp(outputs=run.parent, alloc=LOCAL, clock=time.time, checks=[], attach=run)
    async with app.run_test(size=SIZE) as pilot:
        run_open = await attached(pilot)
        bar = app.query_one(SummaryBar)
        await until(pilot, lambda: "step 5" in text_of(bar), "the summary bar's step", 30)
        monitor = run_open.monitor
        done = lambda: all(  # noqa: E731
            monitor.ranks[r].status == RankState.SUCCEEDED for r in range(RANKS)
        )
        await until(pilot, done, "every rank's status file", 30)
        # Read whole by the first read's worker process, not from a digest.
        assert run_open.first_read_pid is not None and run_open.shown_files is None


async def test_a_digest_of_another_size_is_not_used(source: Path, tmp_path: Path) -> None:
    """A digest copied with a run grown since (it says 2 ranks of 300): the files are read."""
    run = grown(source, tmp_path, digest=False)
    shutil.copy(RunDir(source).digest_json, RunDir(run).digest_json)
    app = EzpzApp(outputs=run.parent, alloc=LOCAL, clock=time.time, checks=[], attach=run)
    async with app.run_test(size=SIZE) as pilot:
        run_open = await attached(pilot)
        await until(pilot, lambda: run_open.first_read_ended, "the files read", 30)
        assert len(run_open.monitor.ranks) == RANKS
        assert run_open.first_read_pid is not None and run_open.shown_files is None
