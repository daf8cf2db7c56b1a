"""``ezpz-tui submit``: a batch job for the plan of a run that worked, and what is known of it.

:func:`prepare` turns a run's record (or a plan file) and what the person asks (nodes, walltime,
queue, account) into a :class:`~ezpz_tui.core.launching.batch_script.BatchJob`, refusing a
plan that cannot run on the job it asks for. :func:`submit` writes the script under
``<outputs>/.batch/``, hands it to ``qsub`` or ``sbatch`` and records the job id there
(``<submission>.json``, written atomically). What the queue does next is
:mod:`ezpz_tui.core.runs.queued`'s business.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.batch_script import (
    DEFAULT_WALLTIME_S,
    SCHEDULERS,
    SUBMIT_TOOL,
    BatchJob,
    job_sizes,
    launch_line,
    recorded_facts,
)
from ezpz_tui.core.launching.plan import LaunchPlan, validate
from ezpz_tui.core.runs.outputs import batch_dir, cause
from ezpz_tui.core.runs.record import RunStoreError, read_run_toml
from ezpz_tui.core.runs.store import RunStore
from runtime.atomic import write_atomic
from runtime.checkpoint_dirs import RESUME_VAR, CheckpointError, resolve
from runtime.rundir import State

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

Which = Callable[[str], "str | None"]
SUBMIT_TIMEOUT_S = 60.0


class SubmitError(Exception):
    """Nothing was submitted; the message says why, for the person as is."""


@dataclass(frozen=True)
class BatchRequest:
    """What the person asks of the job; ``None`` nodes: as many as the run used."""

    nodes: int | None = None
    walltime_s: int = DEFAULT_WALLTIME_S
    queue: str | None = None
    account: str | None = None
    filesystems: str | None = None
    scheduler: str | None = None  # PBS or SLURM, where the one found here is not the one meant


def plan_source(store: RunStore, run_or_plan: str | None) -> tuple[str, dict[str, Any]]:
    """(name, record) of the plan to submit: a run (id, prefix or directory), a ``run.toml`` or
    plan file, or else the newest run that succeeded."""
    if run_or_plan is None:
        done = [r for r in store.list_runs() if r.state == State.SUCCEEDED]
        if not done:
            raise SubmitError(
                f"no run in {store.outputs} has succeeded yet: name a run or a run.toml"
            )
        return done[0].run_id, read_run_toml(done[0].path)
    path = Path(run_or_plan).expanduser()
    if path.is_file():
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SubmitError(f"cannot read a plan from {path}: {exc}") from None
        # A run.toml holds its plan under [plan]; a plan file is the plan itself.
        return str(path), data if isinstance(data.get("plan"), dict) else {"plan": data}
    try:
        run_dir = store.resolve(run_or_plan)
        return run_dir.name, read_run_toml(run_dir)
    except RunStoreError as exc:
        raise SubmitError(str(exc)) from None


def resumed_run(store: RunStore, run: str | None) -> Path:
    """``submit --resume RUN``: the run the job continues; :class:`SubmitError` when it names
    none or the run has no complete checkpoint yet (the job would only start over)."""
    if run is None:
        raise SubmitError("--resume needs the run to continue: ezpz-tui submit --resume RUN")
    try:
        run_dir = store.resolve(run)
        resolve(run_dir)
    except (RunStoreError, CheckpointError) as exc:
        raise SubmitError(f"cannot resume: {exc}") from None
    return run_dir.absolute()


def target_scheduler(alloc: Allocation, recorded: str | None, which: Which) -> str:
    """PBS or SLURM: this job's scheduler, else the one the run was made under, else the one
    whose submit tool is on PATH."""
    for scheduler in (alloc.scheduler, recorded):
        if scheduler in SCHEDULERS:
            return scheduler
    found = [s for s in SCHEDULERS if which(SUBMIT_TOOL[s])]
    if len(found) == 1:
        return found[0]
    if found:
        raise SubmitError("both qsub and sbatch are on PATH: submit from inside a job")
    raise SubmitError(
        "no scheduler here: not inside a PBS or Slurm job, and neither qsub nor sbatch is on PATH"
    )


def new_submission() -> str:
    """``batch-20261126-231502-3fa9``: sortable like run ids, random enough to be unique."""
    now = datetime.now()
    return f"batch-{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def prepare(
    record: Mapping[str, Any],
    source: str,
    request: BatchRequest,
    alloc: Allocation,
    outputs: Path,
    which: Which = shutil.which,
    python: str = sys.executable,
    resume: Path | None = None,
) -> BatchJob:
    """The batch job for ``record``'s plan; :class:`SubmitError` when the plan cannot run on
    the nodes asked for (every error of the plan said at once). ``resume``: the run the job's
    launch continues (``--resume-from``), from the newest checkpoint it has when the job
    starts, not the one it continued from itself."""
    if not isinstance(record.get("plan"), Mapping):
        raise SubmitError(f"{source} records no [plan]")
    try:
        plan = LaunchPlan.from_dict(record["plan"])
    except (ValueError, TypeError) as exc:
        raise SubmitError(f"the plan of {source}: {exc}") from None
    facts = recorded_facts(record)
    scheduler = request.scheduler or target_scheduler(alloc, facts["scheduler"], which)
    ppn = plan.ppn or facts["ppn"] or alloc.accelerators_per_host
    nodes = request.nodes or len(facts["hosts"]) or plan.nodes or 1
    job_plan = plan.with_changes(nodes=None, exclude=(), ppn=ppn)
    if resume is not None:
        job_plan = job_plan.with_changes(env=tuple(kv for kv in plan.env if kv[0] != RESUME_VAR))
    job_hosts = tuple(f"node{i}" for i in range(nodes))
    on_job = replace(alloc, scheduler=scheduler, hosts=job_hosts)
    errors = [p.message for p in validate(job_plan, on_job) if p.level == "error"]
    if errors:
        raise SubmitError(f"the plan of {source} cannot run on {nodes} node(s): {' '.join(errors)}")
    outputs = Path(outputs).expanduser().absolute()
    # Outside a job (a login node, a laptop) the machine is the one the run ran on.
    in_job = alloc.scheduler in SCHEDULERS
    return BatchJob(
        scheduler=scheduler,
        machine=alloc.machine if in_job else facts["machine"] or alloc.machine,
        nodes=nodes,
        ppn=ppn,
        walltime_s=request.walltime_s,
        submission=new_submission(),
        outputs=outputs,
        cwd=Path(facts["cwd"] or os.getcwd()),
        launch=launch_line(job_plan, ppn, outputs, python, resume),
        source=source,
        sizes=job_sizes(job_plan, nodes, ppn),
        queue=request.queue,
        account=request.account,
        filesystems=request.filesystems,
        gpus_per_node=alloc.accelerators_per_host if alloc.accelerator_kind != "cpu" else 0,
        modules=facts["modules"],
        was=facts["was"],
    )


def parse_job_id(scheduler: str, output: str) -> str | None:
    """The job id ``qsub`` prints (``123.polaris-pbs-01...``) or ``sbatch --parsable`` does
    (``123`` or ``123;cluster``)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if not lines:
        return None
    return lines[-1].split(";")[0] if scheduler == "SLURM" else lines[-1]


@dataclass(frozen=True)
class Submitted:
    job_id: str
    script: Path
    record: Path


def submit(job: BatchJob, script: str, which: Which = shutil.which) -> Submitted:
    """Write ``script``, submit it, record the job; :class:`SubmitError` when the tool is
    missing or refuses (the script is removed then: nothing was queued)."""
    tool_name = SUBMIT_TOOL[job.scheduler]
    tool = which(tool_name)
    if tool is None:
        raise SubmitError(f"{tool_name} is not on PATH: cannot submit to {job.scheduler} here")
    folder = batch_dir(job.outputs)
    path = folder / f"{job.submission}.sh"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o755)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(script)
    except OSError as exc:
        raise SubmitError(f"cannot write the script in {folder}: {cause(exc)}") from None
    argv = [tool, str(path)] if job.scheduler == "PBS" else [tool, "--parsable", str(path)]
    try:
        done = subprocess.run(
            argv,
            cwd=job.cwd if job.cwd.is_dir() else None,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=SUBMIT_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
        job_id = parse_job_id(job.scheduler, done.stdout) if done.returncode == 0 else None
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    except (OSError, subprocess.SubprocessError) as exc:
        job_id, why = None, str(exc)
    if job_id is None:
        path.unlink(missing_ok=True)
        raise SubmitError(f"{tool_name} refused the job: {why}")
    record = folder / f"{job.submission}.json"
    write_atomic(record, json.dumps(_record(job, job_id, path), indent=2).encode())
    return Submitted(job_id, path, record)


def _record(job: BatchJob, job_id: str, script: Path) -> dict[str, Any]:
    return {
        "submission": job.submission,
        "job_id": job_id,
        "scheduler": job.scheduler,
        "submitted": time.time(),
        "source": job.source,
        "script": str(script),
        "output": str(job.output),
        "nodes": job.nodes,
        "ppn": job.ppn,
        "walltime_s": job.walltime_s,
        "queue": job.queue,
        "account": job.account,
        "filesystems": job.filesystems,
        "sizes": dict(job.sizes),
        "command": list(job.command),
    }


def last_request(outputs: Path) -> BatchRequest:
    """The walltime, queue, account and filesystems of the newest submission in ``outputs``
    (what the TUI's ``b`` asks for, having no options to type them in); the defaults when
    there is none."""
    try:
        newest = max(batch_dir(Path(outputs)).glob("batch-*.json"), default=None)
        data = json.loads(newest.read_text(encoding="utf-8")) if newest else {}
    except (OSError, ValueError):
        data = {}
    if not isinstance(data, dict):
        return BatchRequest()

    def text(key: str) -> str | None:
        return data[key] if isinstance(data.get(key), str) else None

    walltime = data.get("walltime_s")
    ok = isinstance(walltime, int) and not isinstance(walltime, bool) and walltime > 0
    return BatchRequest(
        walltime_s=walltime if ok else DEFAULT_WALLTIME_S,
        queue=text("queue"),
        account=text("account"),
        filesystems=text("filesystems"),
    )
