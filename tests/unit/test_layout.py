"""runtime.layout: the parallel sizes as one value, its reasons, coordinates, groups and steps,
and its coordinates against torch's own device mesh."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.distributed.device_mesh import init_device_mesh
from torch.testing._internal.distributed.fake_pg import FakeStore

from runtime.layout import MESH_ORDER, Layout, Reason, neighbour


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def valid_layouts(world: int) -> list[Layout]:
    """Every (pp, cp, tp) whose product divides ``world``."""
    return [
        Layout(world, tp=tp, pp=pp, cp=cp)
        for pp in divisors(world)
        for cp in divisors(world // pp)
        for tp in divisors(world // (pp * cp))
    ]


def test_mesh_order_is_pp_dp_cp_tp_and_shape_follows_it() -> None:
    assert MESH_ORDER == ("pp", "dp", "cp", "tp")
    layout = Layout(24, tp=2, pp=3, cp=2)
    assert (layout.model, layout.dp) == (12, 2)
    assert layout.shape == (3, 2, 2, 2)
    assert list(layout.sizes) == list(MESH_ORDER)
    assert layout.sizes == {"pp": 3, "dp": 2, "cp": 2, "tp": 2}
    with pytest.raises(ValueError, match="not a mesh dimension"):
        layout.size("ep")


def test_a_layout_is_a_frozen_value() -> None:
    layout = Layout(8, tp=2, ranks_per_node=4)
    assert layout == Layout(8, 2, 1, 1, 4) and hash(layout) == hash(Layout(8, 2, 1, 1, 4))
    assert layout != Layout(8, tp=2) and layout != (8, 2, 1, 1, 4)
    with pytest.raises(AttributeError, match="frozen"):
        layout.tp = 4  # type: ignore[misc]
    assert layout.replace(tp=4) == Layout(8, 4, 1, 1, 4) and layout.tp == 2
    with pytest.raises(TypeError, match="no field ep"):
        layout.replace(ep=2)
    assert repr(layout) == "Layout(world=8, tp=2, pp=1, cp=1, ranks_per_node=4)"


def test_indivisible_sizes_are_an_error_on_sizes() -> None:
    layout = Layout(6, tp=2, pp=2)
    assert layout.reasons() == [
        Reason("error", "sizes", "World size 6 is not divisible by tp*pp*cp = 4.")
    ]
    assert not layout.valid and layout.dp == 1  # rounded down; the reason says why


def test_a_size_below_one_names_its_field() -> None:
    layout = Layout(4, tp=0, pp=-1, cp=1)
    assert layout.errors() == [
        Reason("error", "tp", "TP must be at least 1, not 0."),
        Reason("error", "pp", "PP must be at least 1, not -1."),
    ]
    assert Layout(0).errors() == [Reason("error", "world", "World size must be at least 1, not 0.")]


def test_tp_spanning_nodes_is_a_warning_only_with_several_nodes() -> None:
    warning = "so tensor-parallel groups span nodes and their all-reduces cross the network."
    odd = Layout(6, tp=2, pp=3, ranks_per_node=3)
    assert odd.reasons() == [
        Reason("warning", "tp", f"TP=2 does not divide 3 ranks per node, {warning}")
    ]
    assert odd.valid
    assert Layout(8, tp=8, ranks_per_node=4).reasons() == [
        Reason("warning", "tp", f"TP=8 is larger than 4 ranks per node, {warning}")
    ]
    assert Layout(3, tp=3, ranks_per_node=3).reasons() == []  # one node: nothing to span
    assert Layout(8, tp=8).reasons() == []  # ranks per node unknown: no rule to apply


def test_coordinates_put_tp_innermost() -> None:
    layout = Layout(8, tp=2, pp=2)
    assert [tuple(layout.coords(r).values()) for r in range(8)] == [
        (0, 0, 0, 0),
        (0, 0, 0, 1),
        (0, 1, 0, 0),
        (0, 1, 0, 1),
        (1, 0, 0, 0),
        (1, 0, 0, 1),
        (1, 1, 0, 0),
        (1, 1, 0, 1),
    ]
    assert list(layout.coords(5)) == list(MESH_ORDER)
    with pytest.raises(ValueError, match="Rank 8 is not in a world of 8"):
        layout.coords(8)
    with pytest.raises(ValueError, match="No rank has a place: World size 6 is not divisible"):
        Layout(6, tp=4).coords(0)
    with pytest.raises(ValueError, match="not a mesh dimension"):
        layout.group(0, "ep")


def test_groups_hold_the_ranks_that_differ_in_one_dimension() -> None:
    layout = Layout(24, tp=2, pp=2, cp=3)
    for dim in MESH_ORDER:
        groups: dict[int, list[int]] = {}
        for rank in range(24):
            groups.setdefault(layout.group(rank, dim), []).append(rank)
        assert sorted(groups) == list(range(24 // layout.size(dim)))
        assert 0 in groups[0]
        for members in groups.values():
            assert len(members) == layout.size(dim)
            others = {tuple(v for d, v in layout.coords(r).items() if d != dim) for r in members}
            assert len(others) == 1, f"{dim} group {members} differs outside {dim}"
    assert [layout.group(r, "tp") for r in range(4)] == [0, 0, 1, 1]


def test_values_keep_tp_within_a_node_or_to_whole_nodes() -> None:
    # 2 nodes x 12 ranks: 5 and 7 never fit, 8 would split a node's 12.
    layout = Layout(24, ranks_per_node=12)
    assert layout.values("tp") == [1, 2, 3, 4, 6, 12, 24]
    assert layout.replace(tp=2).values("pp") == [1, 2, 3, 4, 6, 12]
    assert layout.replace(tp=5).values("pp") == []  # nothing fits with TP=5
    assert Layout(0).values("tp") == []
    with pytest.raises(ValueError, match="not a size to choose"):
        layout.values("dp")


def test_step_goes_to_the_next_value_that_fits() -> None:
    layout = Layout(12, ranks_per_node=4)
    assert layout.step("tp", +1) == layout.replace(tp=2)
    assert layout.step("tp", -1) is None
    assert layout.replace(tp=12).step("tp", +1) is None
    # an invalid size steps to its nearest valid neighbour either way
    assert layout.replace(tp=5).step("tp", +1) == layout.replace(tp=12)
    assert layout.replace(tp=5).step("tp", -1) == layout.replace(tp=4)
    assert neighbour([1, 2, 4], 3, +1) == 4 and neighbour([1, 2, 4], 3, -1) == 2
    assert neighbour([], 1, +1) is None


def test_importing_it_loads_nothing_else() -> None:
    """Every rank imports it first: it must bring no module beyond the runtime package."""
    code = (
        "import sys; before = set(sys.modules); import runtime.layout; "
        "print(sorted(set(sys.modules) - before))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "['runtime', 'runtime.layout']"


# --- against torch's mesh ---------------------------------------------------------------------


def _assert_matches_torch_order(layout: Layout) -> None:
    """The rank at (p, d, c, t) of ``arange(world).reshape(shape)`` (how init_device_mesh lays
    ranks out) has coordinates (p, d, c, t), and its groups are that tensor's rows."""
    mesh = torch.arange(layout.world).reshape(layout.shape)
    for index in itertools.product(*(range(n) for n in layout.shape)):
        rank = int(mesh[index])
        assert tuple(layout.coords(rank).values()) == index, (layout, rank)
    for axis, dim in enumerate(MESH_ORDER):
        rows = mesh.movedim(axis, -1).reshape(-1, layout.size(dim))
        for group, row in enumerate(rows.tolist()):
            assert {layout.group(r, dim) for r in row} == {group}, (layout, dim, row)


def test_every_layout_up_to_16_ranks_matches_torch_order() -> None:
    layouts = [layout for world in range(1, 17) for layout in valid_layouts(world)]
    every = itertools.product(range(1, 17), repeat=4)  # (world, pp, cp, tp)
    assert len(layouts) == sum(
        1 for w, *sizes in every if w % (sizes[0] * sizes[1] * sizes[2]) == 0
    )
    for layout in layouts:
        _assert_matches_torch_order(layout)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_larger_layouts_match_torch_order(data: st.DataObject) -> None:
    world = data.draw(st.integers(17, 96), label="world")
    layout = data.draw(st.sampled_from(valid_layouts(world)), label="layout")
    _assert_matches_torch_order(layout)


@pytest.mark.parametrize(
    "layout",
    [Layout(8, tp=2, pp=2, cp=2), Layout(12, tp=2, cp=3), Layout(6, pp=3), Layout(4, tp=4)],
    ids=str,
)
def test_a_real_device_mesh_agrees_rank_by_rank(layout: Layout) -> None:
    """init_device_mesh over the fake process group, one world per rank: the mesh torch builds
    from ``shape`` and ``MESH_ORDER`` gives every rank the coordinates and groups the layout
    says."""
    for rank in range(layout.world):
        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=layout.world)
        try:
            mesh = init_device_mesh("cpu", layout.shape, mesh_dim_names=MESH_ORDER)
            coords = layout.coords(rank)
            for dim in MESH_ORDER:
                assert mesh.get_local_rank(dim) == coords[dim], (rank, dim)
                peers = mesh[dim].mesh.tolist()
                assert {layout.group(r, dim) for r in peers} == {layout.group(rank, dim)}
        finally:
            dist.destroy_process_group()
