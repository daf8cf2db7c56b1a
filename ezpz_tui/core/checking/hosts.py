"""The job and its hosts: is there a job, and do the scheduler's host list and this host agree
with the allocation read at start?

A hostfile that changed since start, or a TUI running off the job's head node, sends ranks to
hosts the plan does not describe; both are cheap to see here and confusing to see after a launch.
"""

from __future__ import annotations

from ezpz_tui.core.checking.check import Context, Verdict, declare, error, ok, warning
from ezpz_tui.core.launching.allocation import MACHINE_KIND
from ezpz_tui.core.runs.hosts import short_host
from runtime.env import expand_nodelist, hostname, pbs_hosts


@declare("scheduler")
def scheduler(ctx: Context) -> Verdict:
    alloc = ctx.alloc
    if alloc.scheduler != "none":
        hosts = f"{len(alloc.hosts)} host" + ("" if len(alloc.hosts) == 1 else "s")
        return ok(f"{alloc.scheduler} job {alloc.job_id} on {alloc.machine}, {hosts}.")
    if alloc.machine in MACHINE_KIND:
        start = "qsub -I" if alloc.machine not in ("Perlmutter", "Frontier") else "salloc"
        return warning(
            f"No job: this looks like a {alloc.machine} login node, and ranks would run here.",
            f"Start an interactive job ({start} ...) and run ezpz-tui inside it.",
        )
    return ok("No PBS or Slurm job: runs use this host only.")


@declare("hostfile")
def hostfile(ctx: Context) -> Verdict:
    alloc, env = ctx.alloc, ctx.env
    if alloc.scheduler == "none":
        if env.get("PBS_NODEFILE"):
            return warning(
                "PBS_NODEFILE is set without a PBS job; a plain mpiexec from the mpich wheel "
                "would send ranks to the hosts it lists (ezpz-tui passes -rmk user to ignore it).",
                "unset PBS_NODEFILE",
            )
        return ok("A single host needs no hostfile.")
    if alloc.scheduler == "PBS":
        nodefile = env.get("PBS_NODEFILE", "")
        if not nodefile:
            return error(
                "PBS_JOBID is set but PBS_NODEFILE is not, so the hosts are unknown.",
                "Run ezpz-tui inside the job's shell (qsub -I), not from another login.",
            )
        try:
            listed = tuple(pbs_hosts(nodefile))
        except OSError as exc:
            return error(
                f"Cannot read PBS_NODEFILE {nodefile}: {exc.strerror or exc}.",
                "Run ezpz-tui on the job's head node, where PBS writes the nodefile.",
            )
        source = f"PBS_NODEFILE {nodefile}"
    else:
        spec = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
        try:
            listed = tuple(expand_nodelist(spec))
        except ValueError as exc:
            return error(f"Cannot read the Slurm node list: {exc}.")
        source = "SLURM_JOB_NODELIST"
    if listed != alloc.hosts:
        return warning(
            f"{source} lists {len(listed)} hosts now; {len(alloc.hosts)} were read at start.",
            "Re-read the allocation (restart ezpz-tui) before launching.",
        )
    here = short_host(hostname())
    if here not in {short_host(h) for h in listed}:
        return warning(
            f"This host ({here}) is not one of the job's {len(listed)} hosts.",
            "Run ezpz-tui on the job's head node so the launcher reaches its hosts.",
        )
    return ok(f"{source} matches the allocation ({len(listed)} hosts).")
