"""Stepping one size of a plan to its next value that launches: ``+`` / ``-`` in the form.

Someone trying layouts wants the next size that runs, not the next integer: TP=3 on four ranks
only earns an error. So TP, PP and CP step through the values the plan's
:class:`runtime.layout.Layout` allows (the rules a launch is checked by and every rank builds
its mesh from). Nodes and ranks per node step by one within the allocation; a change that makes
the sizes no longer divide is the form's to show.
"""

from __future__ import annotations

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import LaunchPlan
from runtime.layout import CHOSEN, neighbour

STEPPED = ("nodes", "ppn", "tp", "pp", "cp")
"""The plan fields ``+`` and ``-`` step, in form order."""


def size_values(plan: LaunchPlan, alloc: Allocation, name: str) -> list[int]:
    """Every value ``name`` may take with the rest of ``plan`` as it is, smallest first."""
    if name == "nodes":
        return list(range(1, len(plan.usable_hosts(alloc)) + 1))
    if name == "ppn":
        slots = alloc.cpus_per_host if alloc.accelerator_kind == "cpu" else 0
        return list(range(1, max(alloc.accelerators_per_host, slots) + 1))
    if name not in CHOSEN:
        raise ValueError(f"{name!r} is not a size that steps; those are {', '.join(STEPPED)}")
    return plan.layout(alloc).values(name)


def current_value(plan: LaunchPlan, alloc: Allocation, name: str) -> int:
    """The value ``name`` has in effect: an unset nodes or ranks per node counts as all."""
    if name == "nodes":
        return len(plan.hosts_used(alloc))
    if name == "ppn":
        return plan.ranks_per_node(alloc)
    return int(getattr(plan, name))


def step_size(plan: LaunchPlan, alloc: Allocation, name: str, direction: int) -> LaunchPlan | None:
    """``plan`` with ``name`` at its next (``direction`` > 0) or previous valid value; None
    when there is none that way. A value that does not fit now steps to its nearest neighbour
    that does."""
    value = neighbour(size_values(plan, alloc, name), current_value(plan, alloc, name), direction)
    return None if value is None else plan.with_changes(**{name: value})
