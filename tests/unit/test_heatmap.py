"""The heatmap's decisions without a terminal: the grid layout, the colour scale, the legend."""

from __future__ import annotations

import math

import pytest

from ezpz_tui.core.watching.heatmap import (
    BUCKETS,
    FIGURE_KEYS,
    Scale,
    figure,
    host_medians,
    layout_grid,
    next_figure,
    row_label,
    summarize,
    widest_host,
)


def places_of(hosts: int, per_host: int) -> dict[int, tuple[str, int]]:
    return {h * per_host + lr: (f"x{h}", lr) for h in range(hosts) for lr in range(per_host)}


# --- layout ---------------------------------------------------------------------------------


def test_eight_hosts_of_64_make_eight_rows_of_64() -> None:
    grid = layout_grid(places_of(8, 64), width=64)
    assert [row.label for row in grid.rows] == [f"x{h}" for h in range(8)]
    assert grid.width == 64
    assert all(row.cells == tuple(range(h * 64, h * 64 + 64)) for h, row in enumerate(grid.rows))
    assert grid.where[2 * 64 + 3] == (2, 3)
    assert grid.rows[7].cells[63] == 511


def test_hosts_come_in_order_of_their_lowest_rank() -> None:
    places = {0: ("b", 0), 1: ("a", 0), 2: ("b", 1), 3: ("a", 1)}
    grid = layout_grid(places, width=8)
    assert [(row.host, row.cells) for row in grid.rows] == [("b", (0, 2)), ("a", (1, 3))]


def test_a_missing_local_rank_leaves_a_gap() -> None:
    places = {0: ("x0", 0), 1: ("x0", 1), 3: ("x0", 3), 4: ("x1", 0), 5: ("x1", 1)}
    grid = layout_grid(places, width=8)
    assert grid.rows[0].cells == (0, 1, None, 3)
    assert grid.rows[1].cells == (4, 5)
    assert grid.width == 4
    assert 2 not in grid.where


def test_ranks_without_a_host_wrap_after_the_hosts_labelled_by_first_rank() -> None:
    places = {0: ("x0", 0), 1: ("x0", 1), 5: ("", 0), 6: ("x0", -1)}
    grid = layout_grid(places, width=2, ranks=[0, 1, 2, 3, 4, 5, 6])
    assert [(row.label, row.host, row.cells) for row in grid.rows] == [
        ("x0", "x0", (0, 1)),
        ("r2", None, (2, 3)),
        ("r4", None, (4, 5)),
        ("r6", None, (6,)),
    ]
    assert grid.where[6] == (3, 0)


def test_a_host_wider_than_the_grid_wraps_in_local_rank_order() -> None:
    grid = layout_grid(places_of(2, 6), width=4)
    assert [(row.label, row.host, row.cells) for row in grid.rows] == [
        ("x0", "x0", (0, 1, 2, 3)),
        ("r4", "x0", (4, 5)),
        ("x1", "x1", (6, 7, 8, 9)),
        ("r10", "x1", (10, 11)),
    ]


def test_two_ranks_in_one_slot_keep_the_first_and_show_the_other_as_unknown() -> None:
    grid = layout_grid({0: ("x0", 0), 1: ("x0", 0)}, width=4)
    assert [(row.label, row.cells) for row in grid.rows] == [("x0", (0,)), ("r1", (1,))]


def test_nothing_known_is_an_empty_grid() -> None:
    grid = layout_grid({}, width=10)
    assert (grid.rows, grid.width, dict(grid.where)) == ((), 0, {})


def test_widest_host_and_labels() -> None:
    assert widest_host(places_of(3, 12)) == 12
    assert widest_host({0: ("", 5)}) == 0
    assert row_label("x1000c0s3b0n0.hsn.cm.aurora.alcf.anl.gov", 10) == "…0c0s3b0n0"
    assert row_label("node01", 10) == "node01    "
    assert row_label("r16383", 6) == "r16383"


# --- scale ----------------------------------------------------------------------------------


def test_high_step_time_is_the_hot_end() -> None:
    scale = Scale.of(figure("step_time"), {0: 1.0, 1: 2.0, 2: 3.0})
    assert [scale.bucket(v) for v in (1.0, 2.0, 3.0)] == [0, BUCKETS // 2, BUCKETS - 1]
    assert scale.ends == (1.0, 3.0)


def test_low_token_rate_is_the_hot_end() -> None:
    scale = Scale.of(figure("tokens_per_s"), {0: 1000.0, 1: 2000.0})
    assert (scale.bucket(1000.0), scale.bucket(2000.0)) == (BUCKETS - 1, 0)
    assert scale.ends == (2000.0, 1000.0), "the good end is written on the left"


def test_percent_figures_keep_zero_to_hundred() -> None:
    mem = Scale.of(figure("mem_pct"), {0: 40.0, 1: 41.0})
    assert (mem.low, mem.high) == (0.0, 100.0)
    assert mem.bucket(40.0) == mem.bucket(41.0) == 3, "a flat 40 % is not full"
    assert mem.bucket(150.0) == BUCKETS - 1 and mem.bucket(-5.0) == 0
    util = Scale.of(figure("util_pct"), {})
    assert (util.bucket(0.0), util.bucket(100.0)) == (BUCKETS - 1, 0), "an idle device is hot"
    cpu = Scale.of(figure("cpu_pct"), {0: 100.0, 1: 400.0})
    assert cpu.high == 400.0, "percent of one core: no fixed top"


def test_all_equal_values_are_all_cool() -> None:
    scale = Scale.of(figure("step_time"), {r: 0.25 for r in range(64)})
    assert {scale.bucket(0.25)} == {0}


def test_no_data_and_not_a_number() -> None:
    scale = Scale.of(figure("step_time"), {0: None, 1: 0.1, 2: math.nan, 3: 0.3})
    assert (scale.low, scale.high) == (0.1, 0.3), "the span is over finite values"
    assert scale.bucket(None) is None
    assert scale.bucket(math.nan) == scale.bucket(math.inf) == BUCKETS - 1
    empty = Scale.of(figure("step_time"), {0: None})
    assert empty.bucket(None) is None and empty.bucket(1.0) == 0


def test_figures_cycle_and_format() -> None:
    keys = ("step_time", "tokens_per_s", "mfu", "util_pct", "mem_pct", "cpu_pct", "arrival_lag")
    assert keys == FIGURE_KEYS
    assert next_figure("step_time") == "tokens_per_s"
    assert next_figure("cpu_pct") == "arrival_lag"
    assert next_figure("arrival_lag") == "step_time"
    assert figure("arrival_lag").format(0.0405) == "40.5 ms"
    assert next_figure("bogus") == "step_time"
    assert figure("step_time").format(0.41) == "0.41 s"
    assert figure("tokens_per_s").format(12345.0) == "12.3k tok/s"
    assert figure("tokens_per_s").format(2.5e6) == "2.5M tok/s"
    assert figure("mem_pct").format(87.4) == "87 %"
    with pytest.raises(KeyError):
        figure("bogus")


# --- summary --------------------------------------------------------------------------------


def slow_host_values() -> dict[int, float | None]:
    """4 hosts x 4 ranks: host x2 twice as slow, one rank of x0 without data."""
    values: dict[int, float | None] = {r: 0.2 + 0.001 * (r % 4) for r in range(16)}
    values.update({r: 0.4 + 0.001 * (r % 4) for r in range(8, 12)})
    values[1] = None
    return values


def test_summary_names_the_ends_and_the_worst_host() -> None:
    places = places_of(4, 4)
    summary = summarize(figure("step_time"), slow_host_values(), places)
    assert summary is not None
    assert (summary.count, summary.low_rank, summary.high_rank) == (15, 0, 11)
    assert (summary.low, summary.high) == (0.2, 0.403)
    assert summary.median == pytest.approx(0.202)
    assert summary.worst_host == "x2"
    assert summary.worst_host_text(figure("step_time")) == (
        "worst host: x2 (median 0.402 s vs 0.202 s)"
    )


def test_for_a_rate_the_worst_host_is_the_slowest() -> None:
    values = {r: 1000.0 for r in range(16)}
    values.update({r: 500.0 for r in range(4, 8)})
    summary = summarize(figure("tokens_per_s"), values, places_of(4, 4))
    assert summary is not None and summary.worst_host == "x1"
    assert summary.worst_host_text(figure("tokens_per_s")) == (
        "worst host: x1 (median 500 tok/s vs 1k tok/s)"
    )


def test_no_worst_host_when_hosts_agree_or_there_is_one() -> None:
    flat = summarize(figure("step_time"), {r: 0.2 for r in range(16)}, places_of(4, 4))
    assert flat is not None and flat.worst_host is None
    assert flat.worst_host_text(figure("step_time")) == ""
    one = summarize(figure("step_time"), slow_host_values(), places_of(1, 16))
    assert one is not None and one.worst_host is None


def test_no_summary_without_finite_values() -> None:
    assert summarize(figure("step_time"), {0: None, 1: math.nan}, places_of(1, 2)) is None


def test_host_medians_skip_unknown_places_and_missing_values() -> None:
    values = {0: 1.0, 1: 3.0, 2: None, 3: 5.0, 9: 7.0}
    places = {0: ("a", 0), 1: ("a", 1), 2: ("b", 0), 3: ("", 0)}
    assert host_medians(values, places) == {"a": 2.0}
