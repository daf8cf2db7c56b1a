"""Submitted batch jobs in the runs list, from ``queued`` until their run directory appears.

A job's record (``<outputs>/.batch/<submission>.json``, written by
:func:`ezpz_tui.core.launching.submission.submit`) is listed as long as no run records its
submission; from then on the run is listed as any other and the record is passed by without
being read. Before that, the scheduler says where the job is (``squeue``, ``qstat``, one call
per scheduler for all the jobs): ``queued``, or ``running`` while its launch is starting.
A job the scheduler no longer knows, with no run, ended before its run began (a bad module,
a walltime too short): it is listed ``lost`` with its output file named, and this process does
not ask about it again. Listing writes nothing (docs/run-directory.md: readers never write): the
record stays as ``submit`` wrote it, and another process asks once more, with the other jobs in
the same call. A record an earlier version marked ``ended`` is lost without asking. Where the
scheduler cannot be asked (no tool here, or no answer in time) a job stays ``queued``. Listing
never raises.
"""

from __future__ import annotations

import getpass
import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.outputs import batch_dir
from ezpz_tui.core.runs.record import positive_int
from ezpz_tui.core.runs.store import RunStore, RunSummary
from ezpz_tui.core.runs.tools import run_tool
from runtime.rundir import State

ASK_TIMEOUT_S = 5.0
ASK_EVERY_S = 15.0
_answers: dict[tuple[str, tuple[str, ...]], tuple[float, dict[str, State] | None]] = {}
_ended: set[tuple[str, str]] = set()  # (scheduler, job id) of jobs seen gone without a run
# Scheduler states of a job that has started: its launch is on its way.
_SLURM_STARTED = frozenset({"RUNNING", "COMPLETING", "CONFIGURING"})
_PBS_STARTED = frozenset({"R", "E", "B"})

JobStates = Callable[[str, list[str]], "dict[str, State] | None"]


def _short(job_id: str) -> str:
    """``123.polaris-pbs-01.hsn.cm...`` and ``123.polaris-pbs-01`` are the same PBS job."""
    return job_id.split(".")[0]


def parse_squeue(output: str) -> dict[str, State]:
    """``squeue -h -o '%i %T'``: every job the queue holds, started or waiting."""
    states = {}
    for line in output.splitlines():
        job, _, state = line.strip().partition(" ")
        if job:
            started = state.strip() in _SLURM_STARTED
            states[job] = State.RUNNING if started else State.QUEUED
    return states


def parse_qstat_jobs(output: str) -> dict[str, State] | None:
    """``qstat -x -f -F json JOB...``: queued or started jobs by short id (finished ones, ``F``,
    left out); None when the output is not the JSON it should be."""
    try:
        jobs = json.loads(output).get("Jobs", {})
    except (ValueError, AttributeError):
        return None
    if not isinstance(jobs, dict):
        return None
    states = {}
    for job, fields in jobs.items():
        state = fields.get("job_state") if isinstance(fields, dict) else None
        if state and state != "F":
            states[_short(job)] = State.RUNNING if state in _PBS_STARTED else State.QUEUED
    return states


def job_states(scheduler: str, job_ids: list[str]) -> dict[str, State] | None:
    """Where the scheduler has ``job_ids`` (a job it does not list has ended); None when it
    cannot be asked here. The same question within :data:`ASK_EVERY_S` gets the last answer:
    the TUI lists runs every two seconds, and sites ask users not to poll their scheduler
    that often."""
    key = (scheduler, tuple(job_ids))
    asked = _answers.get(key)
    if asked is not None and time.monotonic() - asked[0] < ASK_EVERY_S:
        return asked[1]
    answer = _ask(scheduler, job_ids)
    _answers.clear()  # only the latest question is worth keeping
    _answers[key] = (time.monotonic(), answer)
    return answer


def _ask(scheduler: str, job_ids: list[str]) -> dict[str, State] | None:
    if scheduler == "SLURM":
        done = run_tool(["squeue", "-h", "-u", getpass.getuser(), "-o", "%i %T"], ASK_TIMEOUT_S)
        return parse_squeue(done.stdout) if done is not None and done.returncode == 0 else None
    if scheduler == "PBS":
        done = run_tool(["qstat", "-x", "-f", "-F", "json", *job_ids], ASK_TIMEOUT_S)
        return parse_qstat_jobs(done.stdout) if done is not None else None
    return None


def _records(folder: Path, linked: set[str]) -> list[tuple[Path, dict[str, Any]]]:
    """The job records of submissions no run has claimed yet."""
    try:
        paths = sorted(p for p in folder.glob("*.json") if p.stem not in linked)
    except OSError:
        return []
    records = []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("job_id"), str):
            records.append((path, data))
    return records


def queued_runs(
    outputs: Path, runs: Iterable[RunSummary], ask: JobStates = job_states
) -> list[RunSummary]:
    """The submitted jobs no run of ``runs`` stands for yet, as rows of the runs list."""
    linked = {r.submission for r in runs if r.submission}
    records = _records(batch_dir(outputs), linked)
    waiting: dict[str, list[str]] = {}
    for _, record in records:
        if not _gone(record):
            waiting.setdefault(str(record.get("scheduler")), []).append(record["job_id"])
    known = {scheduler: ask(scheduler, jobs) for scheduler, jobs in waiting.items()}
    rows = []
    for path, record in records:
        scheduler = str(record.get("scheduler"))
        states = known.get(scheduler)
        job = record["job_id"]
        if _gone(record):
            state = State.LOST
        elif states is None:
            state = State.QUEUED
        else:
            state = states.get(job) or states.get(_short(job)) or State.LOST
            if state == State.LOST:
                _ended.add((scheduler, job))
        rows.append(_row(path, record, state))
    return rows


def _gone(record: dict[str, Any]) -> bool:
    """Whether the job is known to have ended without a run: seen so by this process, or
    marked so by an earlier version."""
    return "ended" in record or (str(record.get("scheduler")), record["job_id"]) in _ended


def _row(path: Path, record: dict[str, Any], state: State) -> RunSummary:
    sizes = record.get("sizes") if isinstance(record.get("sizes"), dict) else {}
    job = record["job_id"]
    lost = f"job {job} ended before its run began; its output: {record.get('output')}"
    submitted = record.get("submitted")
    command = record.get("command")
    return RunSummary(
        run_id=str(record.get("submission", path.stem)),
        path=path,
        state=state,
        exit_code=None,
        signal=None,
        reason=lost if state == State.LOST else f"{record.get('scheduler')} job {job}",
        created=float(submitted) if isinstance(submitted, (int, float)) else _mtime(path),
        tp=positive_int(sizes.get("tp")),
        pp=positive_int(sizes.get("pp")),
        cp=positive_int(sizes.get("cp")),
        dp=positive_int(sizes.get("dp")),
        world_size=positive_int(sizes.get("world_size")),
        parent=None,
        command=command if isinstance(command, list) else None,
        job_id=job,
        submission=str(record.get("submission", path.stem)),
        queued=True,
    )


def _mtime(path: Path) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def listed_runs(store: RunStore, ask: JobStates = job_states) -> list[RunSummary]:
    """The runs list: run directories and the submitted jobs that have none yet, newest
    first."""
    return with_queued(store.outputs, store.list_runs(), ask)


def with_queued(
    outputs: Path, runs: list[RunSummary], ask: JobStates = job_states
) -> list[RunSummary]:
    """``runs`` (of ``outputs``) and the submitted jobs that have none yet, newest first."""
    rows = [*queued_runs(outputs, runs, ask), *runs]
    return sorted(rows, key=lambda r: r.created, reverse=True)
