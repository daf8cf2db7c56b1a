"""The TUI's sweep prompt: what it starts with and how a typed sweep is read."""

from __future__ import annotations

import pytest

from ezpz_tui.core.comparing.sweep_spec import SweepSpec, default_spec, parse_spec
from ezpz_tui.core.launching.plan import LaunchPlan
from tests.fixtures.allocations import aurora


def test_a_typed_sweep_is_read_in_any_order_with_unnamed_sizes_at_one() -> None:
    assert parse_spec("steps=20 tp=1,2,2 pp=1,2") == SweepSpec((1, 2), (1, 2), (1,), 20)
    assert parse_spec("cp=2") == SweepSpec((1,), (1,), (2,), None)


def test_a_typed_tune_races_the_same_sizes_with_a_budget_and_a_memory_limit() -> None:
    spec = parse_spec("tune tp=1,2,4 steps=6 budget=600 mem=0.5")
    assert spec == SweepSpec((1, 2, 4), (1,), (1,), 6, tune=True, budget=600.0, mem_gb=0.5)
    assert parse_spec("tune") == SweepSpec((1,), (1,), (1,), None, tune=True)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("tp=1,x", "tp=1,x: give whole numbers of at least 1, e.g. tp=1,2"),
        ("tp=0", "tp=0: give whole numbers"),
        ("dp=2", "'dp=2': write tp=1,2 pp=1,2 cp=1 steps=20"),
        ("tp 2", "'tp': write"),
        ("tp=1 tp=2", "tp is given twice"),
        ("steps=-3", "steps=-3: give a whole number of at least 1"),
        ("budget=60", "'budget=60': write tp=1,2 pp=1,2 cp=1 steps=20"),  # a tune's word only
        ("tune mem=x", "mem=x: give a number above 0"),
        ("tune budget=0", "budget=0: give a number above 0"),
        ("tune steps=3", "steps=3: a tune's first race needs 4 or more (2 are warm-up)"),
        ("tune dp=2", "'dp=2': write tune tp=1,2 pp=1,2 cp=1 steps=20 budget=600 mem=4"),
    ],
)
def test_a_bad_sweep_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        parse_spec(text)
    assert says in str(caught.value)


def test_the_prompt_offers_the_tp_sizes_of_a_node() -> None:
    alloc = aurora(2)  # 12 tiles a node
    assert default_spec(LaunchPlan(ppn=12), alloc, demo=True) == "tp=1,2,3,4 pp=1 cp=1 steps=20"
    plan = LaunchPlan(ppn=4, pp=2)
    assert default_spec(plan, alloc, demo=False) == "tp=1,2,4 pp=2 cp=1"
    assert parse_spec(default_spec(plan, alloc, demo=False)).tp == (1, 2, 4)
