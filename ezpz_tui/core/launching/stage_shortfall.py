"""A staged launch some of whose nodes could not copy the environment (a full or read-only
disk, a copy that does not match its source): it goes on without them, or says why not.

At scale one node of hundreds with a full ``/tmp`` should not cost the whole launch, so a plan
with ``stage_min_nodes`` (``--stage-min-nodes N``, or a fraction of its nodes such as ``0.9``)
goes on with the nodes that have their copy: the others are excluded as a bad host is (the
plan's ``exclude``; the session also lists them in ``bad_hosts.txt``, since a node's disk stays
full for the next launch too) and the plan is checked again on what is left, its change of
ranks and DP said as a failover says it. Too few nodes left, or sizes that no longer fit, and
the launch fails as it does without the option, the reason naming the nodes and why not fewer.
"""

from __future__ import annotations

from collections.abc import Mapping

from ezpz_tui.core.launching.plan import CheckedPlan, LaunchRefused, MoreChecks, check
from ezpz_tui.core.launching.resuming import keep_global_batch
from ezpz_tui.core.launching.staging import nodes_text
from ezpz_tui.core.runs.bad_hosts import is_listed
from ezpz_tui.core.runs.hosts import short_host


def without_unstaged(
    checked: CheckedPlan, failed: Mapping[str, str], also: MoreChecks | None = None
) -> tuple[CheckedPlan, str] | str:
    """``checked`` on the nodes that have their copy, with what changed in words; or why the
    launch cannot go on without the nodes that ``failed`` (host: why)."""
    plan, alloc = checked.plan, checked.alloc
    staged = plan.hosts_used(alloc)
    left = tuple(h for h in staged if not is_listed(h, failed))
    if plan.stage_min_nodes is None:
        if len(staged) < 2:
            return ""
        return "with --stage-min-nodes the launch goes on without the nodes that failed"
    needed = plan.stage_nodes_needed(len(staged))
    if len(left) < needed:
        return (
            f"{len(left)} of {len(staged)} nodes have their copy, fewer than the "
            f"{needed} --stage-min-nodes asks for"
        )
    gone = tuple(short_host(h) for h in staged if is_listed(h, failed))
    smaller = plan.with_changes(
        exclude=(*plan.exclude, *(h for h in gone if not is_listed(h, plan.exclude))),
        # A plan of so many nodes (or with spares) would take other hosts in their place,
        # hosts that have no copy: it runs on exactly the nodes left.
        nodes=len(left) if plan.nodes is not None or plan.spares else None,
    )
    model = plan.tp * plan.pp * plan.cp
    old_world = checked.world_size
    smaller = keep_global_batch(smaller, old_world // model)
    try:
        shrunk = check(smaller, alloc, also)
    except LaunchRefused as exc:
        return f"without {', '.join(gone)} the plan does not fit: {exc}"
    new_world = shrunk.world_size
    said = (
        f"staging failed on {nodes_text(failed)}; going on with {len(left)} of {len(staged)} "
        f"nodes: {old_world} → {new_world} ranks, DP {old_world // model} → {new_world // model}"
    )
    return shrunk, said
