"""A finished run's digest as the TUI takes it (issue 34): the columns read in a child
interpreter, the store's bands and last values as a store that read every rank's file has them,
the rank rows, and the shown ranks' files read once each, when first shown."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest

from ezpz_tui.core.runs.digest import write_digest
from ezpz_tui.core.watching import fscalls
from ezpz_tui.core.watching.digested import Digested, read_apart, read_digested
from ezpz_tui.core.watching.digesting import build_digest
from ezpz_tui.core.watching.followers import LAUNCHER
from ezpz_tui.core.watching.metrics.load import load_store, own_file_loader
from ezpz_tui.core.watching.metrics.store import MetricStore
from ezpz_tui.core.watching.monitor import RunMonitor, settled
from ezpz_tui.core.watching.shown_files import ShownFiles
from runtime.rundir import RankState, RunDir, read_state
from tests.fixtures.runs import make_run

RANKS, STEPS, FAILING = 96, 20, 5


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A failed run of 96 ranks on two hosts: rank 5 fails at step 10 with a NaN loss, its
    peers die of the lost connection; its digest built as the finalizer builds it."""
    outputs = tmp_path_factory.mktemp("digested") / "outputs"
    path = make_run(
        outputs,
        run_id="20260101-000000-000-tp1pp1cp1",
        state="failed",
        exit_code=1,
        sizes={"tp": 1},
        ranks=RANKS,
        steps=STEPS,
        created=time.time() - 600,
        failing_rank=FAILING,
    )
    write_digest(path, build_digest(path))
    return path


def test_the_child_interpreter_hands_back_what_the_digest_holds(run: Path) -> None:
    here = read_digested(run)
    apart = read_apart(run, apart_bytes=0)  # a child whatever the size
    assert isinstance(here, Digested) and isinstance(apart, Digested)
    assert apart.world == here.world == RANKS
    assert apart.status == here.status and apart.host == here.host
    assert apart.last_line == here.last_line and apart.telemetry == here.telemetry
    assert apart.step == here.step == STEPS // 2 and apart.loss == here.loss
    assert np.array_equal(
        apart.metrics.bands.tables["total"], here.metrics.bands.tables["total"], equal_nan=True
    )


def test_a_torn_or_missing_digest_is_none(run: Path, tmp_path: Path) -> None:
    assert read_apart(tmp_path) is None
    copy = tmp_path / run.name
    RunDir(copy).make_folders()
    data = RunDir(run).digest_json.read_bytes()
    RunDir(copy).digest_json.write_bytes(data[: len(data) // 2])
    assert read_apart(copy, apart_bytes=0) is None and read_apart(copy) is None


def test_the_settled_store_answers_as_the_store_that_read_every_file(run: Path) -> None:
    digested = read_digested(run)
    assert digested is not None
    store = MetricStore.settled(digested.metrics, own_file_loader(run), digested.records)
    read = load_store(run)  # every rank's file folded: past 64 ranks, lean too
    assert store.lean and read.lean
    assert store.names() == read.names()
    for metric in read.names():
        assert store.ranks(metric) == read.ranks(metric)
        assert store.first_step(metric) == read.first_step(metric)
        ours, theirs = store.band(metric), read.band(metric)
        assert np.array_equal(ours.x, theirs.x)
        for a, b in ((ours.mean, theirs.mean), (ours.lo, theirs.lo), (ours.hi, theirs.hi)):
            assert np.allclose(a, b, equal_nan=True)
        for step in (0, STEPS // 2):
            assert store.across(metric, step) == pytest.approx(read.across(metric, step))
    assert math.isclose(store.start_time, read.start_time)
    # The last finite loss of every rank, at its last step (the failing rank's was NaN).
    for rank in (0, FAILING, RANKS - 1):
        ours, theirs = store.at_step("loss", rank, STEPS // 2), read.at_step("loss", rank, 10)
        if theirs is not None and math.isfinite(theirs[0]):
            assert ours == theirs
    assert store.nonfinite("loss") == {}  # the digest keeps last finite values: read the rank
    assert store.series("loss", FAILING)[1].size == 0 and store.wanted() == {FAILING}
    data = store.read_rank(FAILING)
    assert data is not None and store.install(FAILING, data)
    assert store.series("loss", FAILING)[1].size == STEPS // 2 + 1
    assert FAILING in store.nonfinite("loss")  # its NaN, from its file


def test_the_rank_rows_are_the_digest_s(run: Path) -> None:
    digested = read_digested(run)
    assert digested is not None
    monitor = RunMonitor(run)
    monitor.settle(settled(digested, read_state(run)))
    assert sorted(monitor.ranks) == list(range(RANKS))
    failed = monitor.ranks[FAILING]
    assert failed.status == RankState.FAILED and failed.exit_code == 1
    assert monitor.first_failure == FAILING
    assert monitor.ranks[RANKS - 1].host.startswith("x3005c0s19b0n0")
    assert monitor.ranks[0].last_line == digested.last_line[0]
    assert monitor.run_state is not None and not monitor.run_state.live
    assert not monitor.telemetry  # these ranks wrote none (the app's test reads a real run's)
    assert monitor.steps.recent(7) == digested.step_time[7] is not None
    assert monitor.lines_of(3) is monitor.lines_of(3) and not monitor.lines_of(3)


def test_shown_files_reads_each_shown_rank_once(run: Path) -> None:
    shown = [0, LAUNCHER]
    files = ShownFiles(run, lambda: shown, log_backlog=1 << 16)
    batch = files.poll()
    assert {r.rank for r in batch.logs} == {0, LAUNCHER} and batch.launcher
    assert files.opened == [RunDir(run).log(0), RunDir(run).launcher_log]  # no telemetry here
    before = fscalls.total()
    assert not files.poll() and fscalls.total() == before  # nothing new shown: no call at all
    shown.append(FAILING)
    batch = files.poll()
    assert {r.rank for r in batch.logs} == {FAILING}
    assert not batch.launcher and RunDir(run).log(FAILING) in files.opened
    texts = [t for lines in batch.logs for t in lines.lines.texts]
    assert RunDir(run).log(FAILING).read_text().splitlines()[-1] == texts[-1]
