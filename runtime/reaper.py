"""What a rank leaves behind: adopting its orphans and ending them when the rank ends.

A rank's command can start processes that outlive it: a helper that double-forks into its own
session, a ``sleep 1000 &`` from a shell script, data-loader workers that miss their parent's
death. On a GPU node such a process holds memory the next run needs, and nobody watches it.
Slurm's process tracking ends them with the job step; the capture wrapper does the same for its
rank: it becomes a *child subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``), so every orphan in its
rank's tree is re-parented to it instead of to init, and when the rank's own process ends it
ends whatever of that tree is left: SIGTERM, then SIGKILL after :data:`GRACE_S`.

Standard library only: the wrapper imports this before the rank's command starts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from runtime.procfs import all_processes, proc_stat

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
GRACE_S = 2.0  # between SIGTERM and SIGKILL: long enough to flush, short against a launcher's
KILL_WAIT_S = 5.0  # after SIGKILL: only a process stuck in the kernel outlives this
_POLL_S = 0.05  # each look reads all of /proc


def become_subreaper() -> bool:
    """Make this process adopt the orphans of its descendants; ``False`` where it cannot
    (not Linux, or the call failed), in which case orphans go to init as usual."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # here, not at import: only the wrapper pays for it

    try:
        # The interpreter's own symbols, libc's included: no library search (find_library
        # would run ldconfig in a subprocess at every rank's start).
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def reap_others() -> None:
    """Reap every child that has ended, without blocking: orphans adopted by this subreaper
    that ended on their own would otherwise stay zombies until the wrapper exits."""
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def wait_for(child: int, forget: Callable[[], None]) -> int:
    """Block until ``child`` ends and return its wait status, reaping any adopted orphan that
    ends meanwhile (so none stays a zombie for the rank's whole life) without mistaking it for
    the child.

    ``forget`` runs once the child has ended but before it is reaped: until then its pid cannot
    be given to another process, so whoever signals it by pid must stop doing so there.
    """
    if not hasattr(os, "waitid"):  # macOS: no subreaper there, so no orphans to tell apart
        status = os.waitpid(child, 0)[1]
        forget()
        return status
    while True:
        # WNOWAIT: learn which child ended without reaping it yet. PEP 475 retries the call
        # after a signal handler (the forwarding) has run.
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        if info is not None and info.si_pid == child:
            forget()
            return os.waitpid(child, 0)[1]
        if info is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(info.si_pid, 0)


@dataclass(frozen=True)
class Leftover:
    """A process the rank left behind and the last signal it took to end it."""

    pid: int
    name: str
    signal: str  # "SIGTERM", or "SIGKILL" when it outlived the grace
    gone: bool = True  # False: still there after SIGKILL (stuck in the kernel)

    def describe(self) -> str:
        """As the rank's status records it, e.g. ``pid 1234 (sleep): SIGTERM``."""
        tail = "" if self.gone else ", still there"
        return f"pid {self.pid} ({self.name}): {self.signal}{tail}"


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
            return fh.read().strip() or "?"
    except OSError:
        return "?"


def _below(root: int) -> dict[int, tuple[str, int]]:
    """Every process below ``root``, zombies included: pid -> (state, start ticks)."""
    stats = all_processes()
    children: dict[int, list[int]] = {}
    for pid, stat in stats.items():
        children.setdefault(stat.ppid, []).append(pid)
    found: dict[int, tuple[str, int]] = {}
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            found[pid] = (stats[pid].state, stats[pid].start_ticks)
            todo.append(pid)
    return found


def _live(below: dict[int, tuple[str, int]]) -> dict[int, int]:
    return {pid: ticks for pid, (state, ticks) in below.items() if state not in ("Z", "X")}


def _childless() -> bool:
    """Whether this process has no child at all, zombies included, from the kernel's own list
    (``/proc/self/task/*/children``); False where the kernel keeps none, so the caller looks."""
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children", "rb") as fh:
                if fh.read().strip():
                    return False
    except OSError:
        return False
    return True


def descendants(root: int | None = None) -> dict[int, int]:
    """Live (not zombie) processes below ``root`` (this process): pid -> start ticks."""
    return _live(_below(os.getpid() if root is None else root))


def _send(pid: int, ticks: int, sig: signal.Signals) -> bool:
    """Signal that very process (not a stranger that got its pid); whether it was sent."""
    stat = proc_stat(pid)
    if stat is None or stat.start_ticks != ticks or stat.gone:
        return False
    try:
        os.kill(pid, sig)
    except OSError:
        return False
    return True


def end_leftovers(grace_s: float = GRACE_S, kill_wait_s: float = KILL_WAIT_S) -> list[Leftover]:
    """End every process still below this one: SIGTERM, then SIGKILL to what outlives
    ``grace_s``; reap them; return what was ended, in pid order.

    Call it once the rank's own process has been reaped: from then on everything below the
    wrapper was left behind. Processes forked while this runs are ended too.
    """
    reap_others()
    if not os.path.isdir("/proc/self"):
        return []  # no procfs (macOS): nothing can be found, and nothing was adopted either
    if _childless():
        return []  # what is below descends from a child: the usual end, without reading /proc
    names: dict[int, str] = {}
    sent: dict[int, str] = {}
    ticks_of: dict[int, int] = {}

    def signal_all(live: dict[int, int], sig: signal.Signals, only_new: bool) -> None:
        for pid, ticks in live.items():
            if only_new and ticks_of.get(pid) == ticks:
                continue
            names.setdefault(pid, _name(pid))
            if _send(pid, ticks, sig):
                ticks_of[pid] = ticks
                sent[pid] = sig.name

    def settle(sig: signal.Signals, timeout: float) -> dict[int, int]:
        """Wait until nothing at all is below this process: a zombie not yet reaped counts,
        so none is left for init to reap (and for a pid check to find)."""
        deadline = time.monotonic() + timeout
        while True:
            reap_others()
            below = _below(me)
            live = _live(below)
            signal_all(live, sig, only_new=True)  # a fork in flight gets the same signal
            if not below or time.monotonic() >= deadline:
                return live
            time.sleep(_POLL_S)

    me = os.getpid()
    first = descendants()
    if not first:
        return []
    signal_all(first, signal.SIGTERM, only_new=False)
    left = settle(signal.SIGTERM, grace_s)
    if left:
        for pid, ticks in left.items():
            if _send(pid, ticks, signal.SIGKILL):
                sent[pid] = "SIGKILL"
        left = settle(signal.SIGKILL, kill_wait_s)
    return [Leftover(pid, names[pid], sent[pid], gone=pid not in left) for pid in sorted(sent)]


def describe_ended(leftovers: list[Leftover]) -> str:
    """The line the rank's log gets, e.g. ``ended 1 process the rank left behind: pid 1234
    (sleep)``; a process that needed SIGKILL says so."""
    count = len(leftovers)
    noun = "process" if count == 1 else "processes"
    parts = []
    for item in leftovers:
        how = "" if item.signal == "SIGTERM" else f", {item.signal}"
        still = "" if item.gone else ", still there"
        parts.append(f"pid {item.pid} ({item.name}{how}{still})")
    return f"ended {count} {noun} the rank left behind: {', '.join(parts)}"
