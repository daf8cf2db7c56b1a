"""What a tether does once its supervisor has gone (:mod:`~ezpz_tui.core.launching.tether`):
stop the run and record it, or supervise a run left to it until it ends.

Apart from the tether's own module so that a tether waiting on its pipe, which is every run's,
has imported nothing but the standard library.
"""

from __future__ import annotations

import signal
import threading
import time
from dataclasses import replace
from pathlib import Path

from ezpz_tui.core.launching.failover import record_end_fault
from ezpz_tui.core.launching.processes import DEFAULT_GRACE_S, RunProcesses, supervised_here
from ezpz_tui.core.launching.reserve import release_reserve
from ezpz_tui.core.runs.culprit import culprit_cause, verdict
from ezpz_tui.core.runs.ending import cause_in, finalise, first_failure, world_size_of
from ezpz_tui.core.runs.pids import process_alive
from runtime.checkpoint_dirs import stop_asked
from runtime.rundir import (
    HEARTBEAT_S,
    RankState,
    RunState,
    State,
    read_state,
    read_statuses,
    write_state,
)

KEEP_POLL_S = 0.5  # how often a kept run's launcher is looked at


def take_down(
    run_dir: Path, launcher_pid: int, ticks: int, reason: str, by_user: bool = False
) -> RunState:
    """Stop what is left of the run, and record it ``stopped`` with ``reason``."""
    processes = RunProcesses(run_dir, lambda: not process_alive(launcher_pid, ticks or None))
    processes.adopt(launcher_pid, ticks or None)
    began = time.monotonic()
    done = processes.stop(DEFAULT_GRACE_S)
    recorded = read_state(run_dir)
    if not recorded.live:  # the supervisor recorded the end after all
        return recorded
    end = replace(
        supervised_here(recorded),
        state=State.STOPPED,
        end=time.time(),
        stopped_by_user=by_user,
        reason=reason,
        stop_signals=done.sent,
        stop_remaining=done.remaining,
        stop_elapsed_s=round(time.monotonic() - began, 3),
    )
    release_reserve(run_dir)
    finalise(run_dir, end, None, end.end or time.time())
    return write_state(run_dir, end)


def keep(run_dir: Path, launcher_pid: int, ticks: int) -> RunState:
    """Supervise the run its supervisor left to this process, until it ends or is stopped."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda _sig, _frame: stop.set())
    recorded = read_state(run_dir)
    if not recorded.live:
        return recorded
    write_state(run_dir, supervised_here(recorded))
    beat = time.monotonic()
    while process_alive(launcher_pid, ticks or None):
        if stop.wait(KEEP_POLL_S):
            return take_down(run_dir, launcher_pid, ticks, "stopped by the user", by_user=True)
        if time.monotonic() - beat >= HEARTBEAT_S:
            beat = time.monotonic()
            recorded = read_state(run_dir)
            if not recorded.live:
                return recorded
            write_state(run_dir, recorded)
    return _record_end_from_ranks(run_dir)


def _record_end_from_ranks(run_dir: Path) -> RunState:
    """The launcher has gone and was not this process's child: its exit status is lost, so the
    ranks' ends tell the run's, and its status is theirs as srun gives it: 0 when every rank
    succeeded, else the first failed rank's exit code or signal."""
    recorded = read_state(run_dir)
    if not recorded.live:
        return recorded
    statuses = read_statuses(run_dir)
    culprit = verdict(run_dir, statuses).culprit  # by the ranks' records of their raises
    first = culprit.status if culprit is not None else first_failure(statuses)
    world = world_size_of(statuses)
    ok = bool(statuses) and all(s.state == RankState.SUCCEEDED for s in statuses)
    ok = ok and (world is None or len(statuses) == world)
    end = replace(recorded, state=State.SUCCEEDED if ok else State.FAILED, end=time.time())
    if ok:
        end = replace(end, exit_code=0)
        if stop_asked(run_dir):  # its ranks ended after the save a relaunch asked of them
            end = replace(end, state=State.STOPPED, stopped_by_user=True)
    else:
        cause = (
            culprit_cause(run_dir, culprit, statuses)
            if culprit
            else cause_in(run_dir, first, statuses)
            if first
            else "the launcher ended without every rank's success"
        )
        end = replace(end, failed_rank=first.rank if first else None, cause=cause)
        if first is not None:
            sig, name = first.signal, first.signal_name
            end = replace(end, exit_code=first.exit_code, signal=sig, signal_name=name)
    release_reserve(run_dir)
    finalise(run_dir, end, world, end.end or time.time(), statuses)
    state = write_state(run_dir, end)
    if state.state == State.FAILED:  # once, as the supervisor would have
        record_end_fault(run_dir)
    return state
