"""ezpz's own run directories: found, their logs by rank, their state from what is there, and
their cross-rank statistics folded into the metric they describe.

Run directories come from :func:`tests.fixtures.ezpz_runs.make_ezpz_run` (ezpz's exact shapes).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np

from ezpz_tui.core.launching.elsewhere import Refused, stoppable
from ezpz_tui.core.runs.ezpz_layout import (
    RUNNING_WITHIN_S,
    ezpz_logs,
    ezpz_state,
    is_ezpz_run,
    last_step,
)
from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.store import RunStore
from ezpz_tui.core.watching.followers import RunFollower
from ezpz_tui.core.watching.metrics.aggregated import folded, statistic_of
from ezpz_tui.core.watching.metrics.load import load_store
from ezpz_tui.core.watching.metrics.one_metric import read_metric
from ezpz_tui.core.watching.metrics.store import MetricStore
from ezpz_tui.core.watching.monitor import RunMonitor
from runtime.records import Record
from runtime.rundir import RankState, State
from tests.fixtures.cli import base_env, cli
from tests.fixtures.ezpz_runs import MODULE, TIMESTAMP, ezpz_loss, make_ezpz_run, make_history_run
from tests.fixtures.runs import make_run

# --- layout -----------------------------------------------------------------------------------


def test_an_ezpz_run_is_told_from_one_of_ours(tmp_path: Path) -> None:
    ezpz = make_ezpz_run(tmp_path / "outputs")
    ours = make_run(
        tmp_path / "ours",
        run_id="20261122-101010-000-tp1pp1cp1",
        state="succeeded",
        exit_code=0,
        sizes={"tp": 1},
        ranks=2,
        steps=5,
        created=1_795_352_400.0,
    )
    assert is_ezpz_run(ezpz) and not is_ezpz_run(ours)
    assert ezpz_logs(ours) == [], "our launcher.log is no rank's console log"
    assert not is_ezpz_run(tmp_path / "missing")


def test_rank_zeros_console_log_is_found_when_that_is_all_there_is(tmp_path: Path) -> None:
    run = make_ezpz_run(tmp_path)
    assert ezpz_logs(run) == [(run / f"{MODULE}.log", 0)]


def test_per_rank_logs_are_found_by_rank(tmp_path: Path) -> None:
    run = make_ezpz_run(tmp_path, ranks=3, rank_logs=True)
    (run / "2026-11-22-101010.log").write_text("a timestamp is no rank\n")
    found = ezpz_logs(run)
    assert found == [(run / f"output-{rank}.log", rank) for rank in range(3)]


def test_the_follower_reads_an_ezpz_console_log_as_rank_zero(tmp_path: Path) -> None:
    run = make_ezpz_run(tmp_path)
    batch = RunFollower(run).poll()
    texts = [text for chunk in batch.logs if chunk.rank == 0 for text in chunk.lines.texts]
    assert any("Saving history report to" in text for text in texts)
    assert any(t.startswith("[2026-11-22 ") and "][I][ezpz/dist:1159] " in t for t in texts)
    assert {chunk.rank for chunk in batch.logs} == {0}


# --- state ------------------------------------------------------------------------------------


def test_a_finished_history_is_succeeded_with_its_last_step(tmp_path: Path) -> None:
    run = make_ezpz_run(tmp_path, train_iters=20)
    state = ezpz_state(run)
    assert state is not None and state.state == State.SUCCEEDED
    assert state.reason == "ezpz run: finished at step 19 (its History wrote report.md)"
    assert run_state(run).state == State.SUCCEEDED  # what the runs list and the TUI ask


def test_running_only_while_files_change(tmp_path: Path) -> None:
    now = time.time()
    run = make_ezpz_run(tmp_path, finished=False, start=now - 12)
    state = ezpz_state(run, now)
    assert state is not None and state.state == State.RUNNING
    later = ezpz_state(run, now + RUNNING_WITHIN_S + 5)
    assert later is not None and later.state == State.UNKNOWN
    assert later.reason is not None and "no end recorded, nothing written for" in later.reason


def test_an_old_unfinished_run_is_not_called_running(tmp_path: Path) -> None:
    run = make_ezpz_run(tmp_path, finished=False)
    state = run_state(run)
    assert state.state == State.UNKNOWN
    assert state.reason is not None and state.reason.startswith("ezpz run: no end recorded")


def test_a_running_ezpz_run_is_not_ours_to_stop(tmp_path: Path) -> None:
    run = make_ezpz_run(tmp_path, finished=False, start=time.time())
    refused = stoppable(run)
    assert isinstance(refused, Refused)
    assert refused.reason.startswith(f"{run.name} was not started by ezpz-tui: ezpz run: files")


def test_last_step_of_step_less_records_counts_the_records(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    lines = [json.dumps({"rank": r, "metrics": {"loss": 1.0}}) for _ in range(7) for r in (0, 1)]
    path.write_text("\n".join(lines) + "\n")
    assert last_step([path]) == 6
    assert last_step([tmp_path / "missing.jsonl"]) is None


def test_runs_lists_ezpz_runs_below_their_module_with_their_state(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    make_ezpz_run(outputs)
    make_ezpz_run(outputs, timestamp="2026-11-22-111111", finished=False)
    runs = {r.run_id: r.state for r in RunStore(outputs).list_runs()}
    assert runs == {
        f"{MODULE}/{TIMESTAMP}": State.SUCCEEDED,
        f"{MODULE}/2026-11-22-111111": State.UNKNOWN,
    }
    deep = outputs / MODULE / "datasets" / "mnist" / "raw"  # ezpz's dataset root: no run
    deep.mkdir(parents=True)
    (deep / "metrics.jsonl").write_text('{"loss": 1.0}\n')
    assert len(RunStore(outputs).list_runs()) == 2
    done = cli(["runs"], base_env(outputs))
    assert done.returncode == 0, done.stderr
    row = next(line for line in done.stdout.splitlines() if TIMESTAMP in line)
    assert row.split()[:2] == [f"{MODULE}/{TIMESTAMP}", "succeeded"]


def test_a_history_left_to_its_defaults_is_a_run_too(tmp_path: Path) -> None:
    run = make_history_run(tmp_path, ranks=2, train_iters=10)
    listed = RunStore(tmp_path).list_runs()
    assert [(r.run_id, r.state) for r in listed] == [("history/20261122-101010", State.UNKNOWN)]
    store = load_store(run)
    assert store.names() == ["loss", "accuracy", "dtb", "dtf", "iter"]
    assert store.ranks("loss") == [0, 1] and store.points(1) == 9


# --- aggregated metrics -------------------------------------------------------------------------


def test_statistics_of_a_present_metric_are_folded_away() -> None:
    names = {"loss", "loss/mean", "aggregated/loss/max", "lr/max", "acc/p90", "iter/std", "iter"}
    assert statistic_of("aggregated/loss/max", names) == "loss"
    assert statistic_of("lr/max", names) is None  # no lr: a metric of its own
    assert sorted(folded(names)) == ["acc/p90", "iter", "loss", "lr/max"]


def test_an_ezpz_run_lists_loss_once_with_the_aggregated_band(tmp_path: Path) -> None:
    store = load_store(make_ezpz_run(tmp_path, ranks=3))
    names = store.names()
    assert names[0] == "loss" and names.count("loss") == 1
    assert not any("/" in name for name in names), names
    band = store.band("loss")
    losses = [[ezpz_loss(i, r) for r in range(3)] for i in range(1, 20)]
    assert np.allclose(band.lo, [min(row) for row in losses])
    assert np.allclose(band.hi, [max(row) for row in losses])
    assert np.allclose(band.mean, [sum(row) / 3 for row in losses])


def test_the_aggregated_band_covers_ranks_whose_records_are_not_here() -> None:
    """Rank 0's all-reduce saw 8 ranks; only ranks 0 and 1 are in the file: the band is the
    recorded one where it was recorded, the ranks' own envelope elsewhere."""
    store = MetricStore()
    for step in range(4):
        stats = {"aggregated/loss/min": 0.5, "aggregated/loss/max": 9.0, "loss/mean": 3.0}
        rank0 = {"loss": 2.0} | (stats if step < 3 else {})
        store.add(0, [Record(0, step, 100.0 + step, rank0)])
        store.add(1, [Record(1, step, 100.0 + step, {"loss": 4.0})])
    band = store.band("loss")
    assert band.lo.tolist() == [0.5, 0.5, 0.5, 2.0]
    assert band.hi.tolist() == [9.0, 9.0, 9.0, 4.0]
    assert band.mean.tolist() == [3.0, 3.0, 3.0, 3.0]
    timed = store.band("loss", "time")
    assert timed.lo.tolist() == band.lo.tolist() and timed.x.tolist()[0] == 100.0
    assert store.names() == ["loss"]


# --- ranks ------------------------------------------------------------------------------------


def test_ezpz_ranks_share_the_runs_end_as_its_files_give_it(tmp_path: Path) -> None:
    """No status files: a finished run's ranks are succeeded, a still one's idle, at once."""
    for finished, word in ((True, RankState.SUCCEEDED), (False, RankState.IDLE)):
        run = make_ezpz_run(tmp_path / str(finished), finished=finished, rank_logs=True)
        monitor = RunMonitor(run)
        monitor.run_state = run_state(run)
        follower, now = RunFollower(run), time.time()
        monitor.apply(monitor.prepare(follower.poll()), now)
        assert [monitor.state_of(rank, now) for rank in (0, 1)] == [word, word]


def test_plot_names_an_ezpz_runs_metrics_without_their_statistics(tmp_path: Path) -> None:
    run = make_ezpz_run(tmp_path)
    why = read_metric(run, "nope").why_nothing(run.name)
    assert why == f"no metric 'nope' in {run.name}; metrics: accuracy, dtb, dtf, iter, loss"
