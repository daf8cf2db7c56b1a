"""The rank's process tree as the host sees it: CPU time, resident memory, process count.

The tree is the rank's command and everything below it, plus the orphans it left to the capture
wrapper (a child subreaper adopts them: they are still the rank's work), but never the wrapper
itself, its sampler thread or a tool the sampler runs (read after these figures, so none is in
flight here). Children are found through ``/proc/PID/task/TID/children``, a few small reads per
process of the tree, rather than a scan of every process on the node; a kernel without those
files gets the scan (:func:`runtime.procfs.all_processes`).

CPU is counted as utime+stime+cutime+cstime over the tree, so a child that ends and is reaped by
its parent in the tree keeps its time counted; time that leaves the tree (a process the wrapper
reaps) would make the difference negative, and a negative difference reads as 0.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from runtime.procfs import all_processes, proc_stat
from runtime.telemetry.tools import Figures


def _children_files() -> bool:
    """Whether this kernel has ``/proc/PID/task/TID/children`` (CONFIG_PROC_CHILDREN)."""
    return os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def children_of(pid: int) -> list[int]:
    """The children of ``pid``, forked by any of its threads; empty once it is gone."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                found.extend(int(child) for child in fh.read().split())
        except (OSError, ValueError):
            continue
    return found


def _rss_bytes(pid: int, page: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * page
    except (OSError, IndexError, ValueError):
        return 0


def _scan() -> Callable[[int], list[int]]:
    """Children by parent from one scan of every process on the node."""
    table: dict[int, list[int]] = {}
    for child, stat in all_processes().items():
        table.setdefault(stat.ppid, []).append(child)
    return lambda pid: table.get(pid, [])


class ProcessTree:
    """Reads the figures of the tree rooted at ``root``; ``adopter`` (the capture wrapper)
    adds the other children it holds, the orphans it adopted from the tree. ``clock`` times
    the interval CPU use is divided by (a test sets it, to read CPU use without a loaded
    machine's scheduling in the figure)."""

    def __init__(
        self,
        root: int,
        adopter: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self.adopter = adopter
        self._clock = clock
        self._hz = os.sysconf("SC_CLK_TCK")
        self._page = os.sysconf("SC_PAGE_SIZE")
        self._procfs = os.path.isdir("/proc/self")  # none on macOS: no host figures there
        self._children_files = _children_files()
        self._last: tuple[float, int] | None = None  # (monotonic time, CPU ticks)

    def pids(self) -> list[int]:
        """The tree's processes, zombies included, parents before children."""
        kids = children_of if self._children_files else _scan()
        tops = [self.root]
        if self.adopter is not None:
            tops += [pid for pid in kids(self.adopter) if pid != self.root]
        seen: set[int] = set()
        order: list[int] = []
        todo = tops
        while todo:
            pid = todo.pop()
            if pid in seen:
                continue
            seen.add(pid)
            order.append(pid)
            todo.extend(kids(pid))
        return order

    def read(self) -> Figures:
        """``rss_bytes`` and ``procs`` now, and ``cpu_pct`` (of one core) since the previous
        read; the first read has no ``cpu_pct``. Nothing without procfs."""
        if not self._procfs:
            return {}
        now = self._clock()
        ticks = rss = procs = 0
        for pid in self.pids():
            stat = proc_stat(pid)
            if stat is None:
                continue
            ticks += stat.cpu_ticks
            if not stat.gone:
                procs += 1
                rss += _rss_bytes(pid, self._page)
        figures: Figures = {"rss_bytes": rss, "procs": procs}
        if self._last is not None and now > self._last[0]:
            spent = max(ticks - self._last[1], 0) / self._hz
            figures["cpu_pct"] = round(100.0 * spent / (now - self._last[0]), 1)
        self._last = (now, ticks)
        return figures
