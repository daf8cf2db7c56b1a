"""Failover: after a node fault, remember the host and run again without it.

At scale a failed node is the most common reason a good job fails, and the same node fails the
next attempt too. So the host a failure implicates (:attr:`Failure.node_fault_host`) goes to the
outputs directory's ``bad_hosts.txt``, once, when the run's end is recorded (by its supervisor or
its tether: :func:`record_end_fault`; ``ezpz-tui why``, :mod:`ezpz_tui.core.watching.why`, only
says whether it is listed), and the
failed run's plan is relaunched on the remaining hosts, each attempt its own run with
``parent`` naming the one that failed. A failure that does not look like a node's (an
exception in the program, the OOM killer) is not retried: it would fail again wherever it ran;
nor is a node fault that recurs at the same step on another host than the run it retries: it
followed the job (:mod:`~ezpz_tui.core.watching.failure_class` classifies; its host is not listed).
When the sizes no longer fit on what is left, the retry is refused with the plan's own reason
rather than silently shrunk.

The flow that decides and relaunches is :class:`~ezpz_tui.core.failover.Failover`, one
layer up, beside the session it drives; this module holds what it and the supervisor share.

Only runs on a scheduler's nodes name a faulty host (:func:`explain` decides): on a workstation
the one host is this machine, and excluding it would only make every later launch refuse.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.bad_hosts import add_bad_hosts
from ezpz_tui.core.launching.plan import LaunchPlan, check
from ezpz_tui.core.runs.bad_hosts import is_listed
from ezpz_tui.core.runs.hosts import short_host
from ezpz_tui.core.watching.failure import Failure, explain

log = logging.getLogger(__name__)


def record_node_fault(failure: Failure) -> list[str]:
    """Add the host ``failure`` implicates to ``bad_hosts.txt`` beside its run; the hosts added
    (none when it names none, already lists it, the run had no scheduler's nodes, or its class
    says the workload's: the same fault at the same step on its parent's other host).
    ``OSError`` when the file cannot be written."""
    host = failure.node_fault_host
    if host is None or failure.judged is None or not failure.judged.retry:
        return []  # the workload's failure (one that followed the job too) blames no host
    return add_bad_hosts(failure.run_dir.parent, [host], failure.run_id, failure.cause)


def record_end_fault(run_dir: Path) -> tuple[str, ...]:
    """What whoever records a failed run's end (the supervisor, or the tether) does once, right
    after: the host its node fault names goes to ``bad_hosts.txt``. The hosts added; a file
    that cannot be written is logged (the failover says so when it retries), and nothing here
    may keep the end from being recorded."""
    try:
        failure = explain(run_dir)
        return tuple(record_node_fault(failure)) if failure is not None else ()
    except Exception:
        log.exception("cannot record the node fault of %s in bad_hosts.txt", run_dir)
        return ()


def without_host(plan: LaunchPlan, alloc: Allocation, host: str) -> LaunchPlan:
    """``plan`` with ``host`` excluded, checked on ``alloc``: :class:`~.plan.LaunchRefused` with the
    plan's reason when what is left cannot hold it."""
    if any(short_host(h) == short_host(host) for h in alloc.hosts) and not is_listed(
        host, plan.exclude
    ):
        plan = plan.with_changes(exclude=(*plan.exclude, short_host(host)))
    check(plan, alloc)
    return plan
