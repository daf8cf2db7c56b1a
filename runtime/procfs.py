"""``/proc/PID/stat`` read once, for the capture wrapper (in a rank) and the supervisor (in
the TUI or CLI) alike: standard library only, nothing at import."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/PID/stat`` that process bookkeeping needs."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    start_ticks: int
    # utime + stime + cutime + cstime: its CPU time and that of the children it has reaped,
    # so a child's time stays counted in the tree when its parent reaps it
    cpu_ticks: int = 0

    @property
    def gone(self) -> bool:
        """A zombie (or dead) process: it holds nothing and only its parent can remove it."""
        return self.state in ("Z", "X")


def proc_stat(pid: int) -> ProcStat | None:
    """Parse ``/proc/PID/stat``; ``None`` when the process is gone or there is no procfs."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name may hold spaces and parentheses; everything after the last ')' is fixed.
    rest = raw[raw.rfind(")") + 2 :].split()
    try:
        ticks = sum(int(field) for field in rest[11:15])
        return ProcStat(
            pid, rest[0], int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19]), ticks
        )
    except (IndexError, ValueError):
        return None


def all_processes() -> dict[int, ProcStat]:
    """Every process on this node, zombies included, by pid."""
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    found = {}
    for name in names:
        if name.isdigit():
            stat = proc_stat(int(name))
            if stat is not None:
                found[stat.pid] = stat
    return found
