"""The UI-free metric store and plotting tools: columnar series, the cross-rank band (checked
against xarray), decimation, smoothing, log10, reading earlier runs (ours and ezpz's layout),
and what a plot is given to draw."""

from __future__ import annotations

import itertools
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ezpz_tui.core.watching.metrics.decimate import decimate, envelope
from ezpz_tui.core.watching.metrics.ema import ema
from ezpz_tui.core.watching.metrics.load import load_store
from ezpz_tui.core.watching.metrics.plot import (
    ALL_RANKS_LIMIT,
    PlotSettings,
    prepare_plot,
    safe_log10,
)
from ezpz_tui.core.watching.metrics.store import MetricStore
from runtime import records
from runtime.history import load_run_metrics
from runtime.records import Record
from tests.fixtures.runs import make_run


def recs(rank: int, steps: range, **series: list[float]) -> list[Record]:
    """Records of ``rank`` at ``steps``; each keyword is a metric with one value per step
    (NaN in a list leaves a real NaN; ``None`` leaves the metric out of that record)."""
    out = []
    for i, step in enumerate(steps):
        metrics = {k: v[i] for k, v in series.items() if v[i] is not None}
        out.append(Record(rank, step, 1000.0 + step, metrics))
    return out


def reference_ema(y: list[float], alpha: float) -> list[float]:
    out, state = [], y[0]
    for value in y:
        state = alpha * state + (1 - alpha) * value
        out.append(state)
    return out


# --- the store ----------------------------------------------------------------------------------


def test_add_keeps_columns_per_rank_and_numbers_stepless_records() -> None:
    store = MetricStore()
    store.add(1, recs(1, range(3), loss=[3.0, 2.0, 1.0], lr=[0.1, 0.1, 0.1]))
    v1 = store.version
    ezpz = [Record(0, None, None, {"loss": float(i), "acc": 0.5}) for i in range(4)]
    store.add(0, ezpz)
    assert store.version > v1
    assert store.names() == ["loss", "acc", "lr"]  # loss first, then sorted
    assert store.ranks() == [0, 1] and store.ranks("lr") == [1]
    assert store.count == 7 and store.points(0) == 4
    assert store.series("loss", 0)[0].tolist() == [
        0,
        1,
        2,
        3,
    ]  # as runtime.records.number_steps numbers them
    store.add(0, [Record(0, None, None, {"loss": 9.0})])
    assert store.series("loss", 0)[0].tolist() == [0, 1, 2, 3, 4]
    assert store.series("nope", 0)[1].size == 0 and store.series("loss", 7)[1].size == 0


def test_series_are_views_until_something_must_be_left_out() -> None:
    store = MetricStore()
    store.add(0, recs(0, range(4), loss=[1.0, 2.0, 3.0, 4.0], lr=[0.1, None, 0.1, None]))
    x, y = store.series("loss", 0)
    x2, y2 = store.series("loss", 0)
    assert np.shares_memory(y, y2) and np.shares_memory(x, x2)
    x, y = store.series("lr", 0)  # gaps are dropped, not shown as NaN
    assert x.tolist() == [0, 2] and y.tolist() == [0.1, 0.1]


def test_a_real_nan_is_kept_apart_from_a_gap() -> None:
    """The JSONL reader turns "NaN" into float NaN: it must survive next to missing values."""
    line = records.encode(0, 2, {"loss": records.to_plain(math.nan)}, 1002.0)
    nan_record = records.decode(line)
    assert nan_record is not None and math.isnan(nan_record.metrics["loss"])
    store = MetricStore()
    store.add(0, recs(0, range(2), loss=[1.0, None]))
    store.add(0, [nan_record, *recs(0, range(3, 5), loss=[math.inf, 0.5])])
    x, y = store.series("loss", 0)
    assert x.tolist() == [0, 2, 3, 4]
    assert y[0] == 1.0 and math.isnan(y[1]) and y[2] == math.inf and y[3] == 0.5
    bad = store.nonfinite("loss")
    assert list(bad) == [0]
    assert bad[0].count == 2 and bad[0].step == 2 and bad[0].timestamp == 1002.0
    assert math.isnan(bad[0].value)


def test_reset_forgets_a_rank_and_its_bands() -> None:
    store = MetricStore()
    store.add(0, recs(0, range(5), loss=[5.0] * 5))
    store.add(1, recs(1, range(5), loss=[1.0] * 5))
    assert store.band("loss").mean.tolist() == [3.0] * 5
    version = store.version
    store.reset(0)
    assert store.version > version and store.ranks() == [1] and store.count == 5
    assert store.band("loss").mean.tolist() == [1.0] * 5
    store.add(0, recs(0, range(2), loss=[3.0, 3.0]))  # the file began again
    assert store.band("loss").mean.tolist() == [2.0, 2.0, 1.0, 1.0, 1.0]


def test_time_axis_counts_from_the_first_record() -> None:
    store = MetricStore()
    store.add(0, [Record(0, 0, 50.0, {"loss": 1.0}), Record(0, 1, None, {"loss": 2.0})])
    store.add(1, [Record(1, 0, 40.0, {"loss": 1.0})])
    assert store.start_time == 40.0
    x, y = store.series("loss", 0, "time")  # the record without a timestamp is left out
    assert x.tolist() == [50.0] and y.tolist() == [1.0]
    assert math.isnan(MetricStore().start_time)


# --- the band -----------------------------------------------------------------------------------


def _random_chunks(rng: np.random.Generator, ranks: int, steps: int) -> list:
    """Ranks with staggered starts and ends, gaps and NaNs, in chunks that interleave the
    ranks as a follower delivers them (each rank's chunks in order)."""
    queues = []
    for rank in range(ranks):
        start = int(rng.integers(0, 5))
        count = steps - int(rng.integers(0, 5))
        values: list[float | None] = list(rng.normal(size=count))
        for i in rng.choice(count, size=count // 10, replace=False):
            values[i] = None if rng.random() < 0.5 else math.nan
        records_ = recs(rank, range(start, start + count), loss=values, dt=[0.1] * count)
        cuts = [0, *sorted(rng.choice(range(1, count), size=3, replace=False)), count]
        queues.append([(rank, records_[a:b]) for a, b in itertools.pairwise(cuts)])
    chunks = []
    while any(queues):
        queue = queues[int(rng.choice([i for i, q in enumerate(queues) if q]))]
        chunks.append(queue.pop(0))
    return chunks


@pytest.mark.parametrize("seed", range(5))
def test_band_matches_xarray_while_data_streams(seed: int) -> None:
    """The folded band, updated chunk by chunk, equals xarray's skipna mean/min/max of all the
    data at every point; on the time axis each step sits at its earliest timestamp."""
    rng = np.random.default_rng(seed)
    store = MetricStore()
    for n, (rank, part) in enumerate(chunks := _random_chunks(rng, ranks=4, steps=60)):
        store.add(rank, part)
        if n % 3 and n != len(chunks) - 1:
            continue
        band = store.band("loss")
        da = store.to_xarray("loss")
        assert band.x.tolist() == da["step"].values.astype(float).tolist()
        with warnings.catch_warnings():  # xarray warns about steps where every rank is NaN
            warnings.simplefilter("ignore", RuntimeWarning)
            np.testing.assert_allclose(band.mean, da.mean("rank", skipna=True).values)
            np.testing.assert_array_equal(band.lo, da.min("rank", skipna=True).values)
            np.testing.assert_array_equal(band.hi, da.max("rank", skipna=True).values)
    timed = store.band("loss", "time")
    assert timed.x.tolist() == [1000.0 + s for s in store.band("loss").x.tolist()]


def test_band_of_a_resumed_run_aligns_repeated_steps() -> None:
    """A rank that resumed from a checkpoint logs steps 3-4 twice: the band sorts the union
    and averages every value logged at a step."""
    store = MetricStore()
    store.add(0, recs(0, range(5), loss=[1.0, 1.0, 1.0, 1.0, 1.0]))
    store.add(0, recs(0, range(3, 6), loss=[3.0, 3.0, 3.0]))
    store.add(1, recs(1, range(6), loss=[2.0] * 6))
    band = store.band("loss")
    assert band.x.tolist() == [0, 1, 2, 3, 4, 5]
    assert band.mean.tolist() == [1.5, 1.5, 1.5, 2.0, 2.0, 2.5]
    assert band.lo.tolist() == [1.0, 1.0, 1.0, 1.0, 1.0, 2.0]
    assert band.hi.tolist() == [2.0, 2.0, 2.0, 3.0, 3.0, 3.0]
    da = store.to_xarray("loss")  # the later value of a repeated step wins
    assert da.sel(rank=0).values.tolist() == [1.0, 1.0, 1.0, 3.0, 3.0, 3.0]


def test_band_arrays_are_read_only() -> None:
    store = MetricStore()
    store.add(0, recs(0, range(3), loss=[1.0, 2.0, 3.0]))
    with pytest.raises(ValueError):
        store.band("loss").mean[0] = 0.0


def test_to_xarray_is_rank_by_step_with_nan_for_gaps() -> None:
    store = MetricStore()
    store.add(2, recs(2, range(3), loss=[1.0, None, 3.0]))
    store.add(0, recs(0, range(1, 4), loss=[4.0, 5.0, 6.0]))
    da = store.to_xarray("loss")
    assert da.dims == ("rank", "step") and da.name == "loss"
    assert da["rank"].values.tolist() == [0, 2] and da["step"].values.tolist() == [0, 1, 2, 3]
    assert np.array_equal(
        da.values, [[np.nan, 4.0, 5.0, 6.0], [1.0, np.nan, 3.0, np.nan]], equal_nan=True
    )
    assert math.isnan(float(da.values[1, 1]))  # an ordinary NaN, whatever the store keeps


# --- decimation, smoothing, log -----------------------------------------------------------------


def test_decimate_keeps_spikes_and_order() -> None:
    x = np.arange(100_000)
    y = np.sin(x / 5000.0)
    y[31_337] = 40.0
    y[77_001] = -40.0
    xd, yd = decimate(x, y, 200)
    assert len(xd) <= 200
    assert 40.0 in yd and -40.0 in yd
    assert 31_337 in xd and 77_001 in xd
    assert np.all(np.diff(xd) > 0)
    small = np.arange(10.0)
    assert decimate(small, small, 20)[1] is small  # nothing to do: the inputs come back
    with pytest.raises(ValueError):
        decimate(x, y, 2)


def test_decimate_keeps_a_nan_visible() -> None:
    y = np.linspace(1.0, 2.0, 100_000)
    y[54_321] = np.nan
    xd, yd = decimate(np.arange(len(y)), y, 300)
    assert len(xd) <= 300
    assert np.isnan(yd).sum() == 1 and xd[np.isnan(yd)][0] == 54_321
    assert yd[np.isfinite(yd)].min() == 1.0 and yd[np.isfinite(yd)].max() == 2.0


finite_or_not = st.floats(allow_nan=True, allow_infinity=True, width=64)


@settings(max_examples=300, deadline=None)
@given(
    y=hnp.arrays(np.float64, st.integers(0, 700), elements=finite_or_not),
    max_points=st.integers(3, 60),
)
def test_decimate_bounds_points_and_keeps_extremes(y: np.ndarray, max_points: int) -> None:
    x = np.arange(len(y))
    xd, yd = decimate(x, y, max_points)
    assert len(xd) == len(yd) == (len(y) if len(y) <= max_points else len(xd))
    assert len(xd) <= max_points or len(xd) == len(y) <= max_points
    assert np.all(np.diff(xd) > 0)  # a subsequence, in order
    assert np.array_equal(yd, y[xd], equal_nan=True)
    finite = y[np.isfinite(y)]
    kept = yd[np.isfinite(yd)]
    if finite.size:
        assert kept.min() == finite.min() and kept.max() == finite.max()
    assert (~np.isfinite(yd)).any() == (~np.isfinite(y)).any()


def test_envelope_takes_min_of_lows_and_max_of_highs() -> None:
    x = np.arange(10.0)
    lo = np.array([5, 4, 3, 2, 1, 0, np.nan, np.nan, 7, 8], dtype=float)
    hi = lo + 1
    xe, le, he = envelope(x, lo, hi, 4)  # buckets of 3: [0-2] [3-5] [6-8] [9]
    assert xe.tolist() == [0.0, 3.0, 6.0, 9.0]
    assert le.tolist() == [3.0, 0.0, 7.0, 8.0] and he.tolist() == [6.0, 3.0, 8.0, 9.0]
    _, all_nan, _ = envelope(x, np.full(10, np.nan), hi, 5)
    assert np.isnan(all_nan).all()


@pytest.mark.parametrize("alpha", [0.6, 0.9, 0.99, 0.999])
@pytest.mark.parametrize("n", [1, 63, 64, 65, 1833, 5000])
def test_ema_is_exact(alpha: float, n: int) -> None:
    y = np.random.default_rng(n).normal(size=n).cumsum() + 100.0
    np.testing.assert_allclose(ema(y, alpha), reference_ema(y.tolist(), alpha), rtol=1e-12)


def test_ema_carries_over_non_finite_values() -> None:
    y = np.array([1.0, 1.0, np.nan, 3.0, np.inf, 3.0])
    out = ema(y, 0.5)
    assert math.isnan(out[2]) and out[4] == math.inf
    finite = reference_ema([1.0, 1.0, 1.0, 3.0, 3.0, 3.0], 0.5)  # NaN -> previous value
    assert out[[0, 1, 3, 5]].tolist() == pytest.approx([finite[i] for i in (0, 1, 3, 5)])
    lead = ema(np.array([np.nan, 2.0, 4.0]), 0.5)
    assert math.isnan(lead[0]) and lead[1:].tolist() == [2.0, 3.0]
    assert ema(y, 0.0).tolist()[:2] == [1.0, 1.0]
    with pytest.raises(ValueError):
        ema(y, 1.0)


def test_safe_log10() -> None:
    out = safe_log10(np.array([100.0, 1.0, 0.0, -5.0, np.nan, 1e-3]))
    assert out[0] == 2.0 and out[1] == 0.0 and out[5] == pytest.approx(-3.0)
    assert np.isnan(out[2:5]).all()


# --- earlier runs -------------------------------------------------------------------------------


def test_load_store_reads_a_run_of_ours(tmp_path: Path) -> None:
    run = make_run(
        tmp_path,
        run_id="failed",
        state="failed",
        exit_code=1,
        sizes={"tp": 2},
        ranks=4,
        steps=40,
        created=1.79e9,
        failing_rank=3,
    )
    store = load_store(run)
    assert store.ranks() == [0, 1, 2, 3]
    assert store.names() == ["loss", "dt", "lr", "tokens_per_s"]
    assert store.count == 4 * 21  # the run failed at step 20
    assert store.nonfinite("loss")[3].step == 20
    reference = load_run_metrics(run)["loss"]
    np.testing.assert_array_equal(store.to_xarray("loss").values, reference.values)


def test_load_store_reads_ezpz_layouts(tmp_path: Path) -> None:
    """ezpz writes metrics-<rank>.jsonl without steps (and an aggregated object), or one shared
    metrics.jsonl whose records name their rank; a torn last line and garbage are skipped."""
    per_rank = tmp_path / "per-rank"
    per_rank.mkdir()
    for rank in range(2):
        lines = [
            json.dumps(
                {
                    "timestamp": 10.0 + i,
                    "rank": rank,
                    "loss": 2.0 - i / 10,
                    "aggregated": {"loss_mean": 2.0},
                }
            )
            for i in range(5)
        ]
        body = "\n".join([*lines[:2], "garbage {", *lines[2:]]) + "\n" + '{"timestamp": 1'
        (per_rank / f"metrics-{rank}.jsonl").write_text(body)
    store = load_store(per_rank)
    assert store.ranks() == [0, 1] and store.count == 10
    assert store.series("loss", 1)[0].tolist() == [0, 1, 2, 3, 4]
    assert "aggregated/loss_mean" in store.names()

    shared = tmp_path / "shared" / "logs"
    shared.mkdir(parents=True)
    rows = [{"rank": i % 3, "iter": i // 3, "loss": float(i)} for i in range(9)]
    (shared / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows))  # no final \n
    store = load_store(shared.parent)
    assert store.ranks() == [0, 1, 2]
    steps, values = store.series("loss", 2)
    assert steps.tolist() == [0, 1, 2] and values.tolist() == [2.0, 5.0, 8.0]
    assert load_store(tmp_path / "missing").count == 0


# --- what a plot is given -----------------------------------------------------------------------


def _big_store(ranks: int, steps: int) -> MetricStore:
    store = MetricStore()
    for rank in range(ranks):
        loss = [4.0 * math.exp(-s / 300) + 0.1 * rank + 0.5 for s in range(steps)]
        store.add(rank, recs(rank, range(steps), loss=loss))
    return store


def test_prepare_plot_decimates_to_about_twice_the_width() -> None:
    store = _big_store(2, 5000)
    drawing = prepare_plot(store, {}, PlotSettings("loss"), 80)
    assert [t.label for t in drawing.traces] == ["rank 0"]
    assert 80 <= drawing.drawn <= 160 and drawing.raw == 5000
    band = prepare_plot(store, {}, PlotSettings("loss", mode="band"), 80)
    assert [t.label for t in band.traces] == ["min–max", "mean"] and band.traces[0].band
    strokes = len(band.traces[0].x) // 2
    assert 80 < strokes <= 160 and len(band.traces[1].x) <= 160  # a stroke for every column
    # the first stroke: rank 0's lowest and rank 1's highest of the first 32 steps
    low, high = band.traces[0].y[:2]
    assert low == pytest.approx(4.0 * math.exp(-31 / 300) + 0.5) and high == pytest.approx(4.6)
    every = prepare_plot(store, {}, PlotSettings("loss", mode="all"), 80)
    assert [t.label for t in every.traces] == ["rank 0", "rank 1"] and every.drawn <= 160


def test_prepare_plot_with_many_ranks_draws_the_band_and_the_selected_rank() -> None:
    store = _big_store(ALL_RANKS_LIMIT + 4, 300)
    drawing = prepare_plot(store, {}, PlotSettings("loss", mode="all", rank=7), 60)
    assert [t.label for t in drawing.traces] == ["min–max", "mean", "rank 7"]
    assert "20 ranks" in drawing.shown and f"more than {ALL_RANKS_LIMIT}" in drawing.shown


def test_prepare_plot_marks_the_first_nan_and_hides_non_positive_on_log() -> None:
    store = MetricStore()
    store.add(0, recs(0, range(6), loss=[1.0, 0.0, -1.0, 10.0, math.nan, math.nan]))
    drawing = prepare_plot(store, {}, PlotSettings("loss", log=True), 40)
    assert drawing.mark == 4.0
    assert drawing.traces[0].y == [0.0, 1.0] and drawing.hidden == 2
    timed = prepare_plot(store, {}, PlotSettings("loss", x="time"), 40)
    assert timed.traces[0].x[0] == 0.0 and timed.mark == 4.0
    store.add(1, recs(1, range(2), loss=[math.nan, math.inf]))
    only_bad = prepare_plot(store, {}, PlotSettings("loss", rank=1), 40)
    assert only_bad.traces == [] and "no finite values" in only_bad.message


def test_prepare_plot_falls_back_to_a_rank_with_the_metric_and_lists_overlays() -> None:
    store = _big_store(2, 100)
    old = _big_store(3, 50)
    other = MetricStore()
    other.add(0, recs(0, range(3), acc=[0.1, 0.2, 0.3]))
    drawing = prepare_plot(store, {"old": old, "other": other}, PlotSettings("loss", rank=9), 40)
    assert drawing.shown == "rank 0 (rank 9 has no loss)"
    assert [t.label for t in drawing.traces] == ["rank 0", "old"]
    assert drawing.traces[1].colour == -1 and drawing.missing == ["other"]
    assert drawing.traces[1].y[0] == pytest.approx(4.6)  # the mean of old's three ranks
