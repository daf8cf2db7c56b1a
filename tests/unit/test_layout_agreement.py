"""The plan's validation, ``+``/``-`` in the form and a rank's ``setup()`` agree on which sizes
run: for random plans each is held to the rule itself (every size at least 1, tp*pp*cp divides
the world), so any of them growing its own rule again fails here."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ezpz_tui.core.launching.plan import LaunchPlan, LaunchRefused, check, validate
from ezpz_tui.core.launching.sizes import size_values, step_size
from runtime.dist import SetupError, _resolve_layout
from runtime.layout import CHOSEN, Layout
from tests.unit.test_plan import make_alloc

SIZE_FIELDS = {*CHOSEN, "sizes"}
size = st.integers(-1, 9)


def runs(world: int, tp: int, pp: int, cp: int) -> bool:
    """The rule, written out once more here on purpose: the oracle the code is held to."""
    return min(tp, pp, cp) >= 1 and world % (tp * pp * cp) == 0


@settings(max_examples=300, deadline=None)
@given(nodes=st.integers(1, 4), ppn=st.integers(1, 8), tp=size, pp=size, cp=size)
def test_check_refuses_exactly_what_layout_and_setup_refuse(
    nodes: int, ppn: int, tp: int, pp: int, cp: int
) -> None:
    alloc = make_alloc(hosts=tuple(f"h{i}" for i in range(nodes)), per_host=ppn)
    plan = LaunchPlan(ppn=ppn, tp=tp, pp=pp, cp=cp)
    world = nodes * ppn
    layout = plan.layout(alloc)
    assert layout == Layout(world, tp, pp, cp, ranks_per_node=ppn)
    expected = runs(world, tp, pp, cp)
    assert layout.valid == expected

    refused = False
    try:
        check(plan, alloc)
    except LaunchRefused as exc:
        refused = True
        assert {p.field for p in exc.problems} <= SIZE_FIELDS, exc.problems
    assert refused != expected
    # The form shows the layout's own sentences on the size fields, warnings included.
    found = [(p.level, p.field, p.message) for p in validate(plan, alloc)]
    assert found == [(r.level, r.field, r.message) for r in layout.reasons()]

    try:
        resolved = _resolve_layout(world, tp, pp, cp)
    except SetupError:
        assert not expected
    else:
        assert expected and resolved.sizes == {**layout.sizes}


@settings(max_examples=200, deadline=None)
@given(
    nodes=st.integers(1, 4),
    ppn=st.integers(1, 8),
    tp=st.integers(1, 9),
    pp=st.integers(1, 9),
    cp=st.integers(1, 9),
    name=st.sampled_from(CHOSEN),
    direction=st.sampled_from((+1, -1)),
)
def test_stepping_offers_exactly_the_values_the_plan_accepts(
    nodes: int, ppn: int, tp: int, pp: int, cp: int, name: str, direction: int
) -> None:
    alloc = make_alloc(hosts=tuple(f"h{i}" for i in range(nodes)), per_host=ppn)
    plan = LaunchPlan(ppn=ppn, tp=tp, pp=pp, cp=cp)
    world = nodes * ppn
    offered = size_values(plan, alloc, name)
    accepted = []
    for value in range(1, world + 1):
        sizes = {"tp": tp, "pp": pp, "cp": cp, name: value}
        if not runs(world, **sizes):
            continue
        assert not any(p.level == "error" for p in validate(plan.with_changes(**sizes), alloc))
        # TP also keeps to values that divide a node's ranks or are whole nodes of them.
        if name != "tp" or ppn % value == 0 or value % ppn == 0:
            accepted.append(value)
    assert offered == accepted

    stepped = step_size(plan, alloc, name, direction)
    now = getattr(plan, name)
    ahead = [v for v in accepted if (v - now) * direction > 0]
    if not ahead:
        assert stepped is None
    else:
        assert stepped == plan.with_changes(**{name: min(ahead, key=lambda v: abs(v - now))})
        assert check(stepped, alloc).plan == stepped


def test_setup_keeps_its_sentences() -> None:
    with pytest.raises(SetupError, match=r"^Parallel sizes must be at least 1, got tp=0, cp=-1\.$"):
        _resolve_layout(4, 0, 1, -1)
    with pytest.raises(
        SetupError, match=r"^World size 6 is not divisible by tp\*pp\*cp = 2\*2\*1 = 4\.$"
    ):
        _resolve_layout(6, 2, 2, 1)
