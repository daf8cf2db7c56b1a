"""``+``/``-`` in the launch form: the next size that launches, never one that only errors."""

from __future__ import annotations

import pytest

from ezpz_tui.core.launching.plan import LaunchPlan, validate
from ezpz_tui.core.launching.sizes import current_value, size_values, step_size
from tests.fixtures.allocations import aurora
from tests.unit.test_plan import make_alloc


def errors(plan: LaunchPlan, alloc: object) -> list[str]:
    return [p.message for p in validate(plan, alloc) if p.level == "error"]  # type: ignore[arg-type]


def test_tp_steps_through_divisors_within_a_node_then_whole_nodes() -> None:
    # 2 Aurora nodes x 12 tiles = 24 ranks: 5 and 7 never fit, 8 would split a node's 12 tiles.
    alloc = aurora(2)
    plan = LaunchPlan(ppn=12)
    assert size_values(plan, alloc, "tp") == [1, 2, 3, 4, 6, 12, 24]
    seen = [plan.tp]
    while (plan := step_size(plan, alloc, "tp", +1) or plan).tp != seen[-1]:
        seen.append(plan.tp)
        assert errors(plan, alloc) == []
    assert seen == [1, 2, 3, 4, 6, 12, 24]
    assert step_size(plan, alloc, "tp", +1) is None  # the largest: nothing further that way


def test_a_size_respects_the_others_and_steps_down() -> None:
    alloc = make_alloc(per_host=4)  # 3 hosts x 4 = 12 ranks
    plan = LaunchPlan(ppn=4, tp=2)
    assert size_values(plan, alloc, "pp") == [1, 2, 3, 6]  # 12 / tp 2 = 6
    stepped = step_size(plan, alloc, "pp", +1)
    assert stepped is not None and stepped.pp == 2 and stepped.tp == 2
    assert step_size(stepped, alloc, "pp", -1) == plan
    assert step_size(plan, alloc, "pp", -1) is None


def test_an_invalid_value_steps_to_its_nearest_valid_neighbour() -> None:
    alloc = make_alloc(per_host=4)
    plan = LaunchPlan(ppn=4, tp=5)  # 12 ranks: 5 does not divide
    assert errors(plan, alloc)
    up, down = step_size(plan, alloc, "tp", +1), step_size(plan, alloc, "tp", -1)
    assert (up and up.tp, down and down.tp) == (12, 4)


def test_nodes_and_ranks_per_node_step_by_one_within_the_allocation() -> None:
    alloc = make_alloc(per_host=4)
    plan = LaunchPlan()  # all 3 nodes, one rank per accelerator
    assert (current_value(plan, alloc, "nodes"), current_value(plan, alloc, "ppn")) == (3, 4)
    assert step_size(plan, alloc, "nodes", +1) is None
    fewer = step_size(plan, alloc, "nodes", -1)
    assert fewer is not None and fewer.nodes == 2
    assert step_size(plan, alloc, "ppn", +1) is None  # no more accelerators than 4
    less = step_size(plan, alloc, "ppn", -1)
    assert less is not None and less.ppn == 3


def test_sizes_of_a_plan_without_ranks_do_not_step() -> None:
    alloc = make_alloc(per_host=4)
    plan = LaunchPlan(ppn=4, exclude=("x1000", "x1001", "x1002"))
    assert size_values(plan, alloc, "tp") == []
    assert step_size(plan, alloc, "tp", +1) is None
    with pytest.raises(ValueError, match="not a size that steps"):
        size_values(plan, alloc, "launcher")
