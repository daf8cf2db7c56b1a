"""A store past KEEP_ALL_RANKS ranks (issue 34): the bands and each rank's last values folded in
as batches arrive, a rank's series read from its file when it is shown. Each lean store here is
checked against a store holding every series, fed the same batches."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from ezpz_tui.core.watching.followers import RunFollower
from ezpz_tui.core.watching.metrics.cursor import readout
from ezpz_tui.core.watching.metrics.load import load_store, rank_loader
from ezpz_tui.core.watching.metrics.plot import PlotSettings, prepare_plot
from ezpz_tui.core.watching.metrics.store import (
    KEEP_ALL_RANKS,
    LOADED_RANKS,
    MetricStore,
    XAxis,
)
from runtime.record_columns import MISSING, RecordColumns
from tests.fixtures.runs import make_run

RANKS = KEEP_ALL_RANKS + 36
STEPS = 40


def batch(rank: int, steps: range) -> RecordColumns:
    """One rank's records at ``steps``: a loss that differs by rank (NaN on rank 7 from step 30,
    inf on rank 9 at step 12), an lr, and a grad norm only from step 10."""
    loss = [2.0 + math.sin(rank + s / 7) - s / 50 for s in steps]
    loss = [
        math.nan if rank == 7 and s >= 30 else math.inf if rank == 9 and s == 12 else v
        for s, v in zip(steps, loss, strict=True)
    ]
    return RecordColumns(
        rank,
        list(steps),
        [1000.0 + s + rank / 1000 for s in steps],
        {
            "loss": loss,
            "lr": [1e-3] * len(steps),
            "grad_norm": [float(s % 5) if s >= 10 else MISSING for s in steps],
        },
    )


def batches(ranks: int = RANKS) -> Iterator[tuple[int, RecordColumns]]:
    """What the follower brings: every rank a slice at a time, rank 3 starting behind the
    others (its first steps come last: the band makes room before its first step)."""
    for start in range(0, STEPS, 10):
        for rank in range(ranks):
            first = 5 if rank == 3 and start == 0 else start
            yield rank, batch(rank, range(first, start + 10))
    yield 3, batch(3, range(-5, 5))  # a rank that logged earlier steps late (a resume)


def stores(ranks: int = RANKS) -> tuple[MetricStore, MetricStore, dict[int, list[RecordColumns]]]:
    """A store holding every series, and a lean one with a loader over the same records."""
    files: dict[int, list[RecordColumns]] = {}
    full, lean = MetricStore(), MetricStore(lambda rank: files[rank])
    for rank, columns in batches(ranks):
        full.add(rank, columns)
        lean.add(rank, columns)
        files.setdefault(rank, []).append(columns)
    return full, lean, files


def same_band(lean: MetricStore, full: MetricStore, metric: str, x: XAxis = "step") -> None:
    """Equal bands; the means to the last bits the order of summing leaves (ranks are summed
    as their batches arrive, not rank after rank). A lean band may lack a step where no rank
    logged the metric (a rank's records before it first logged it are not kept): the full
    band is NaN there."""
    kept = np.isin(full.band(metric).x, lean.band(metric).x)
    got, want = lean.band(metric, x), full.band(metric, x)
    assert np.isnan(want.mean[~kept]).all() and np.isnan(want.hi[~kept]).all()
    for part in ("lo", "hi"):
        np.testing.assert_array_equal(getattr(got, part), getattr(want, part)[kept])
    np.testing.assert_allclose(got.mean, want.mean[kept], rtol=1e-14)
    # On the time axis a step's time is its earliest record's; where no rank logged the
    # metric, the full band has the time of records the lean one never kept.
    logged = slice(None) if x == "step" else ~np.isnan(got.hi)
    np.testing.assert_array_equal(got.x[logged], want.x[kept][logged])


def test_the_lean_band_is_the_band_of_every_series() -> None:
    full, lean, _ = stores()
    assert lean.lean and not full.lean
    assert len(lean.band("loss").x) == len(full.band("loss").x) == STEPS + 5
    for metric in ("loss", "lr", "grad_norm"):
        for x in ("step", "time"):
            same_band(lean, full, metric, x)
    assert lean.names() == full.names() == ["loss", "grad_norm", "lr"]
    assert lean.ranks("loss") == full.ranks("loss") == list(range(RANKS))
    assert lean.count == full.count and lean.start_time == full.start_time
    assert [lean.points(r) for r in range(RANKS)] == [full.points(r) for r in range(RANKS)]
    bad = {r: (b.count, b.step, b.timestamp) for r, b in lean.nonfinite("loss").items()}
    assert bad == {r: (b.count, b.step, b.timestamp) for r, b in full.nonfinite("loss").items()}
    assert bad == {7: (10, 30, 1030.007), 9: (1, 12, 1012.009)}
    assert lean.first_step("grad_norm") == full.first_step("grad_norm") == 10
    assert lean.first_step("loss") == full.first_step("loss") == 0  # in record order


def test_a_rank_read_on_demand_is_what_the_full_store_held() -> None:
    full, lean, _ = stores()
    assert lean.series("loss", 3)[0].size == 0  # not held: asked for
    assert lean.wanted() == {3}
    assert lean.install(3, lean.read_rank(3))
    assert lean.wanted() == set()
    for metric in ("loss", "grad_norm"):
        for x in ("step", "time"):
            for got, want in zip(lean.series(metric, 3, x), full.series(metric, 3, x), strict=True):
                np.testing.assert_array_equal(got, want)
        for got, want in zip(lean.timed_steps(metric, 3), full.timed_steps(metric, 3), strict=True):
            np.testing.assert_array_equal(got, want)
    assert lean.at_step("loss", 3, 17) == full.at_step("loss", 3, 17)
    # A rank not held answers at its last step only.
    assert lean.at_step("loss", 4, STEPS - 1) == full.at_step("loss", 4, STEPS - 1)
    assert lean.at_step("loss", 4, 17) is None


def test_a_shown_rank_keeps_growing_and_a_short_read_is_refused() -> None:
    _, lean, files = stores()
    lean.series("loss", 5)
    short = MetricStore(lambda rank: files[rank][:2]).read_rank(5)
    assert short is not None and not lean.install(5, short)
    assert lean.wanted() == {5}  # read again
    assert lean.install(5, lean.read_rank(5))
    lean.add(5, batch(5, range(STEPS, STEPS + 3)))
    steps, loss = lean.series("loss", 5)
    assert steps[-4:].tolist() == [STEPS - 1, STEPS, STEPS + 1, STEPS + 2]
    assert loss[-1] == batch(5, range(STEPS + 2, STEPS + 3)).metrics["loss"][0]


def test_only_the_ranks_shown_last_are_held() -> None:
    _, lean, _ = stores()
    for rank in range(LOADED_RANKS + 3):
        lean.series("loss", rank)
        assert lean.install(rank, lean.read_rank(rank))
    held = [r for r in range(RANKS) if lean.series("loss", r)[0].size]
    assert held == list(range(3, LOADED_RANKS + 3))


def test_memory_grows_with_steps_and_ranks_not_their_product() -> None:
    """The arrays of a lean store are the bands': the same at 4x the ranks; the full store's
    are every rank's series: 4x."""
    small_full, small_lean, _ = stores(KEEP_ALL_RANKS + 1)
    big_full, big_lean, _ = stores(4 * (KEEP_ALL_RANKS + 1))
    assert big_lean.nbytes == small_lean.nbytes
    assert big_full.nbytes == 4 * small_full.nbytes
    assert big_lean.nbytes < big_full.nbytes / 40


def test_small_runs_and_stores_without_a_loader_hold_everything() -> None:
    full, lean, _ = stores(KEEP_ALL_RANKS)
    assert not lean.lean and lean.nbytes == full.nbytes
    assert lean.series("loss", 3)[0].size and lean.wanted() == set()
    unread = MetricStore()
    for rank, columns in batches():
        unread.add(rank, columns)
    assert not unread.lean


def test_the_readout_across_ranks_comes_from_the_band() -> None:
    full, lean, _ = stores()
    settings = PlotSettings("loss", mode="band")
    got, want = readout(lean, settings, 20), readout(full, settings, 20)
    assert [label for label, _ in got.values] == [label for label, _ in want.values]
    assert [v for _, v in got.values] == pytest.approx([v for _, v in want.values], rel=1e-14)
    assert got.time == want.time
    one = PlotSettings("loss", mode="rank", rank=4)
    lean.series("loss", 4)
    lean.install(4, lean.read_rank(4))
    assert readout(lean, one, 20).values == readout(full, one, 20).values


def test_a_plot_of_a_rank_not_held_says_it_is_read(tmp_path: Path) -> None:
    _, lean, _ = stores()
    drawing = prepare_plot(lean, {}, PlotSettings("loss", rank=11), 60)
    assert drawing.message == "reading rank 11's loss from its file…"
    assert lean.install(11, lean.read_rank(11))
    drawing = prepare_plot(lean, {}, PlotSettings("loss", rank=11), 60)
    assert drawing.shown == "rank 11" and drawing.traces


def test_a_run_directory_reads_a_rank_as_the_follower_brought_it(tmp_path: Path) -> None:
    run = make_run(
        tmp_path,
        run_id="20261128-110000-000-tp1pp1cp1",
        state="failed",
        exit_code=1,
        sizes={},
        ranks=RANKS,
        steps=12,
        created=1795350000.0,
        failing_rank=5,
    )
    followed, full = MetricStore(rank_loader(run)), MetricStore()
    for rank, columns in RunFollower(run).poll().records.items():
        followed.add(rank, columns)
        full.add(rank, columns)
    assert followed.lean
    followed.series("loss", 5)
    assert followed.install(5, followed.read_rank(5))
    for got, want in zip(followed.series("loss", 5), full.series("loss", 5), strict=True):
        np.testing.assert_array_equal(got, want)
    overlay = load_store(run)  # an earlier run overlaid: its bands only
    assert overlay.lean
    same_band(overlay, full, "loss")


def test_a_step_logged_twice_counts_twice_as_in_the_full_band() -> None:
    """A resumed rank logs steps again, in one batch: each record is folded, as the full
    store's band (sorting the union) counts it."""
    full, lean, _ = stores()
    again = batch(8, range(30, 35))
    again.steps[2:] = [30, 31, 32]  # steps 30, 31, 30, 31, 32
    again.metrics["loss"][2:] = [9.0, -9.0, 1.5]
    for store in (full, lean):
        store.add(8, again)
    same_band(lean, full, "loss")
    assert lean.band("loss").hi[lean.band("loss").x.tolist().index(30)] == 9.0
    assert lean.across("loss", 31) is not None and lean.across("loss", 31).lo_rank == 8
