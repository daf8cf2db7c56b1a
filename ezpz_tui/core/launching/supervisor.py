"""Start, watch, stop and relaunch launches on this node, recording each run's state.

The supervisor starts a :class:`~ezpz_tui.core.launching.launcher.Launch` (the run store has
already recorded it) as the leader of a new session with its output in the launcher log (see
:func:`~ezpz_tui.core.launching.processes.start_session`). Its environment is the TUI's minus
the rank and rendezvous variables (:data:`runtime.env.RANK_VARS`), plus the launch's additions,
plus ``EZPZ_RUN_DIR`` naming the run directory, which is how its processes are found again
(:class:`~ezpz_tui.core.launching.processes.RunProcesses`).

Only runs this :class:`Supervisor` started can be stopped: a :class:`RunHandle` is the only way
to reach a run's processes, and there is none for a directory someone else started. Attaching to
another run is read-only (:func:`ezpz_tui.core.runs.liveness.run_state`).

A watcher thread per run waits on the launcher, refreshes the heartbeat, and writes the final
state without anyone polling; listeners learn of each state change from that thread. It also
fails fast, as ``srun --kill-on-bad-exit`` and torchrun do: one ``stat`` of the status folder
every :data:`FAIL_FAST_POLL_S` says whether a rank ended, and a rank that failed on its own
account stops the rest of the job (MPICH's Hydra would let its peers run on into a collective
that never completes). The rank it names is the culprit by the ranks' records of their raises
(:mod:`~ezpz_tui.core.runs.culprit`), not the first to end: a peer that lost a raising rank
often ends before it. When the launcher has exited, the watcher gives every rank its true end
(:mod:`~ezpz_tui.core.runs.ending`) before the run's, and for a failed run the host its node
fault names to ``bad_hosts.txt`` (:func:`~ezpz_tui.core.launching.failover.record_end_fault`).

A launch that stages its environment (:mod:`~ezpz_tui.core.launching.staging`) has it copied to
every node before the launcher starts, in the thread that starts it (the run is ``pending`` for
that long); a node that cannot copy fails the launch before any rank starts, unless whoever
started it gives a smaller launch without that node (:data:`Shrink`: the session does when the
plan has ``stage_min_nodes``), which then runs in the same run directory. The watcher removes
the copies when the run ends, whatever ended it, unless the plan keeps them.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ezpz_tui.core.launching.finish_settings import FinishSettings
from ezpz_tui.core.launching.launcher import Launch
from ezpz_tui.core.launching.processes import (
    DEFAULT_GRACE_S,
    KILL_WAIT_S,
    RunProcesses,
    signal_name,
    start_session,
    supervised_here,
)
from ezpz_tui.core.launching.rank_program import launcher_env
from ezpz_tui.core.launching.reserve import NO_SPACE, nearly_full, no_space, release_reserve
from ezpz_tui.core.runs.pids import start_ticks
from runtime import flight
from runtime.atomic import write_atomic
from runtime.env import RANK_VARS, RUN_DIR_VAR
from runtime.rundir import (
    HEARTBEAT_S,
    RankState,
    RankStatus,
    RunDir,
    RunState,
    State,
    blocks_of,
    read_state,
    read_statuses,
    write_state,
)
from runtime.telemetry.record import DEFAULT_INTERVAL_S, INTERVAL_VAR

if TYPE_CHECKING:
    import logging

    from ezpz_tui.core.launching.tether import Tether
    from ezpz_tui.core.watching.efficiency import PeakSettings
    from ezpz_tui.core.watching.raised import RaisedWatch

# What only a started run uses (its tether, the watch of its ends and tracebacks, the finalizer)
# is imported once its launcher has started: the ranks do not wait for it.


def _log() -> logging.Logger:
    """The supervisor's logger; ``logging`` is imported by the first message (a launch that
    goes well has none)."""
    import logging

    return logging.getLogger(__name__)


START_FAILED_CODE = 127  # the shell's "command not found", as runtime.capture uses it
STOPPED_STAGING = "stopped while staging the environment; no rank was started"
FAIL_FAST_POLL_S = 0.5  # how often the watcher looks at the status folder: one stat
FAIL_FAST_GRACE_S = (2.0, 3.0)  # the failed job's other ranks: after SIGINT, after SIGTERM

Listener = Callable[["RunHandle", RunState], None]
# Given the nodes whose staging failed (host: why), the launch without them, recorded in the
# same run directory, and what changed in words; or why there is none ("": no reason to add).
Shrink = Callable[[Mapping[str, str]], "tuple[Launch, str] | str"]


@dataclass(frozen=True)
class StopResult:
    """What a stop did, so the UI can say it and a relaunch can refuse to start over leftovers."""

    run_dir: Path
    escalation: tuple[str, ...]  # signals sent, in order, e.g. ("SIGINT", "SIGTERM")
    signalled: dict[int, tuple[str, ...]]  # pid -> the signals it was sent
    remaining: tuple[int, ...]  # pids still alive after SIGKILL and the wait; empty when clean
    elapsed_s: float
    already_finished: bool  # the launcher had ended before the stop was asked for
    state: State  # the run's state after the stop

    @property
    def clean(self) -> bool:
        return not self.remaining


def _launch_env(overrides: Mapping[str, str], run_dir: Path, launcher: str = "") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    env.update(overrides)
    if launcher != "srun":  # srun's tasks did not get --export's watch without it here
        launcher_env(env)
    env[RUN_DIR_VAR] = str(run_dir)
    return env


def _stage_env(overrides: Mapping[str, str], run_dir: Path) -> dict[str, str]:
    """The launch's environment without the run directory's name, so that the staging
    processes are none of the run's (a stop or a leftover search never finds them)."""
    env = _launch_env(overrides, run_dir)
    env.pop(RUN_DIR_VAR)
    return env


class _LauncherExit:
    """Waits up to a timeout for the launcher to exit. Through a pidfd where Linux has one,
    which wakes the moment the launcher exits: ``Popen.wait`` with a timeout polls, with sleeps
    that grow to 50 ms, which every launch would add to its end."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc
        try:
            self._fd: int | None = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):  # not Linux 5.3+
            self._fd = None

    def wait(self, timeout: float) -> int | None:
        """The launcher's status once it has exited, else None after ``timeout``."""
        if self._fd is None:
            try:
                return self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return None
        if self._proc.returncode is None and not select.select([self._fd], [], [], timeout)[0]:
            return None
        self.close()
        return self._proc.wait()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


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
    """One run started by a :class:`Supervisor`; made only by the supervisor."""

    def __init__(self, supervisor: Supervisor, launch: Launch, recorded: RunState) -> None:
        self.supervisor = supervisor
        self.launch = launch
        self.run_dir = launch.run_dir
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._returncode: int | None = None
        self._state = recorded
        self._stop_requested = False
        self._stop_reason: str | None = None  # what asked for the stop, when not the user
        self._handing_over = False  # asked to save now and stop: its end is the user's stop
        # The rank whose failure is ending the run, and that failure in words.
        self._failure: tuple[RankStatus, str] | None = None
        self._live: list[RankStatus] = []  # ranks whose status said running at the last look
        self._raised: RaisedWatch | None = None  # made once the launcher started
        self._tether: Tether | None = None
        self._disk_full = False  # a state write failed for want of space
        self._detached = False  # left to its tether: this process records nothing more
        self.bad_hosts_added: tuple[str, ...] = ()  # named by its node fault, at its end
        self.staging_note: str | None = None  # it went on without nodes that could not stage
        self._lock = threading.Lock()  # state writes and the stop-vs-exit decision
        self._stop_lock = threading.Lock()  # one stop at a time
        self._done = threading.Event()  # set once the final state is recorded
        self._processes = RunProcesses(self.run_dir, self._done.is_set)

    # --- reading --------------------------------------------------------------------------

    # ``_state`` is an immutable value replaced whole, so reading it needs no lock and never
    # waits on a write (an fsync on a shared filesystem can take a while).

    @property
    def state(self) -> RunState:
        """The last state this handle recorded."""
        return self._state

    def poll(self) -> State:
        """running, succeeded, failed or stopped; never blocks."""
        return self._state.state

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the final state is recorded; the launcher's status, ``None`` on timeout."""
        return self._returncode if self._done.wait(timeout) else None

    def processes(self) -> list[int]:
        """Pids of the run's live processes on this node, launcher included."""
        return sorted(self._processes.find())

    # --- state bookkeeping ----------------------------------------------------------------

    def _write(self, state: State, **fields: Any) -> RunState:
        """Record a state; a disk that refuses is logged, not raised into the watcher thread,
        and the handle still knows the state."""
        new = replace(self._state, state=state, **fields)
        try:
            self._state = write_state(self.run_dir, new)
        except OSError as exc:
            self._disk_full = self._disk_full or no_space(exc)
            _log().warning("cannot record state %s of %s: %s", state, self.run_dir, exc)
            self._state = replace(new, updated=time.time())
        return self._state

    def _fail_to_start(self, reason: str, staged: bool = False, stopped: bool = False) -> None:
        """Record a launch that never started the ranks: failed, or ``stopped`` by the user;
        ``staged``: its copies were made, and are removed first unless kept."""
        if staged:
            self._unstage()
        release_reserve(self.run_dir)
        with (
            contextlib.suppress(OSError),
            open(RunDir(self.run_dir).launcher_log, "ab") as fh,
        ):
            fh.write(f"ezpz-tui: {reason}\n".encode())
        now = time.time()
        with self._lock:
            self._returncode = START_FAILED_CODE
            if stopped:
                state = self._write(State.STOPPED, start=now, end=now, stopped_by_user=True)
            else:
                state = self._write(
                    State.FAILED, start=now, end=now, exit_code=START_FAILED_CODE, reason=reason
                )
            self._done.set()
        self.supervisor._notify(self, state)

    def _without_unstaged(self, launch: Launch, said: str, failed: Mapping[str, str]) -> None:
        """Go on with ``launch``, the smaller one without the nodes whose staging ``failed``."""
        self.launch = replace(launch, run_dir=self.run_dir)
        if launch.stage is not None:
            from ezpz_tui.core.launching.staging import record_excluded

            record_excluded(self.run_dir, launch.stage, failed)
        self.staging_note = said
        with (
            contextlib.suppress(OSError),
            open(RunDir(self.run_dir).launcher_log, "ab") as fh,
        ):
            fh.write(f"ezpz-tui: {said}\n".encode())

    def _launched(self, proc: subprocess.Popen[bytes]) -> None:
        from ezpz_tui.core.launching.tether import start_tether
        from ezpz_tui.core.watching.raised import RaisedWatch

        self._raised = RaisedWatch(RunDir(self.run_dir), self.supervisor.raised_grace_s)
        ticks = start_ticks(proc.pid)
        self._proc, self.pid = proc, proc.pid
        self._processes.adopt(proc.pid, ticks)
        with self._lock:
            self._state = supervised_here(self._state)  # this process records the end
            state = self._write(
                State.RUNNING, launcher_pid=proc.pid, launcher_start_ticks=ticks, start=time.time()
            )
        try:
            self._tether = start_tether(self.run_dir, proc.pid, ticks, self.supervisor.finish)
        except OSError as exc:
            _log().warning("no tether for %s (it dies with this process): %s", self.run_dir, exc)
        self.supervisor._notify(self, state)
        threading.Thread(target=self._watch, name=f"watch {self.run_dir.name}", daemon=True).start()

    def _watch(self) -> None:
        assert self._proc is not None
        beat = time.monotonic()
        stamp: tuple[int, ...] | None = None
        asked = False
        launcher = _LauncherExit(self._proc)
        while True:
            code = launcher.wait(FAIL_FAST_POLL_S)
            if code is not None:
                break
            if self.supervisor.kill_on_bad_exit:
                stamp = self._fail_fast(stamp)
                self._stop_raised()
            if self._detached:
                launcher.close()
                return
            if not asked and self._walltime_near():
                asked = True
                self._ask_checkpoint()
            if time.monotonic() - beat >= HEARTBEAT_S:
                beat = time.monotonic()
                with self._lock:
                    self._write(self._state.state)  # heartbeat for readers on other nodes
        if not self._detached:
            self._record_end(code)

    def _walltime_near(self) -> bool:
        """Within ``before_walltime`` of the walltime's end; never past it (a reading that
        old says nothing about this job)."""
        end, before = self.launch.walltime_end, self.supervisor.before_walltime_s
        return end is not None and before > 0 and end - before <= time.time() < end

    def _ask_checkpoint(self) -> None:
        """Ask the ranks to checkpoint now: the job's walltime ends within ``before_walltime``.
        The request is a file :mod:`runtime.checkpoint` looks for; the launcher log says so."""
        if self._handing_over:  # saving now already, for a relaunch
            return
        left = self.launch.walltime_end - time.time() if self.launch.walltime_end else 0.0
        line = f"ezpz-tui: {max(left, 0):.0f} s of walltime left: asked the ranks to checkpoint\n"
        from runtime.checkpoint_dirs import request_path

        try:
            write_atomic(request_path(self.run_dir), json.dumps({"walltime_left_s": left}).encode())
            with open(RunDir(self.run_dir).launcher_log, "a", encoding="utf-8") as fh:
                fh.write(line)
        except OSError as exc:
            _log().warning("cannot ask %s to checkpoint: %s", self.run_dir, exc)

    def ask_save_and_stop(self) -> str | None:
        """Ask the live run's ranks to save at the step they are at and then end, running no
        step after it (a relaunch's request, answered by :mod:`runtime.checkpoint`); its
        id, which the answer repeats. None when the run has ended or the request cannot be
        written. Its end is then the user's stop, not a success; a rank that fails meanwhile
        still fails it."""
        from runtime.checkpoint_dirs import ask_to_save_and_stop

        with self._lock:
            if self._done.is_set():
                return None
            self._handing_over = True
            self._write(self._state.state, stop_requested=time.time())
        try:
            request_id = ask_to_save_and_stop(self.run_dir, "relaunch")
            with open(RunDir(self.run_dir).launcher_log, "a", encoding="utf-8") as fh:
                fh.write("ezpz-tui: asked the ranks to save now and stop (a relaunch)\n")
        except OSError as exc:
            _log().warning("cannot ask %s to save and stop: %s", self.run_dir, exc)
            return None
        return request_id

    def _fail_fast(self, stamp: tuple[int, ...] | None) -> tuple[int, ...] | None:
        """Stop the job when a rank has failed on its own account; returns the folders' stamp
        (a ``stat`` of the status folder and of each of its blocks)."""
        from ezpz_tui.core.runs.ending import cause_in, first_failure, status_dir_stamp

        run = RunDir(self.run_dir)
        world = self.launch.world_size
        blocks = (
            [run.status_dir / name for name in blocks_of(world)]
            if world
            else run.rank_folders(run.status_dir)[1:]
        )
        now = status_dir_stamp(run.status_dir, blocks)
        if now == stamp or self._failure is not None or self._stop_requested:
            return now
        statuses = read_statuses(self.run_dir)
        self._live = [s for s in statuses if s.state == RankState.RUNNING]
        first = first_failure(
            s for s in statuses if s.state == RankState.FAILED and not s.signals_received
        )
        if first is not None:
            # The first to end may have lost a peer that raised first and is still exiting:
            # the culprit is the verdict's, by the ranks' own records of their raises.
            from ezpz_tui.core.runs.culprit import culprit_cause, verdict

            found = verdict(self.run_dir, statuses).culprit
            if found is None:
                self._fail(first, cause_in(self.run_dir, first, statuses))
            else:
                self._fail(found.status, culprit_cause(self.run_dir, found, statuses))
        return now

    def _stop_raised(self) -> None:
        """Stop the job when a rank's log has ended in a traceback for the grace period while
        its process lives on: its peers would wait for it until a backend timeout."""
        if self._failure is not None or self._stop_requested or not self._live:
            return
        assert self._raised is not None  # the watch runs once the launcher started
        found = self._raised.look([s.rank for s in self._live], time.monotonic())
        if found is not None:
            rank, exception = found
            status = next(s for s in self._live if s.rank == rank)
            where = f" on {status.host}" if status.host else ""
            grace = self.supervisor.raised_grace_s
            self._fail(status, f"rank {rank}{where}: raised {exception} (alive {grace:g}s after)")

    def _fail(self, first: RankStatus, cause: str) -> None:
        with self._lock:
            if self._stop_requested or self._failure is not None:
                return
            self._failure = (first, cause)
            state = self._write(State.RUNNING, failed_rank=first.rank, cause=cause)
        self.supervisor._notify(self, state)
        _log().info("%s: %s; stopping the other ranks", self.run_dir.name, cause)
        threading.Thread(
            target=self._processes.stop, args=(FAIL_FAST_GRACE_S,), daemon=True
        ).start()

    def _asked_to_stop(self, code: int) -> bool:
        """The ranks ended by themselves after a save and stop asked of them (by this process,
        or another: a headless relaunch writes the request into the run directory)."""
        if self._handing_over:
            return True
        from runtime.checkpoint_dirs import stop_asked

        return code == 0 and stop_asked(self.run_dir)

    def _record_end(self, code: int) -> None:
        """The launcher has exited: every rank's end, then the run's (the order readers rely on:
        a final run has final ranks)."""
        from ezpz_tui.core.launching.finalize import start_finalize
        from ezpz_tui.core.runs.ending import finalise

        with self._lock:
            if self._failure is not None:  # a rank's failure ended it, whatever else happened
                name, by_user = State.FAILED, False
            elif self._stop_requested or self._asked_to_stop(code):  # a stop asked for
                # before the exit: the user, unless the stop said what else asked for it (the
                # terminal hung up)
                name, by_user = State.STOPPED, self._stop_reason is None
            else:
                name, by_user = (State.SUCCEEDED if code == 0 else State.FAILED), False
            self._returncode = code
            sig = -code if code < 0 else None  # killed by a signal: no exit code of its own
            statuses = read_statuses(self.run_dir)
            # Only a failed run names its culprit: a launch that went well reads no raise
            # records and imports none of the code that weighs them.
            first, cause = self._culprit(statuses) if name == State.FAILED else (None, None)
            end = replace(
                self._state,
                state=name,
                end=time.time(),
                stopped_by_user=by_user,
                exit_code=None if sig else code,
                signal=sig,
                signal_name=signal_name(sig) if sig else None,
            )
            if name == State.STOPPED and self._stop_reason is not None:
                end = replace(end, reason=self._stop_reason)  # who or what ended the run
            if name == State.FAILED and first is not None:
                end = replace(end, failed_rank=first.rank, cause=cause)
            if self._failure is not None and first is not None and first.state == RankState.FAILED:
                # The launcher's own status came from the stop fail-fast sent it: as srun
                # does, the run's is that of the rank that failed.
                sig = first.signal
                end = replace(
                    end,
                    exit_code=None if sig else first.exit_code,
                    signal=sig,
                    signal_name=signal_name(sig) if sig else None,
                )
            full = self._disk_full or nearly_full(self.run_dir)
            if full and name != State.SUCCEEDED:
                end = replace(end, state=State.FAILED, stopped_by_user=False, cause=NO_SPACE)
                name = State.FAILED
            release_reserve(self.run_dir)  # the room the final records need
            finalise(self.run_dir, end, self.launch.world_size, end.end or time.time(), statuses)
            state = self._write(name, **{k: getattr(end, k) for k in _END_FIELDS})
            if name == State.FAILED:  # once, by whoever records the end; never by a reader
                from ezpz_tui.core.launching.failover import record_end_fault

                self.bad_hosts_added = record_end_fault(self.run_dir)
            # Its own process, started before anyone may exit.
            start_finalize(self.run_dir, self.supervisor.finish)
            self._unstage()  # before the end is known: the copy is gone once a wait returns
            self._done.set()
        self.supervisor._notify(self, state)
        if self._tether is not None:
            self._tether.release()

    def _culprit(self, statuses: list[RankStatus]) -> tuple[RankStatus | None, str | None]:
        """The rank whose failure ended the run, and the cause: the fail-fast's, unless the
        ranks' records now show that one a symptom of another's own failure (a record on a
        shared filesystem may show late); with no fail-fast, the verdict's. A rank that has
        ended by itself since is taken as it ended (its exit is the run's)."""
        from ezpz_tui.core.runs.culprit import culprit_cause, verdict
        from ezpz_tui.core.runs.ending import cause_in, first_failure

        found = verdict(self.run_dir, statuses)
        culprit = found.culprit
        if self._failure is None:
            if culprit is not None:
                return culprit.status, culprit_cause(self.run_dir, culprit, statuses)
            first = first_failure(statuses)
            return first, cause_in(self.run_dir, first, statuses) if first else None
        first, cause = self._failure
        if (
            culprit is not None
            and culprit.own
            and culprit.rank != first.rank
            and found.symptom(first.rank) is not None
        ):
            return culprit.status, culprit_cause(self.run_dir, culprit, statuses)
        now = next((s for s in statuses if s.rank == first.rank), None)
        if now is not None and now.end is not None and not now.signals_received:
            first = now
        return first, cause

    def _unstage(self) -> None:
        """Remove the run's staged copies from every node, unless the plan keeps them."""
        staging = self.launch.stage
        if staging is not None and not staging.keep:
            from ezpz_tui.core.launching.staging import unstage

            unstage(staging, _stage_env(self.launch.env, self.run_dir), self.run_dir)

    # --- leaving ------------------------------------------------------------------------

    def detach(self) -> bool:
        """Leave the run to its tether, which supervises it from now on (this process is about
        to quit); False when there is nothing to leave (it ended, or it has no tether)."""
        with self._lock:
            if self._done.is_set() or self._tether is None:
                return False
            self._detached = True
            self._tether.keep()
        return True

    # --- stopping -------------------------------------------------------------------------

    def stop(
        self, grace_s: tuple[float, float] = DEFAULT_GRACE_S, reason: str | None = None
    ) -> StopResult:
        """Stop every process of the run on this node; returns once none is left or SIGKILL
        has failed. Safe to call more than once and on a run that already ended (it then only
        removes leftovers). Blocks for at most about ``sum(grace_s) + 2 * KILL_WAIT_S`` seconds,
        so call it from a worker, not the UI thread. ``reason``: what asked for the stop when
        it was not the user (the terminal hung up), recorded as the run's reason; None is the
        user's stop."""
        began = time.monotonic()
        with self._stop_lock:
            with self._lock:
                already = self._done.is_set()
                if not already:
                    self._stop_requested = True
                    self._stop_reason = reason
                    self._write(self._state.state, stop_requested=time.time())
            done = self._processes.stop(grace_s)
            if self._proc is not None:
                self._done.wait(KILL_WAIT_S)  # the watcher records the launcher's end
            elapsed = time.monotonic() - began
            if done.signalled:
                with self._lock:
                    state = self._write(
                        self._state.state,
                        stop_signals=done.sent,
                        stop_remaining=done.remaining,
                        stop_elapsed_s=round(elapsed, 3),
                    )
                self.supervisor._notify(self, state)
            return StopResult(
                run_dir=self.run_dir,
                escalation=done.sent,
                signalled=done.signalled,
                remaining=done.remaining,
                elapsed_s=elapsed,
                already_finished=already,
                state=self.poll(),
            )


_END_FIELDS = (
    "end",
    "stopped_by_user",
    "reason",
    "exit_code",
    "signal",
    "signal_name",
    "failed_rank",
    "cause",
)


class Supervisor:
    """Starts launches and keeps the handles that are the only way to stop them.

    ``kill_on_bad_exit`` (the config's ``[launch] kill_on_bad_exit``): stop a run's other ranks
    as soon as one fails, or once one's log has ended in a traceback for ``raised_grace_s``
    seconds (``[launch] raised_grace_s``) with its process alive; off leaves them running, for
    jobs that tolerate a lost rank. ``peaks`` (the config's ``[efficiency]``): the peak each
    run's ``summary.json`` divides by, and ``slow_factor`` (``[monitor]``) the straggler its
    verdicts name, passed on to the finalizer and the tether.
    """

    def __init__(
        self,
        kill_on_bad_exit: bool = True,
        raised_grace_s: float = 10.0,
        telemetry_s: float = DEFAULT_INTERVAL_S,
        before_walltime_s: float = 300.0,
        flight_recorder: bool = True,
        peaks: PeakSettings | None = None,
        slow_factor: float = FinishSettings.slow_factor,
        relaunch_save_s: float = 120.0,
    ) -> None:
        from ezpz_tui.core.watching.peak_settings import PeakSettings

        self.kill_on_bad_exit = kill_on_bad_exit
        self.finish = FinishSettings(peaks or PeakSettings(), slow_factor)
        self.raised_grace_s = raised_grace_s
        # ``[checkpoint] before_walltime``: the ranks are asked to checkpoint this long before
        # the launch's ``walltime_end`` (0: never).
        self.before_walltime_s = before_walltime_s
        # ``[checkpoint] relaunch_save_s``: how long a relaunch waits for the save it asked of
        # the run it replaces (:mod:`~ezpz_tui.core.launching.handover`).
        self.relaunch_save_s = relaunch_save_s
        self.telemetry_s = telemetry_s  # the ranks' sampler interval, unless their env says
        self.flight_recorder = flight_recorder  # ``[collectives]``, unless their env says
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

    def _notify(self, handle: RunHandle, state: RunState) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(handle, state)
            except Exception:  # a UI bug must not kill the watcher that records the run's end
                _log().exception("run state listener failed")

    def _new_handle(self, launch: Launch) -> RunHandle:
        run_dir = Path(launch.run_dir).absolute()
        recorded = read_state(run_dir)
        if not run_dir.is_dir() or recorded.state != State.PENDING:
            raise ValueError(
                f"{run_dir} is not a fresh run directory (state {str(recorded.state)!r}); "
                "every launch needs a new one from RunMaker.create"
            )
        handle = RunHandle(self, replace(launch, run_dir=run_dir), recorded)
        with self._lock:
            self._handles.append(handle)
        return handle

    def start(self, launch: Launch, shrink: Shrink | None = None) -> RunHandle:
        """Start ``launch`` in its fresh (``pending``) run directory; ``shrink``: the smaller
        launch when the staging failed on some nodes.

        Problems starting the launcher (no such program, bad working directory) do not raise:
        the handle comes back finished, its state ``failed`` with a readable ``reason`` that is
        also in the launcher log. Raises ``ValueError`` only for a directory that is not a
        pending run, since writing into a previous run would destroy its record.
        """
        handle = self._new_handle(launch)
        argv = launch.argv
        if not argv or not argv[0] or not all(isinstance(a, str) for a in argv):
            handle._fail_to_start(f"cannot start the launcher: bad command {list(argv)!r}")
            return handle
        run = RunDir(handle.run_dir)
        staged = launch.stage is not None
        try:
            # once, before the ranks start, with each folder's blocks of ranks: no rank runs mkdir
            run.make_folders(launch.world_size)
            if launch.stage is not None:
                # Imported by a launch that stages only: the rest start without it.
                from ezpz_tui.core.launching.staging import not_staged, stage

                try:
                    copied = stage(launch.stage, _stage_env(launch.env, run.path), run.path)
                except KeyboardInterrupt:  # Ctrl-C while staging: the user's stop
                    handle._fail_to_start(STOPPED_STAGING, staged=True, stopped=True)
                    raise
                if copied.failure is not None:
                    smaller = shrink(copied.failed) if shrink is not None else ""
                    if isinstance(smaller, str):
                        handle._fail_to_start(not_staged(copied.failure, smaller), staged=True)
                        return handle
                    handle._without_unstaged(*smaller, copied.failed)
                    launch, argv = handle.launch, handle.launch.argv
            env = _launch_env(launch.env, run.path, launch.launcher)
            env.setdefault(INTERVAL_VAR, f"{self.telemetry_s:g}")
            env.setdefault(flight.ENABLE_VAR, "1" if self.flight_recorder else "0")
            proc = start_session(argv, env, launch.cwd, run.launcher_log)
        except (OSError, ValueError, TypeError) as exc:
            handle._fail_to_start(_start_error(argv, launch.cwd, exc), staged)
            return handle
        handle._launched(proc)
        return handle

    def not_started(self, launch: Launch, reason: str) -> RunHandle:
        """The handle of a launch that will not be started, recorded as failed with ``reason``."""
        handle = self._new_handle(launch)
        handle._fail_to_start(reason)
        return handle

    def relaunch(
        self,
        handle: RunHandle,
        launch: Launch,
        grace_s: tuple[float, float] = DEFAULT_GRACE_S,
        shrink: Shrink | None = None,
    ) -> RunHandle:
        """Stop ``handle``'s run completely, then start ``launch`` (``shrink``: as for
        :meth:`start`).

        If processes of the old run survive SIGKILL the new run is not started (they would hold
        the accelerators and ports it needs); its state becomes ``failed`` with the reason.
        """
        if handle.supervisor is not self:
            raise ValueError("that run was started by another Supervisor")
        result = handle.stop(grace_s)
        if result.clean:
            return self.start(launch, shrink)
        pids = ", ".join(map(str, result.remaining))
        return self.not_started(
            launch, f"not started: processes of {handle.run_dir.name} would not die ({pids})"
        )

    def detach_all(self) -> list[RunHandle]:
        """Leave every live run to its tether (quitting without stopping them); the ones left."""
        return [h for h in self.handles if h.detach()]

    def stop_all(self, grace_s: tuple[float, float] = DEFAULT_GRACE_S) -> list[StopResult]:
        """Stop every run with a process left (live, or ended with leftovers), in parallel; for
        quitting with runs alive."""
        live = [h for h in self.handles if h.wait(0) is None or h.processes()]
        if not live:
            return []
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=len(live)) as pool:
            return list(pool.map(lambda h: h.stop(grace_s), live))
