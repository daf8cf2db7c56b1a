"""A batch script for a plan that worked interactively: PBS (the ALCF machines) or Slurm.

The script does not replay the old launcher argv, which names the old job's hosts and hostfile:
it runs ``ezpz-tui launch`` with the same plan (sizes, ranks per node, launcher and its flags,
the extra env, the command) inside the new job, so the argv is built again for the job's own
nodes by the same code, and the job gets a run directory like any other run (a new one per
job). :data:`SUBMISSION_VAR` names the submission in that run's ``run.toml``, which is how the
runs list knows that the queued job has become this run.

ALCF's directives (user guides of Polaris and Aurora): ``-l select=N`` (``:system=polaris`` on
Polaris), ``-l place=scatter``, ``-l walltime=HH:MM:SS``, ``-l filesystems=home:eagle``
(Polaris) or ``home:flare`` (Aurora), ``-q QUEUE``, ``-A PROJECT``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ezpz_tui.core.launching.plan import LaunchPlan
from ezpz_tui.core.runs.outputs import batch_dir

SUBMISSION_VAR = "EZPZ_SUBMISSION"
SCHEDULERS = ("PBS", "SLURM")
SUBMIT_TOOL = {"PBS": "qsub", "SLURM": "sbatch"}
DEFAULT_WALLTIME_S = 3600

# The filesystems an ALCF job asks for (a job without the one it uses cannot start on it).
FILESYSTEMS = {"Polaris": "home:eagle", "Aurora": "home:flare", "Sunspot": "home:flare"}
# ALCF machines where PBS's select names the system as well.
SELECT_SYSTEM = {"Polaris": "polaris"}
_WALLTIME = re.compile(r"(?:(\d+)-)?(\d+):(\d\d):(\d\d)")


def parse_walltime(text: str) -> int:
    """Seconds in ``HH:MM:SS`` (hours may pass 24) or ``D-HH:MM:SS``; ``ValueError`` says
    the form. ``MM:SS`` and bare numbers are refused: PBS and Slurm read them differently."""
    match = _WALLTIME.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"walltime {text!r} is not HH:MM:SS (e.g. 01:00:00) or D-HH:MM:SS")
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    if minutes > 59 or seconds > 59:
        raise ValueError(f"walltime {text!r}: minutes and seconds run from 00 to 59")
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total <= 0:
        raise ValueError(f"walltime {text!r} is no time at all")
    return total


def format_walltime(seconds: int, scheduler: str) -> str:
    """``HH:MM:SS`` for PBS (hours past 24 as they are), ``D-HH:MM:SS`` for Slurm past a day."""
    minutes, secs = divmod(seconds, 60)
    hours, mins = divmod(minutes, 60)
    if scheduler == "SLURM" and hours >= 24:
        days, hours = divmod(hours, 24)
        return f"{days}-{hours:02d}:{mins:02d}:{secs:02d}"
    return f"{hours:02d}:{mins:02d}:{secs:02d}"


@dataclass(frozen=True)
class BatchJob:
    """Everything a batch script says: where it runs, for how long, and the launch inside."""

    scheduler: str  # "PBS" | "SLURM"
    machine: str
    nodes: int
    ppn: int
    walltime_s: int
    submission: str
    outputs: Path
    cwd: Path
    launch: tuple[str, ...]  # the ezpz-tui launch command line the job runs
    source: str  # the run whose plan this is
    sizes: Mapping[str, int]  # tp, pp, cp, world_size, dp of the job
    queue: str | None = None
    account: str | None = None
    filesystems: str | None = None
    gpus_per_node: int = 0
    modules: tuple[str, ...] = ()
    was: tuple[str, ...] = ()  # the launcher argv of the source run, for the reader

    @property
    def command(self) -> tuple[str, ...]:
        """What every rank runs."""
        return self.launch[self.launch.index("--") + 1 :]

    @property
    def output(self) -> Path:
        """Where the job's own stdout and stderr go (the run's logs go to its run directory)."""
        return batch_dir(self.outputs) / f"{self.submission}.out"


def launch_line(
    plan: LaunchPlan, ppn: int, outputs: Path, python: str, resume: Path | None = None
) -> tuple[str, ...]:
    """``ezpz-tui launch`` with ``plan``'s choices, on every node of the job (its hosts are new,
    so the old ``--nodes`` subset and excluded hosts do not carry over), continuing the run
    ``resume`` when given."""
    argv = [python, "-m", "ezpz_tui", "launch", f"--outputs={outputs}"]
    if resume is not None:
        argv.append(f"--resume-from={resume}")
    argv += [f"--tp={plan.tp}", f"--pp={plan.pp}", f"--cp={plan.cp}", f"--ppn={ppn}"]
    argv.append(f"--launcher={plan.launcher}")
    argv += [f"--launcher-arg={flag}" for flag in plan.launcher_args]
    if plan.stage != "off":  # the job's nodes stage the environment as the run's did
        argv.append(f"--stage={plan.stage}")
    if plan.stage_dir:
        argv.append(f"--stage-dir={plan.stage_dir}")
    if plan.stage_min_nodes is not None:
        argv.append(f"--stage-min-nodes={plan.stage_min_nodes:g}")
    argv += [f"--env={key}={value}" for key, value in plan.env]
    return (*argv, "--", *plan.command)


def _pbs_directives(job: BatchJob) -> list[str]:
    system = SELECT_SYSTEM.get(job.machine)
    lines = [f"-N ezpz-{job.submission}"]
    lines.append(f"-l select={job.nodes}" + (f":system={system}" if system else ""))
    if job.machine in FILESYSTEMS:
        lines.append("-l place=scatter")
    lines.append(f"-l walltime={format_walltime(job.walltime_s, 'PBS')}")
    filesystems = job.filesystems or FILESYSTEMS.get(job.machine)
    if filesystems:
        lines.append(f"-l filesystems={filesystems}")
    if job.queue:
        lines.append(f"-q {job.queue}")
    if job.account:
        lines.append(f"-A {job.account}")
    lines += ["-j oe", f"-o {job.output}"]
    return [f"#PBS {line}" for line in lines]


def _slurm_directives(job: BatchJob) -> list[str]:
    lines = [f"--job-name=ezpz-{job.submission}", f"--nodes={job.nodes}"]
    lines.append(f"--ntasks-per-node={job.ppn}")
    if job.gpus_per_node:
        lines.append(f"--gpus-per-node={job.gpus_per_node}")
    lines.append(f"--time={format_walltime(job.walltime_s, 'SLURM')}")
    if job.queue:
        lines.append(f"--partition={job.queue}")
    if job.account:
        lines.append(f"--account={job.account}")
    lines.append(f"--output={job.output}")
    return [f"#SBATCH {line}" for line in lines]


def render(job: BatchJob) -> str:
    """The script's text. Every word the job runs is quoted for the shell: commands are argv
    lists end to end, and nothing in them is interpreted."""
    if job.scheduler not in SCHEDULERS:
        raise ValueError(f"no batch script for scheduler {job.scheduler!r}")
    # A login shell on PBS: ALCF's ``module`` command is defined there.
    shell = "#!/bin/bash -l" if job.scheduler == "PBS" else "#!/bin/bash"
    directives = _pbs_directives(job) if job.scheduler == "PBS" else _slurm_directives(job)
    lines = [shell, *directives]
    lines.append(f"# ezpz-tui submit: the plan of run {job.source}, a new run directory per job")
    sizes = " ".join(f"{k}={v}" for k, v in job.sizes.items())
    lines.append(f"# {job.nodes} node(s) x {job.ppn} ranks: {sizes}")
    if job.was:
        lines.append(f"# its launcher ran: {shlex.join(job.was)}")
    lines.append(f"cd {shlex.quote(str(job.cwd))} || exit 2")
    if job.modules:
        lines.append(f"module load {shlex.join(job.modules)}")
    lines.append(f"export {SUBMISSION_VAR}={shlex.quote(job.submission)}")
    lines.append(f"exec {shlex.join(job.launch)}")
    return "\n".join(lines) + "\n"


def _strings(value: Any) -> tuple[str, ...]:
    ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
    return tuple(value) if ok else ()


def recorded_facts(record: Mapping[str, Any]) -> dict[str, Any]:
    """What a run's ``run.toml`` says that the batch job repeats: ranks per node, the working
    directory, the launcher argv, the loaded modules, where it ran (None or empty when not
    recorded)."""
    launch = record.get("launch") if isinstance(record.get("launch"), Mapping) else {}
    facts = record.get("provenance") if isinstance(record.get("provenance"), Mapping) else {}
    ppn = record.get("ranks_per_node")
    return {
        "ppn": ppn if isinstance(ppn, int) and not isinstance(ppn, bool) and ppn > 0 else None,
        "cwd": launch.get("cwd") if isinstance(launch.get("cwd"), str) else None,
        "was": _strings(launch.get("argv")),
        "modules": _strings(facts.get("modules")),
        "hosts": _strings(record.get("hosts")),
        "scheduler": record.get("scheduler") if isinstance(record.get("scheduler"), str) else None,
        "machine": record.get("machine") if isinstance(record.get("machine"), str) else None,
    }


def job_sizes(plan: LaunchPlan, nodes: int, ppn: int) -> dict[str, int]:
    """The sizes the job will run with, as a run records them."""
    world = nodes * ppn
    model = plan.tp * plan.pp * plan.cp
    return {"tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "world_size": world, "dp": world // model}
