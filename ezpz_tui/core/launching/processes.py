"""Processes on this node: which belong to a run, and how to end them.

UI-free, so the supervisor, the run store and the CLI share one answer to each question. Which
process a pid names (pid plus start time, on this machine) is :mod:`ezpz_tui.core.runs.pids`'s,
since readers that only ask whether a run lives need it too.

Finding a run's processes. A session is not enough: MPICH's Hydra puts its proxy and every rank
in a session of their own, and a daemonizing helper escapes any session. So a process belongs to
the run when it is in the launcher's session or group, or descends from a process that is, or
carries ``EZPZ_RUN_DIR=<this run>`` in its environment (inherited through any launcher that
passes the environment on).

Stopping. SIGINT goes to the launcher's session only, the way Ctrl-C would reach a foreground
launcher, because launchers forward it to their ranks themselves (and Hydra treats a second
SIGINT as "force abort"). After the grace period, SIGTERM goes to every process of the run,
wherever it hides, then SIGKILL. A stop is finished when a scan finds none of them twice in a row.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ezpz_tui.core.runs.pids import environ_has, start_ticks, this_machine
from runtime.env import RUN_DIR_VAR
from runtime.procfs import ProcStat, all_processes
from runtime.rundir import RunState

DEFAULT_GRACE_S = (5.0, 5.0)  # after SIGINT, after SIGTERM
KILL_WAIT_S = 5.0  # after SIGKILL: only a process stuck in the kernel (D state) outlives this
_POLL_S = 0.05


def supervised_here(state: RunState) -> RunState:
    """``state`` naming this process as the run's supervisor, so that any later reader can tell
    whether it still runs."""
    machine = this_machine()
    return replace(
        state,
        host=machine.host,
        boot_id=machine.boot_id,
        pid_ns=machine.pid_ns,
        supervisor_pid=os.getpid(),
        supervisor_start_ticks=start_ticks(os.getpid()),
    )


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # real-time signals have no name of their own
        return f"signal {number}"


def start_session(
    argv: Sequence[str], env: Mapping[str, str], cwd: Path | None, output: Path
) -> subprocess.Popen[bytes]:
    """Start ``argv`` as the leader of a new session, stdin from ``/dev/null`` and stdout and
    stderr appended to ``output``: a keypress in this terminal never reaches it and nothing can
    stall on a full pipe."""
    with open(output, "ab") as out:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )


@contextlib.contextmanager
def deferred_signals(
    signals: Iterable[signal.Signals] = (signal.SIGINT, signal.SIGTERM),
) -> Iterator[list[int]]:
    """Record ``signals`` instead of dying of them, for a loop that stops its run cleanly.

    A handler, not KeyboardInterrupt: a Ctrl-C landing anywhere in the loop (while printing, or
    during the stop itself) would otherwise leave with the run still alive.
    """
    received: list[int] = []

    def record(signum: int, _frame: object) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, record) for sig in signals}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def live_processes() -> dict[int, ProcStat]:
    """Every process on this node that is not a zombie, by pid."""
    return {pid: st for pid, st in all_processes().items() if not st.gone}


@dataclass(frozen=True)
class Escalation:
    """What a stop sent, to whom, and what it left."""

    sent: tuple[str, ...]  # signals, in order, e.g. ("SIGINT", "SIGTERM")
    signalled: dict[int, tuple[str, ...]]  # pid -> the signals it was sent
    remaining: tuple[int, ...]  # pids alive after SIGKILL and the wait; empty when clean


class RunProcesses:
    """The processes of one run on this node, found afresh at every look.

    ``leader_reaped`` says whether the launcher (the session leader) has been waited for: from
    then on the kernel may give its pid to a stranger, so an empty session is empty for good.
    """

    def __init__(self, run_dir: Path, leader_reaped: Callable[[], bool]) -> None:
        self.leader: int | None = None
        self._leader_ticks = 0
        self._leader_reaped = leader_reaped
        self._session_gone = False
        # The capture wrapper resolves the run dir for the user's command: match both spellings.
        self._needles = {
            b"\0" + RUN_DIR_VAR.encode() + b"=" + os.fsencode(path) + b"\0"
            for path in (run_dir, os.path.realpath(run_dir))
        }

    def adopt(self, leader: int, ticks: int | None) -> None:
        """The launcher (started at ``ticks``) leads the run's session and group."""
        self.leader, self._leader_ticks = leader, ticks or 0

    def find(self) -> dict[int, ProcStat]:
        leader = self.leader
        if not os.path.isdir("/proc/self"):
            # No procfs (macOS): the launcher's process group is all that can be seen.
            if leader is None:
                return {}
            try:
                os.killpg(leader, 0)
            except OSError:
                return {}
            return {leader: ProcStat(leader, "S", 0, leader, leader, 0)}
        procs = live_processes()
        session = set()
        if leader is not None and not self._session_gone:
            session = {
                pid
                for pid, st in procs.items()
                if leader in (st.session, st.pgrp) and st.start_ticks >= self._leader_ticks
            }
            if not session and self._leader_reaped():
                self._session_gone = True
        found = session | {
            pid for pid in procs if pid not in session and environ_has(pid, self._needles)
        }
        children: dict[int, list[int]] = {}
        for pid, st in procs.items():
            children.setdefault(st.ppid, []).append(pid)
        todo = list(found)
        while todo:
            for child in children.get(todo.pop(), ()):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        found.discard(os.getpid())
        return {pid: procs[pid] for pid in found}

    def _signal(
        self, sig: signal.Signals, targets: dict[int, ProcStat], signalled: dict[int, list[str]]
    ) -> None:
        """The launcher's group in one atomic call (it catches a fork in flight), the rest
        one by one."""
        leader = self.leader
        grouped = False
        if leader is not None and any(st.pgrp == leader for st in targets.values()):
            try:
                os.killpg(leader, sig)
                grouped = True
            except OSError:
                pass
        for pid, st in targets.items():
            if not (grouped and st.pgrp == leader):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    continue
                except PermissionError:
                    import logging  # here: a stop that may signal everything is the rare case

                    logging.getLogger(__name__).warning(
                        "not allowed to send %s to process %d", sig.name, pid
                    )
                    continue
            signalled.setdefault(pid, []).append(sig.name)

    def _wait_gone(self, timeout: float) -> dict[int, ProcStat]:
        deadline = time.monotonic() + timeout
        while True:
            left = self.find()
            if not left:
                time.sleep(_POLL_S)  # a second empty scan: a fork can slip past one
                left = self.find()
                if not left:
                    return left
            if time.monotonic() >= deadline:
                return left
            time.sleep(_POLL_S)

    def stop(self, grace_s: tuple[float, float] = DEFAULT_GRACE_S) -> Escalation:
        """SIGINT to the launcher's session, then SIGTERM and SIGKILL to whatever of the run is
        left, each after its wait; returns once nothing is left or SIGKILL has failed."""
        signalled: dict[int, list[str]] = {}
        sent: list[str] = []
        left = self.find()
        leader = self.leader
        session = {p: st for p, st in left.items() if leader in (st.session, st.pgrp)}
        if session:
            sent.append("SIGINT")
            self._signal(signal.SIGINT, session, signalled)
            left = self._wait_gone(grace_s[0])
        for sig, wait_s in ((signal.SIGTERM, grace_s[1]), (signal.SIGKILL, KILL_WAIT_S)):
            if not left:
                break
            sent.append(sig.name)
            self._signal(sig, left, signalled)
            left = self._wait_gone(wait_s)
        return Escalation(
            sent=tuple(sent),
            signalled={pid: tuple(sigs) for pid, sigs in signalled.items()},
            remaining=tuple(sorted(left)),
        )
