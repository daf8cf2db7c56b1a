"""What state a reader should believe a run is in, from its record and what this machine sees.

``lost`` is derived here and never written, because the reader may be wrong and the directory
belongs to whoever started the run: the record says pending or running but nobody is left to
record the end. On the machine that started the run this is exact: the launcher and the
supervisor are both gone (pid plus kernel start time, so a reused pid does not count as alive).
From another node of a shared filesystem processes cannot be seen, so the supervisor's heartbeat
decides (:data:`runtime.rundir.STALE_AFTER_S`). A launcher still alive after its supervisor died
stays ``running`` (it is), with a ``reason`` saying that its end will not be recorded.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.ezpz_layout import ezpz_state
from ezpz_tui.core.runs.pids import process_alive, this_machine
from runtime.rundir import STALE_AFTER_S, RunState, State, read_state


def run_state(run_dir: Path, now: float | None = None) -> RunState:
    """The run's state as a reader on this machine should see it; never raises.

    ``lost`` (see the module docstring) is derived here and never written, since the supervisor
    may still be alive somewhere this reader cannot see.
    """
    recorded = read_state(run_dir)
    if recorded.state == State.UNKNOWN:  # no state.json: a run ezpz wrote says what it can
        return ezpz_state(run_dir, now) or recorded
    if recorded.live:
        lost, reason = _liveness(recorded, time.time() if now is None else now)
        if lost:
            return replace(recorded, state=State.LOST, recorded_state=recorded.state, reason=reason)
        if reason:
            return replace(recorded, reason=reason)
    return recorded


def _differs(a: Any, b: Any) -> bool:
    return a is not None and b is not None and a != b


def _liveness(state: RunState, now: float) -> tuple[bool, str | None]:
    """Whether a pending/running record is lost, and a reason worth showing either way."""
    here = this_machine()
    if state.host != here.host or _differs(state.pid_ns, here.pid_ns):
        # Another node (or container): its processes are invisible, only the heartbeat speaks.
        updated = state.updated
        if updated is None or now - updated <= STALE_AFTER_S:
            return False, None
        host = state.host or "another host"
        return (
            True,
            f"no heartbeat from the supervisor on {host} for {(now - updated) / 60:.0f} min",
        )
    if _differs(state.boot_id, here.boot_id):
        return True, f"{here.host} has rebooted since the run was {state.state}"
    owner = state.supervisor_pid
    owner_alive = owner is None or process_alive(owner, state.supervisor_start_ticks)
    launcher = state.launcher_pid
    if launcher is not None and process_alive(launcher, state.launcher_start_ticks):
        if owner_alive:
            return False, None
        return (
            False,
            f"supervisor (pid {owner}) exited: the run goes on, its end will not be recorded",
        )
    if owner_alive:  # about to record the end, or not yet started the launcher
        return False, None
    if launcher is None:
        return True, f"process {owner} that created the run exited before starting it"
    return True, (
        f"launcher (pid {launcher}) and supervisor (pid {owner}) exited without recording "
        "how the run ended"
    )
