"""The topology grid model: groups per dimension, idle and excluded hosts, summaries, bad sizes."""

from __future__ import annotations

import time

import pytest

from ezpz_tui.core.launching.plan import LaunchPlan, rank_layout
from ezpz_tui.core.launching.topology.describe import (
    describe_cell,
    describe_colour,
    legend,
    rank_summary,
)
from ezpz_tui.core.launching.topology.layout import Line, layout_topology, line_text, render_text
from ezpz_tui.core.launching.topology.model import (
    COLOUR_BY,
    Topology,
    build_topology,
    next_colour_by,
)
from tests.fixtures.allocations import aurora


def groups_of(topo: Topology) -> list[set[int]]:
    return [set(g) for g in topo.groups]


def cell_ranks(topo: Topology) -> list[list[int | None]]:
    return [[c.rank for c in row.cells] for row in topo.rows]


def test_two_hosts_by_four_tp2_groups_pairs_of_neighbours() -> None:
    topo = build_topology(LaunchPlan(tp=2), aurora(2, 4), "tp")
    assert cell_ranks(topo) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert groups_of(topo) == [{0, 1}, {2, 3}, {4, 5}, {6, 7}]
    cells = [c for row in topo.rows for c in row.cells]
    assert [c.group for c in cells] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert [c.coord for c in cells] == [0, 1] * 4, "coordinate inside the TP group = tp rank"
    assert (topo.tp, topo.pp, topo.cp, topo.dp, topo.world) == (2, 1, 1, 4, 8)


def test_dp_groups_stride_over_tp() -> None:
    topo = build_topology(LaunchPlan(tp=2), aurora(2, 4), "dp")
    assert groups_of(topo) == [{0, 2, 4, 6}, {1, 3, 5, 7}]
    assert [c.coord for c in topo.rows[1].cells] == [2, 2, 3, 3], "dp rank of ranks 4-7"
    assert describe_colour(topo) == "colour = DP group (ranks sharing pp/cp/tp) · cells = rank"


def test_pp2_keeps_tp_innermost_and_stages_on_hosts() -> None:
    plan, alloc = LaunchPlan(tp=2, pp=2), aurora(2, 4)
    tp = build_topology(plan, alloc, "tp")
    assert groups_of(tp) == [{0, 1}, {2, 3}, {4, 5}, {6, 7}]
    pp = build_topology(plan, alloc, "pp")
    assert groups_of(pp) == [{0, 4}, {1, 5}, {2, 6}, {3, 7}]
    assert [c.coord for row in pp.rows for c in row.cells] == [0] * 4 + [1] * 4
    assert describe_colour(pp) == "colour = PP group (ranks sharing dp/cp/tp) · cells = rank"


@pytest.mark.parametrize(
    ("hosts", "tiles", "plan"),
    [
        (2, 4, LaunchPlan(tp=2, pp=2)),
        (4, 4, LaunchPlan(tp=2, cp=2)),
        (4, 12, LaunchPlan(tp=3, pp=2, cp=2)),
        (3, 4, LaunchPlan(ppn=2, tp=1, pp=3)),
    ],
)
def test_a_group_is_the_ranks_that_differ_only_in_its_dimension(
    hosts: int, tiles: int, plan: LaunchPlan
) -> None:
    alloc = aurora(hosts, tiles)
    places = rank_layout(plan, alloc)
    assert places, "the plan fits"
    for dim in COLOUR_BY:
        topo = build_topology(plan, alloc, dim)
        assert sorted(r for g in topo.groups for r in g) == list(range(len(places)))
        for group in topo.groups:
            assert len(group) == topo.size(dim)
            others = {
                tuple(getattr(places[r], f"{d}_rank") for d in COLOUR_BY if d != dim) for r in group
            }
            assert len(others) == 1, (dim, group)
            assert sorted(getattr(places[r], f"{dim}_rank") for r in group) == list(
                range(topo.size(dim))
            )
        assert 0 in topo.groups[0], "group 0 always holds rank 0"


def test_excluded_host_is_an_idle_row_and_ranks_skip_it() -> None:
    alloc = aurora(3, 4)
    topo = build_topology(LaunchPlan(exclude=(alloc.hosts[1],)), alloc)
    assert [row.status for row in topo.rows] == ["used", "excluded", "used"]
    assert topo.rows[1].cells == ()
    assert topo.rows[2].ranks == [4, 5, 6, 7]
    text = render_text(layout_topology(topo, 80))
    assert f"1 {alloc.hosts[1]} excluded" in text


def test_hosts_beyond_nodes_are_marked_unused() -> None:
    topo = build_topology(LaunchPlan(nodes=1), aurora(3, 4))
    assert [row.status for row in topo.rows] == ["used", "unused", "unused"]
    assert topo.used_hosts == 1 and topo.world == 4
    lines = render_text(layout_topology(topo, 80)).splitlines()
    assert lines[2].endswith("not used (nodes = 1)")


def test_fewer_ranks_than_accelerators_leaves_idle_cells() -> None:
    topo = build_topology(LaunchPlan(ppn=2), aurora(2, 4))
    assert cell_ranks(topo) == [[0, 1, None, None], [2, 3, None, None]]
    row = layout_topology(topo, 80)[1]
    assert [s.kind for s in row[-2:]] == ["idle", "idle"]
    assert line_text(row).split()[-2:] == ["·", "·"]
    idle = topo.rows[0].cells[3]
    assert describe_cell(topo, idle) == f"{topo.rows[0].host} slot 3: idle"


def test_more_ranks_than_accelerators_says_so() -> None:
    topo = build_topology(LaunchPlan(ppn=6), aurora(1, 4))
    assert topo.slots == 6
    assert [c.oversubscribed for c in topo.rows[0].cells] == [False] * 4 + [True] * 2
    assert topo.notes and "6 ranks per host on 4 accelerators" in topo.notes[0]
    text = render_text(layout_topology(topo, 80))
    assert "4!" in text and "5!" in text and "3!" not in text
    assert "no device of its own" in describe_cell(topo, topo.rows[0].cells[5])


def test_cpu_hosts_are_as_wide_as_the_plan() -> None:
    topo = build_topology(LaunchPlan(ppn=4), aurora(1, 2, kind="cpu"))
    assert topo.slots == 4 and not topo.notes
    assert not any(c.oversubscribed for c in topo.rows[0].cells)


def test_invalid_sizes_show_placement_and_one_reason() -> None:
    topo = build_topology(LaunchPlan(tp=3), aurora(2, 4))
    assert topo.reason == "World size 8 is not divisible by tp*pp*cp = 3."
    assert cell_ranks(topo) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert all(c.group is None and c.place is None for row in topo.rows for c in row.cells)
    assert topo.groups == () and not topo.coloured
    lines = layout_topology(topo, 80)
    reasons = [line_text(line) for line in lines if line[0].kind == "reason"]
    assert reasons == ["World size 8 is not divisible by tp*pp*cp = 3."]
    assert "placement only" in render_text(lines)
    assert "dp ?" in line_text(lines[0])


def test_nothing_to_run_on_still_lists_the_hosts() -> None:
    alloc = aurora(2, 4)
    topo = build_topology(LaunchPlan(exclude=alloc.hosts), alloc)
    assert [row.status for row in topo.rows] == ["excluded", "excluded"]
    assert topo.reason and "excluded" in topo.reason
    assert len(layout_topology(topo, 80)) >= 3


def test_a_size_of_one_is_not_coloured() -> None:
    topo = build_topology(LaunchPlan(tp=2), aurora(2, 4), "pp")
    assert not topo.coloured
    assert len(topo.groups) == 8, "each rank is its own PP group"
    spans = [s for line in layout_topology(topo, 80) for s in line if s.kind == "cell"]
    assert spans and all(s.group is None for s in spans)
    assert (
        describe_colour(topo) == "no colours: pp = 1, each rank is its own PP group · cells = rank"
    )


def test_legend_summarises_and_caps_groups() -> None:
    topo = build_topology(LaunchPlan(tp=4, pp=2), aurora(64), "dp")
    assert legend(topo, limit=2) == [(0, "0,4,…,380"), (1, "1,5,…,381")]
    tp = build_topology(LaunchPlan(tp=4, pp=2), aurora(64), "tp")
    last = line_text(layout_topology(tp, 80, 20)[-1])
    assert last.startswith("TP groups (192):  0-3   4-7 ") and last.endswith(" more")


@pytest.mark.parametrize(
    ("ranks", "text"),
    [
        ([5], "5"),
        ([0, 1], "0-1"),
        ([3, 2, 1, 0], "0-3"),
        ([0, 4, 8, 12, 16], "0,4,…,16"),
        ([0, 1, 4, 5, 8, 9], "0-1,4-5,8-9"),
        ([0, 1, 4, 5, 8, 9, 12, 13], "0-1,4-5,…,12-13"),
        ([], ""),
    ],
)
def test_rank_summary(ranks: list[int], text: str) -> None:
    assert rank_summary(ranks) == text


def test_colour_cycle() -> None:
    assert [next_colour_by(d) for d in COLOUR_BY] == ["pp", "cp", "dp", "tp"]
    assert next_colour_by("bogus") == "tp"
    assert build_topology(LaunchPlan(), aurora(1, 4), "bogus").colour_by == "tp"


def test_colour_cycle_skips_sizes_of_one() -> None:
    plain = build_topology(LaunchPlan(), aurora(2, 4))
    assert next_colour_by("tp", plain) == "dp", "only DP has groups"
    assert next_colour_by("dp", plain) == "dp"
    tp_pp = build_topology(LaunchPlan(tp=2, pp=2), aurora(4, 4))
    assert [next_colour_by(d, tp_pp) for d in COLOUR_BY] == ["pp", "dp", "dp", "tp"]
    single = build_topology(LaunchPlan(), aurora(1, 1))
    assert next_colour_by("tp", single) == "pp", "nothing has groups: plain order"
    broken = build_topology(LaunchPlan(tp=3), aurora(2, 4))
    assert next_colour_by("tp", broken) == "pp"


def test_describe_cell_names_coordinates_and_group() -> None:
    topo = build_topology(LaunchPlan(tp=2, pp=2), aurora(2, 4), "tp")
    cell = topo.rows[1].cells[1]
    assert describe_cell(topo, cell) == (
        f"rank 5 on {topo.rows[1].host} slot 1 · tp 1 pp 1 cp 0 dp 0 · TP group 2: ranks 4-5"
    )


def _aurora_64_by_12() -> Topology:
    return build_topology(LaunchPlan(tp=4, pp=2), aurora(64), "tp")


def test_64_by_12_summary_fits_80_by_20() -> None:
    lines = layout_topology(_aurora_64_by_12(), 80, 20)
    text = [line_text(line) for line in lines]
    assert len(lines) <= 20
    assert all(len(t) <= 80 for t in text)
    assert text[0] == "768 ranks = 64 hosts × 12 · tp 4 · pp 2 · cp 1 · dp 96"
    assert text[1].split()[:3] == ["0", "x4000c0s0b0n0", "0"]
    summaries = [t for t in text if t.lstrip().startswith("⋮")]
    assert len(summaries) == 2, "one per pipeline stage"
    assert "pp 0 · same pattern" in summaries[0] and "pp 1 · same pattern" in summaries[1]
    # The last host of each stage and the first host of the second stage stay visible.
    assert any(t.split()[:3] == ["31", "x4000c1s7b0n1", "372"] for t in text)
    assert any(t.split()[:3] == ["32", "x4000c2s0b0n0", "384"] for t in text)
    assert text[-3].split()[-1] == "767"


def host_rows(lines: list[Line]) -> int:
    return sum(1 for line in lines if line[0].kind == "index" and line[0].text.strip() != "⋮")


def test_64_by_12_every_row_when_there_is_room() -> None:
    lines = layout_topology(_aurora_64_by_12(), 80)
    assert host_rows(lines) == 64
    assert not any(line_text(line).lstrip().startswith("⋮") for line in lines)
    assert len(lines) == 1 + 64 + 1 + 3, "header, hosts, colour meaning, three lines of groups"


@pytest.mark.parametrize(("width", "height"), [(50, 7), (40, 7), (30, 5), (120, 13)])
def test_64_by_12_fits_narrow_and_short(width: int, height: int) -> None:
    lines = layout_topology(_aurora_64_by_12(), width, height)
    assert len(lines) <= height
    assert all(len(line_text(line)) <= width for line in lines)
    assert line_text(lines[1]).split()[:2] in (["0", "0"], ["0", "x4000c0s0b0n0"])


def test_cells_that_do_not_fit_are_counted() -> None:
    text = render_text(layout_topology(_aurora_64_by_12(), 40, 7))
    assert " +4" in text


def test_too_many_distinct_hosts_end_in_a_more_line() -> None:
    # TP=8 on 12 tiles: the pattern repeats every two hosts, so no stretch folds.
    topo = build_topology(LaunchPlan(tp=8), aurora(64), "tp")
    lines = layout_topology(topo, 80, 12)
    assert len(lines) <= 12
    more = [line_text(line) for line in lines if line_text(line).startswith("… ")]
    assert more and more[0].endswith("ranks 84-767")
    assert any("span nodes" in line_text(line) for line in lines)


def test_excluded_stretch_folds_into_one_line() -> None:
    alloc = aurora(40, 4)
    topo = build_topology(LaunchPlan(exclude=alloc.hosts[10:30]), alloc)
    text = render_text(layout_topology(topo, 80, 12))
    assert "hosts 10-29 · excluded" in text


def test_512_hosts_by_12_stays_small_and_quick() -> None:
    start = time.perf_counter()
    topo = build_topology(LaunchPlan(tp=4, pp=2), aurora(512), "dp")
    lines = layout_topology(topo, 80, 20)
    elapsed = time.perf_counter() - start
    assert topo.world == 6144 and len(topo.rows) == 512
    assert len(lines) <= 20 and all(len(line_text(line)) <= 80 for line in lines)
    assert elapsed < 2.0, "generous: only catches a blow-up, not a regression of a few ms"
    assert host_rows(layout_topology(topo, 80)) == 512
