"""Which process a pid names, and where a pid names anything at all.

A pid alone can be handed to a stranger once its process is reaped; a pid plus the kernel's
start time (``/proc/PID/stat``, clock ticks since boot) names one process, on one boot of one
machine in one pid namespace (:func:`this_machine`). Zombies count as gone: they hold nothing and
only their parent can remove them.

Only reading here, shared by whoever asks whether a run is still alive (liveness, the stack
dump) and whoever runs it: signalling and finding a run's processes stay with
:mod:`ezpz_tui.core.launching.processes`.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from typing import NamedTuple

from runtime.procfs import proc_stat


def start_ticks(pid: int) -> int | None:
    stat = proc_stat(pid)
    return stat.start_ticks if stat else None


def process_alive(pid: int, ticks: int | None) -> bool:
    """Whether that very process still runs: a zombie or a reused pid does not count."""
    if pid <= 0:
        return False
    stat = proc_stat(pid)
    if stat is None:
        if os.path.isdir("/proc/self"):
            return False
        try:  # no procfs (macOS): existence is all one can learn
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if stat.gone:
        return False
    return ticks is None or stat.start_ticks == ticks


class Machine(NamedTuple):
    """Host, boot and pid namespace: pids can only be checked where all three match."""

    host: str
    boot_id: str | None
    pid_ns: int | None


def _read_small(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def this_machine() -> Machine:
    try:
        pid_ns: int | None = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        pid_ns = None
    return Machine(socket.gethostname(), _read_small("/proc/sys/kernel/random/boot_id"), pid_ns)


def environ_has(pid: int, needles: Iterable[bytes]) -> bool:
    """Whether the process's environment holds any of ``needles`` (``b"\\0NAME=value\\0"``):
    how a process that escaped its run's session is still known to belong to the run."""
    try:
        if os.getuid() != 0 and os.stat(f"/proc/{pid}").st_uid != os.getuid():
            return False  # unreadable, and not ours to signal anyway
        with open(f"/proc/{pid}/environ", "rb") as fh:
            data = b"\0" + fh.read() + b"\0"
    except OSError:
        return False
    return any(needle in data for needle in needles)
