"""Stopping a run that another process on this node supervises.

A run outlives the ``ezpz-tui`` that started it when the user left it running on quitting (its
tether supervises it then), or when it was started by ``ezpz-tui launch`` in another terminal.
Either supervisor takes SIGTERM as the user's stop and records the run ``stopped``; so a later
``ezpz-tui`` (``X`` on the run, or ``ezpz-tui stop RUN``) stops it by signalling its supervisor,
named in the run's state record with its start time (so a reused pid is never signalled). A TUI that
supervises the run is not signalled: that would end somebody's session; the run is stopped there.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from ezpz_tui.core.runs.ezpz_layout import is_ezpz_run
from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.pids import process_alive, this_machine
from runtime.rundir import RunState, read_state

TETHER = "ezpz_tui.core.launching.tether"  # as older versions started it: python -m TETHER
TETHER_FILE = os.path.join("ezpz_tui", "core", "launching", "tether.py")  # python -S FILE


@dataclass(frozen=True)
class Refused:
    """Why the run cannot be stopped from here, in words for the user."""

    reason: str


def _command_line(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return [part.decode(errors="replace") for part in fh.read().split(b"\0") if part]
    except OSError:
        return []


def stoppable(run_dir: Path) -> int | Refused:
    """The pid of the supervisor to signal, or why there is none."""
    state = run_state(run_dir)
    name = run_dir.name
    if not state.live:
        return Refused(f"{name} is not running ({state.state})")
    if is_ezpz_run(run_dir):  # no supervisor to ask: ezpz's own ranks write it
        return Refused(f"{name} was not started by ezpz-tui: {state.reason}")
    here = this_machine()
    if state.host != here.host or state.pid_ns not in (None, here.pid_ns):
        return Refused(f"{name} is supervised on {state.host}: stop it there")
    pid = state.supervisor_pid
    if pid is None or not process_alive(pid, state.supervisor_start_ticks):
        return Refused(f"{name} has no live supervisor to ask: {state.reason or 'unknown'}")
    if pid == os.getpid():
        return Refused(f"{name} is supervised by this process")
    argv = _command_line(pid)
    if TETHER in argv or any(word.endswith(TETHER_FILE) for word in argv) or "launch" in argv[2:]:
        return pid
    return Refused(
        f"{name} is supervised by the ezpz-tui (pid {pid}) that started it: stop it there"
    )


def stop_elsewhere(run_dir: Path, timeout_s: float = 40.0) -> RunState | Refused:
    """Ask the run's supervisor to stop it and wait for the end it records."""
    pid = stoppable(run_dir)
    if isinstance(pid, Refused):
        return pid
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state = read_state(run_dir)
        if not state.live:
            return state
        time.sleep(0.2)
    return Refused(f"{run_dir.name}'s supervisor (pid {pid}) did not record a stop in time")
