"""Should the ranks run from a staged copy of their environment?

At start every rank imports torch's thousands of files from wherever the venv sits; on a
network filesystem (Lustre, GPFS, NFS, ...) a large job is thousands of processes asking its
metadata servers at once, and the job's start takes minutes. ``--stage`` copies the environment
once per node to local disk instead (:mod:`ezpz_tui.core.launching.staging`). The doctor says so
when the environment is on such a filesystem and the plan is large: more than
:data:`LARGE_NODES` nodes, or :data:`LARGE_RANKS` ranks or more.
"""

from __future__ import annotations

from ezpz_tui.core.checking.check import Context, Verdict, declare, ok, warning
from ezpz_tui.core.checking.filesystem import fs_type
from ezpz_tui.core.launching.plan import Problem
from ezpz_tui.core.launching.staging import environment_of

NETWORK_FS = frozenset(
    {
        "nfs",
        "nfs4",
        "lustre",
        "gpfs",
        "beegfs",
        "ceph",
        "cephfs",
        "panfs",
        "wekafs",
        "dvs",  # HPE Cray's Data Virtualization Service, projecting a shared filesystem
        "glusterfs",
        "fuse.glusterfs",
        "orangefs",
    }
)
LARGE_NODES = 4  # more nodes than this is a large plan
LARGE_RANKS = 64  # so are this many ranks


@declare("staging")
def staging(ctx: Context) -> Verdict:
    prefix = environment_of(ctx.python)
    if isinstance(prefix, Problem):
        return ok(f"{ctx.python} is in no venv or conda environment: there is nothing to stage.")
    plan, alloc = ctx.plan, ctx.alloc
    nodes = len(plan.hosts_used(alloc)) if plan else len(alloc.hosts)
    ranks = nodes * ctx.ppn
    fstype = fs_type(prefix) or "an unknown filesystem"
    if plan is not None and plan.stage != "off":
        return ok(f"The ranks run from a copy of {prefix} on each node's own disk (--stage).")
    if fstype not in NETWORK_FS:
        return ok(f"{prefix} is on {fstype}, not a network filesystem: no need to stage it.")
    size = f"{ranks} rank{'s' * (ranks != 1)} on {nodes} node{'s' * (nodes != 1)}"
    if nodes > LARGE_NODES or ranks >= LARGE_RANKS:
        return warning(
            f"{prefix} is on {fstype}, a network filesystem, and {size} would all import "
            "from it at start: the job's start waits on its metadata servers.",
            "Launch with --stage (the launch form's Stage): the environment is copied once per "
            "node to local disk and the ranks run from there.",
        )
    return ok(
        f"{prefix} is on {fstype}; {size} start from it well enough (past {LARGE_NODES} nodes "
        f"or at {LARGE_RANKS} ranks, --stage copies it to each node first)."
    )
