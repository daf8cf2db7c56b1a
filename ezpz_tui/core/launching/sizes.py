"""Stepping one size of a plan to its next value that launches: ``+`` / ``-`` in the form.

Someone trying layouts wants the next size that runs, not the next integer: TP=3 on four ranks
only earns an error. So TP, PP and CP step through the values that divide the world with the
other two sizes as they are, and TP keeps to values that divide a node's ranks (its all-reduces
stay on the node) before whole nodes' worth of ranks. Nodes and ranks per node step by one
within the allocation; a change that makes the sizes no longer divide is the form's to show.
"""

from __future__ import annotations

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import LaunchPlan

STEPPED = ("nodes", "ppn", "tp", "pp", "cp")
"""The plan fields ``+`` and ``-`` step, in form order."""

_MODEL = ("tp", "pp", "cp")


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def size_values(plan: LaunchPlan, alloc: Allocation, name: str) -> list[int]:
    """Every value ``name`` may take with the rest of ``plan`` as it is, smallest first."""
    if name == "nodes":
        return list(range(1, len(plan.usable_hosts(alloc)) + 1))
    if name == "ppn":
        slots = alloc.cpus_per_host if alloc.accelerator_kind == "cpu" else 0
        return list(range(1, max(alloc.accelerators_per_host, slots) + 1))
    if name not in _MODEL:
        raise ValueError(f"{name!r} is not a size that steps; those are {', '.join(STEPPED)}")
    world, ppn = plan.world_size(alloc), plan.ranks_per_node(alloc)
    others = 1
    for other in _MODEL:
        if other != name:
            others *= max(getattr(plan, other), 1)
    if world < 1 or world % others:
        return []
    values = _divisors(world // others)
    if name == "tp" and ppn >= 1:
        values = [v for v in values if ppn % v == 0 or v % ppn == 0]
    return values


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
    now = current_value(plan, alloc, name)
    values = size_values(plan, alloc, name)
    ahead = [v for v in values if v > now] if direction > 0 else [v for v in values if v < now]
    if not ahead:
        return None
    return plan.with_changes(**{name: ahead[0] if direction > 0 else ahead[-1]})
