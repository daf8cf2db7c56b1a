"""Attaching to a run directory ezpz itself wrote (tests/fixtures/ezpz_runs.py: its exact
layout, records and log format): its log lines shown, its finished state with the last step,
and ``loss`` listed once with the cross-rank band ezpz recorded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ezpz_tui import config
from ezpz_tui.core.watching.monitor import TEXT
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.logview import LogView
from ezpz_tui.ui.widgets.metrics import MetricsView
from ezpz_tui.ui.widgets.panels import SummaryBar
from ezpz_tui.ui.widgets.ranks import RankList
from tests.fixtures.ezpz_runs import START, ezpz_loss, make_ezpz_run
from tests.pilots import LOCAL, started, text_of, until

SIZE = (120, 40)


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "config"
    path.mkdir()
    monkeypatch.setenv(config.ENV_CONFIG_DIR, str(path))


async def test_attach_an_ezpz_run_shows_its_log_its_end_and_loss_once(tmp_path: Path) -> None:
    run = make_ezpz_run(tmp_path / "outputs", ranks=3, train_iters=20)
    app = EzpzApp(outputs=run.parent, alloc=LOCAL, clock=lambda: START, checks=[], attach=run)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        log, ranks = app.query_one(LogView), app.query_one(RankList)
        await until(pilot, lambda: len(log.lines) > 20, "rank 0's console log", 10)
        texts = [line[TEXT] for line in log.lines]
        assert log.rank == 0
        assert any("][I][ezpz/history:1923] Saving history report to" in t for t in texts)
        assert any("iter=19 loss=" in t for t in texts)

        summary = app.query_one(SummaryBar)
        await until(pilot, lambda: "step 19" in text_of(summary), "the last step", 10)
        await until(pilot, lambda: "● succeeded" in text_of(summary), "its end", 10)
        await until(pilot, lambda: {0, 1, 2} <= set(ranks.rows), "the three ranks listed", 10)
        rows = [ranks.render_row(ranks.row_of(rank)).plain for rank in range(3)]
        assert [row.split()[:2] for row in rows] == [[str(r), "finished"] for r in range(3)]

        view = app.query_one(MetricsView)
        await until(pilot, lambda: view.current_metric() == "loss", "the loss metric", 10)
        await until(
            pilot,
            lambda: view.store is not None and view.store.points(2) == 19,
            "rank 2's records",
            10,
        )
        names = view._names()
        assert names.count("loss") == 1 and "accuracy" in names
        assert not [n for n in names if n.startswith("aggregated/") or n.endswith("/mean")]
        assert view.store is not None
        band = view.store.band("loss")
        per_step = [[ezpz_loss(i, r) for r in range(3)] for i in range(1, 20)]
        assert np.allclose(band.lo, [min(v) for v in per_step])
        assert np.allclose(band.hi, [max(v) for v in per_step])
