"""Start, watch, stop and relaunch a launcher's process tree on this node.

The launcher (mpiexec, srun, mpirun, torchrun) runs in its own session with stdin from
``/dev/null`` and its output in ``launcher.log``, so a keypress in the TUI's terminal never
reaches the ranks and nothing can stall on a full pipe. Its environment is the TUI's minus the
rank and rendezvous variables (:data:`runtime.env.RANK_VARS`), plus the launch's overrides, plus
``EZPZ_RUN_DIR`` naming the run directory.

Finding a run's processes. A session is not enough: MPICH's Hydra puts its proxy and every rank
in a session of their own, and a daemonizing helper escapes any session. So a process belongs to
the run when it is in the launcher's session, or descends from a process that is, or carries
``EZPZ_RUN_DIR=<this run>`` in its environment (inherited through any launcher that passes the
environment on). Zombies are ignored: they hold nothing and only their parent can remove them.

Stopping. SIGINT goes to the launcher's session only, the way Ctrl-C would reach a foreground
launcher, because launchers forward it to their ranks themselves (and Hydra treats a second
SIGINT as "force abort"). After the grace period, SIGTERM goes to every process of the run,
wherever it hides, then SIGKILL. A stop is finished when a scan finds none of them twice in a row.

Only runs this :class:`Supervisor` started can be stopped: a :class:`RunHandle` is the only way
to reach a run's processes, and there is none for a directory someone else started. Attaching to
another run is read-only (:func:`ezpz_tui.core.launching.runstore.read_state`).

A watcher thread per run waits on the launcher, refreshes the heartbeat, and writes the final
state without anyone polling; listeners learn of each state change from that thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ezpz_tui.core.launching.runstore import (
    HEARTBEAT_S,
    ProcStat,
    RunStoreError,
    owner_identity,
    proc_stat,
    read_recorded_state,
    update_run_meta,
    write_state,
)
from runtime.env import RANK_VARS, RUN_DIR_VAR

log = logging.getLogger(__name__)

DEFAULT_GRACE_S = (5.0, 5.0)  # after SIGINT, after SIGTERM
KILL_WAIT_S = 5.0  # after SIGKILL: only a process stuck in the kernel (D state) outlives this
START_FAILED_CODE = 127  # the shell's "command not found", as runtime.capture uses it
_POLL_S = 0.05

Listener = Callable[["RunHandle", dict[str, Any]], None]


@dataclass(frozen=True)
class StopResult:
    """What a stop did, so the UI can say it and a relaunch can refuse to start over leftovers."""

    run_dir: Path
    escalation: tuple[str, ...]  # signals sent, in order, e.g. ("SIGINT", "SIGTERM")
    signalled: dict[int, tuple[str, ...]]  # pid -> the signals it was sent
    remaining: tuple[int, ...]  # pids still alive after SIGKILL and the wait; empty when clean
    elapsed_s: float
    already_finished: bool  # the launcher had ended before the stop was asked for
    state: str  # the run's state after the stop

    @property
    def clean(self) -> bool:
        return not self.remaining


def _live_processes() -> dict[int, ProcStat]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    out = {}
    for name in names:
        if name.isdigit():
            stat = proc_stat(int(name))
            if stat is not None and stat.state not in ("Z", "X"):
                out[stat.pid] = stat
    return out


def _environ_has(pid: int, needles: Iterable[bytes]) -> bool:
    try:
        if os.getuid() != 0 and os.stat(f"/proc/{pid}").st_uid != os.getuid():
            return False  # unreadable, and not ours to signal anyway
        with open(f"/proc/{pid}/environ", "rb") as fh:
            data = b"\0" + fh.read() + b"\0"
    except OSError:
        return False
    return any(needle in data for needle in needles)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # real-time signals have no name of their own
        return f"signal {number}"


def _launch_env(overrides: Mapping[str, str], run_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    env.update(overrides)
    env[RUN_DIR_VAR] = str(run_dir)
    return env


def _start_error(argv: Sequence[str], cwd: Path | None, exc: Exception) -> str:
    if isinstance(exc, FileNotFoundError) and cwd is not None and str(exc.filename) == str(cwd):
        return f"cannot start the launcher: working directory {cwd} does not exist"
    if isinstance(exc, FileNotFoundError):
        return f"cannot start {argv[0]!r}: no such program (is it on PATH?)"
    if isinstance(exc, PermissionError):
        return f"cannot start {argv[0]!r}: permission denied (is it executable?)"
    if isinstance(exc, OSError):
        return f"cannot start {argv[0]!r}: {exc.strerror or exc}"
    return f"cannot start the launcher: {exc}"


class RunHandle:
    """One run started by a :class:`Supervisor`; made only by :meth:`Supervisor.start`."""

    def __init__(self, supervisor: Supervisor, run_dir: Path, argv: list[str]) -> None:
        self.supervisor = supervisor
        self.run_dir = run_dir
        self.argv = argv
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._start_ticks = 0
        self._returncode: int | None = None
        self._state: dict[str, Any] = read_recorded_state(run_dir)
        self._stop_requested = False
        self._session_gone = False
        self._lock = threading.Lock()  # state writes and the stop-vs-exit decision
        self._stop_lock = threading.Lock()  # one stop at a time
        self._done = threading.Event()  # set once the final state is recorded
        # capture.py resolves the run dir for the user's command, so match both spellings.
        self._needles = {
            b"\0" + RUN_DIR_VAR.encode() + b"=" + os.fsencode(path) + b"\0"
            for path in (run_dir, os.path.realpath(run_dir))
        }

    # --- reading --------------------------------------------------------------------------

    # ``_state`` is replaced whole, never changed in place, so reading it needs no lock and never
    # waits on a write (an fsync on a shared filesystem can take a while).

    @property
    def state(self) -> dict[str, Any]:
        """The last state this handle recorded (a copy)."""
        return dict(self._state)

    def poll(self) -> str:
        """running, succeeded, failed or stopped; never blocks."""
        return self._state["state"]

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the final state is recorded; the launcher's status, ``None`` on timeout."""
        return self._returncode if self._done.wait(timeout) else None

    def processes(self) -> list[int]:
        """Pids of the run's live processes on this node, launcher included."""
        return sorted(self._find())

    # --- state bookkeeping ----------------------------------------------------------------

    def _write(self, state: str, **fields: Any) -> dict[str, Any]:
        """Record a state; a disk that refuses is logged, not raised into the watcher thread,
        and the handle still knows the state."""
        try:
            self._state = write_state(self.run_dir, state, **fields)
        except OSError as exc:
            log.warning("cannot record state %s of %s: %s", state, self.run_dir, exc)
            self._state = {**self._state, **fields, "state": state, "updated": time.time()}
        return dict(self._state)

    def _fail_to_start(self, reason: str) -> None:
        with contextlib.suppress(OSError), open(self.run_dir / "launcher.log", "ab") as fh:
            fh.write(f"ezpz-tui: {reason}\n".encode())
        now = time.time()
        with self._lock:
            self._returncode = START_FAILED_CODE
            state = self._write(
                "failed", start=now, end=now, exit_code=START_FAILED_CODE, reason=reason
            )
            self._done.set()
        self.supervisor._notify(self, state)

    def _launched(self, proc: subprocess.Popen[bytes]) -> None:
        stat = proc_stat(proc.pid)
        self._proc, self.pid = proc, proc.pid
        self._start_ticks = stat.start_ticks if stat else 0
        with self._lock:
            state = self._write(
                "running",
                launcher_pid=proc.pid,
                launcher_start_ticks=stat.start_ticks if stat else None,
                start=time.time(),
                **owner_identity(),
            )
        self.supervisor._notify(self, state)
        threading.Thread(target=self._watch, name=f"watch {self.run_dir.name}", daemon=True).start()

    def _watch(self) -> None:
        assert self._proc is not None
        while True:
            try:
                code = self._proc.wait(timeout=HEARTBEAT_S)
                break
            except subprocess.TimeoutExpired:
                with self._lock:
                    self._write(self._state["state"])  # heartbeat for readers on other nodes
        fields: dict[str, Any] = {"end": time.time(), "exit_code": None, "signal": None}
        if code < 0:
            fields.update(signal=-code, signal_name=_signal_name(-code))
        else:
            fields["exit_code"] = code
        with self._lock:
            # A stop asked for before the exit was seen wins: the user ended it, whatever code.
            if self._stop_requested:
                name, fields["stopped_by_user"] = "stopped", True
            else:
                name = "succeeded" if code == 0 else "failed"
            self._returncode = code
            state = self._write(name, **fields)
            self._done.set()
        self.supervisor._notify(self, state)

    # --- finding and stopping -------------------------------------------------------------

    def _find(self) -> dict[int, ProcStat]:
        leader = self.pid
        if not os.path.isdir("/proc/self"):
            # No procfs (macOS): the launcher's process group is all that can be seen.
            if leader is None:
                return {}
            try:
                os.killpg(leader, 0)
            except OSError:
                return {}
            return {leader: ProcStat(leader, "S", 0, leader, leader, 0)}
        procs = _live_processes()
        session = set()
        if leader is not None and not self._session_gone:
            session = {
                pid
                for pid, st in procs.items()
                if leader in (st.session, st.pgrp) and st.start_ticks >= self._start_ticks
            }
            if not session and self._done.is_set():
                # Empty for good: from now on the kernel may hand that id to a stranger.
                self._session_gone = True
        found = session | {
            pid for pid in procs if pid not in session and _environ_has(pid, self._needles)
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
        leader = self.pid
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
                    log.warning("not allowed to send %s to process %d", sig.name, pid)
                    continue
            signalled.setdefault(pid, []).append(sig.name)

    def _wait_gone(self, timeout: float) -> dict[int, ProcStat]:
        deadline = time.monotonic() + timeout
        while True:
            left = self._find()
            if not left:
                time.sleep(_POLL_S)  # a second empty scan: a fork can slip past one
                left = self._find()
                if not left:
                    return left
            if time.monotonic() >= deadline:
                return left
            time.sleep(_POLL_S)

    def stop(self, grace_s: tuple[float, float] = DEFAULT_GRACE_S) -> StopResult:
        """Stop every process of the run on this node; returns once none is left or SIGKILL
        has failed. Safe to call more than once and on a run that already ended (it then only
        removes leftovers). Blocks for at most about ``sum(grace_s) + 2 * KILL_WAIT_S`` seconds,
        so call it from a worker, not the UI thread."""
        began = time.monotonic()
        with self._stop_lock:
            with self._lock:
                already = self._done.is_set()
                if not already:
                    self._stop_requested = True
                    self._write(self._state["state"], stop_requested=time.time())
            signalled: dict[int, list[str]] = {}
            escalation: list[str] = []
            left = self._find()
            leader = self.pid
            session = {p: st for p, st in left.items() if leader in (st.session, st.pgrp)}
            if session:
                escalation.append("SIGINT")
                self._signal(signal.SIGINT, session, signalled)
                left = self._wait_gone(grace_s[0])
            for sig, wait_s in ((signal.SIGTERM, grace_s[1]), (signal.SIGKILL, KILL_WAIT_S)):
                if not left:
                    break
                escalation.append(sig.name)
                self._signal(sig, left, signalled)
                left = self._wait_gone(wait_s)
            if self._proc is not None:
                self._done.wait(KILL_WAIT_S)  # the watcher records the launcher's end
            elapsed = time.monotonic() - began
            if signalled:
                with self._lock:
                    state = self._write(
                        self._state["state"],
                        stop_signals=escalation,
                        stop_remaining=sorted(left),
                        stop_elapsed_s=round(elapsed, 3),
                    )
                self.supervisor._notify(self, state)
            return StopResult(
                run_dir=self.run_dir,
                escalation=tuple(escalation),
                signalled={pid: tuple(sigs) for pid, sigs in signalled.items()},
                remaining=tuple(sorted(left)),
                elapsed_s=elapsed,
                already_finished=already,
                state=self.poll(),
            )


class Supervisor:
    """Starts launchers and keeps the handles that are the only way to stop them."""

    def __init__(self) -> None:
        self._handles: list[RunHandle] = []
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()

    @property
    def handles(self) -> tuple[RunHandle, ...]:
        """Every run this supervisor started, oldest first."""
        with self._lock:
            return tuple(self._handles)

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(handle, state)`` for every state a run records (running, its end, then
        a stop's summary), from the thread that recorded it (the watcher, for an end), so a UI
        worker needs no polling; returns a function that unsubscribes."""
        with self._lock:
            self._listeners.append(listener)

        def remove() -> None:
            with self._lock, contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return remove

    def _notify(self, handle: RunHandle, state: dict[str, Any]) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(handle, dict(state))
            except Exception:  # a UI bug must not kill the watcher that records the run's end
                log.exception("run state listener failed")

    def _new_handle(self, run_dir: Path, argv: Sequence[str]) -> RunHandle:
        run_dir = Path(run_dir).absolute()
        recorded = read_recorded_state(run_dir)
        if not run_dir.is_dir() or recorded["state"] != "pending":
            raise ValueError(
                f"{run_dir} is not a fresh run directory (state {recorded['state']!r}); "
                "every launch needs a new one from RunStore.create"
            )
        handle = RunHandle(self, run_dir, [str(a) for a in argv])
        with self._lock:
            self._handles.append(handle)
        return handle

    def start(
        self,
        run_dir: Path,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        cwd: Path | None = None,
    ) -> RunHandle:
        """Launch ``argv`` for a fresh (``pending``) run directory.

        Problems starting the launcher (no such program, bad working directory) do not raise:
        the handle comes back finished, its state ``failed`` with a readable ``reason`` that is
        also in ``launcher.log``. Raises ``ValueError`` only for a directory that is not a
        pending run, since writing into a previous run would destroy its record.
        """
        handle = self._new_handle(run_dir, argv)
        if not argv or not argv[0] or not all(isinstance(a, str) for a in argv):
            handle._fail_to_start(f"cannot start the launcher: bad command {list(argv)!r}")
            return handle
        overrides = dict(env or {})
        try:
            update_run_meta(
                handle.run_dir,
                {"launch": {"argv": list(argv), "env": overrides, "cwd": str(cwd or Path.cwd())}},
            )
            with open(handle.run_dir / "launcher.log", "ab") as out:
                proc = subprocess.Popen(
                    list(argv),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=_launch_env(overrides, handle.run_dir),
                    cwd=cwd,
                    start_new_session=True,
                    close_fds=True,
                )
        except (OSError, ValueError, TypeError, RunStoreError) as exc:
            handle._fail_to_start(_start_error(argv, cwd, exc))
            return handle
        handle._launched(proc)
        return handle

    def relaunch(
        self,
        handle: RunHandle,
        new_run_dir: Path,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        *,
        cwd: Path | None = None,
        grace_s: tuple[float, float] = DEFAULT_GRACE_S,
    ) -> RunHandle:
        """Stop ``handle``'s run completely, then start the new one.

        If processes of the old run survive SIGKILL the new run is not started (they would hold
        the accelerators and ports it needs); its state becomes ``failed`` with the reason.
        """
        if handle.supervisor is not self:
            raise ValueError("that run was started by another Supervisor")
        result = handle.stop(grace_s)
        if result.clean:
            return self.start(new_run_dir, argv, env, cwd=cwd)
        new = self._new_handle(new_run_dir, argv)
        pids = ", ".join(map(str, result.remaining))
        new._fail_to_start(
            f"not started: processes of {handle.run_dir.name} would not die ({pids})"
        )
        return new

    def stop_all(self, grace_s: tuple[float, float] = DEFAULT_GRACE_S) -> list[StopResult]:
        """Stop every run with a process left (live, or ended with leftovers), in parallel; for
        quitting with runs alive."""
        live = [h for h in self.handles if h.wait(0) is None or h.processes()]
        if not live:
            return []
        with ThreadPoolExecutor(max_workers=len(live)) as pool:
            return list(pool.map(lambda h: h.stop(grace_s), live))
