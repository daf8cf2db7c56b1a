"""A run never outlives its supervisor unsupervised: a small process that stops it if the
supervisor dies without recording the run's end.

The supervisor (``ezpz-tui launch`` or the TUI) can die in ways it cannot handle: SIGKILL, an
out-of-memory kill, a crash. Its ranks would then run on with nobody to stop them or record
their end. So next to every launcher the supervisor starts a tether: ``python -m
ezpz_tui.core.launching.tether`` in a session of its own (a closed terminal does not reach it),
reading a pipe whose writing end only the supervisor holds. The kernel closes that end however
the supervisor dies, so end-of-file without the word ``done`` means the supervisor is gone: the
tether stops the run as a stop from the user would (:meth:`RunProcesses.stop`), then records
every rank and the run as ``stopped``, with the reason. When the supervisor records the end
itself it writes ``done`` and the tether exits at once.

A pipe rather than ``PR_SET_PDEATHSIG`` on the launcher: that signal fires when the *thread*
that started the launcher ends, and the TUI starts launches from worker threads that end long
before the run does.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

from ezpz_tui.core.launching.ending import cause_of, finalise, first_failure, world_size_of
from ezpz_tui.core.launching.processes import (
    DEFAULT_GRACE_S,
    RunProcesses,
    process_alive,
    supervised_here,
)
from ezpz_tui.core.launching.reserve import release_reserve
from runtime.rundir import (
    HEARTBEAT_S,
    RankState,
    RunState,
    State,
    read_state,
    read_statuses,
    write_state,
)

DONE = b"done\n"
KEEP = b"keep\n"
KEEP_POLL_S = 0.5  # how often a kept run's launcher is looked at


class Tether:
    """The supervisor's end of one run's tether."""

    def __init__(self, proc: subprocess.Popen[bytes], writer: int) -> None:
        self._proc = proc
        self._writer: int | None = writer

    def release(self) -> None:
        """The supervisor has recorded the run's end: the tether can go."""
        self._say(DONE, wait=True)

    def keep(self) -> None:
        """The supervisor leaves: the tether supervises the run from now on."""
        self._say(KEEP, wait=False)

    def _say(self, word: bytes, wait: bool) -> None:
        writer, self._writer = self._writer, None
        if writer is None:
            return
        with contextlib.suppress(OSError):
            os.write(writer, word)
        os.close(writer)
        if wait:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)


def start_tether(run_dir: Path, launcher_pid: int, launcher_ticks: int | None) -> Tether:
    """Start the tether of the run in ``run_dir`` led by ``launcher_pid``."""
    reader, writer = os.pipe()  # neither end is inherited by anything else this process starts
    argv = [
        sys.executable,
        "-m",
        __name__,
        str(run_dir),
        str(launcher_pid),
        str(launcher_ticks or 0),
        str(os.getpid()),
    ]
    try:
        proc = subprocess.Popen(
            argv,
            stdin=reader,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except BaseException:
        os.close(writer)
        raise
    finally:
        os.close(reader)
    return Tether(proc, writer)


def _wait_for_word() -> bytes:
    """Block until the supervisor's end of the pipe closes; the last word it said (``done``,
    ``keep``), or nothing when it died without a word."""
    said = b""
    while True:
        try:
            chunk = os.read(0, 64)
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
        if not chunk:
            return said.rstrip(b"\n").rpartition(b"\n")[2] + b"\n" if said else b""
        said = (said + chunk)[-64:]


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
    finalise(run_dir, end, world_size_of(read_statuses(run_dir)), end.end or time.time())
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
    ranks' ends tell the run's."""
    recorded = read_state(run_dir)
    if not recorded.live:
        return recorded
    statuses = read_statuses(run_dir)
    first = first_failure(statuses)
    world = world_size_of(statuses)
    ok = bool(statuses) and all(s.state == RankState.SUCCEEDED for s in statuses)
    ok = ok and (world is None or len(statuses) == world)
    end = replace(recorded, state=State.SUCCEEDED if ok else State.FAILED, end=time.time())
    if not ok:
        cause = cause_of(first) if first else "the launcher ended without every rank's success"
        end = replace(end, failed_rank=first.rank if first else None, cause=cause)
    release_reserve(run_dir)
    finalise(run_dir, end, world, end.end or time.time())
    return write_state(run_dir, end)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("launcher_pid", type=int)
    parser.add_argument("launcher_ticks", type=int)
    parser.add_argument("supervisor_pid", type=int)
    args = parser.parse_args(argv)
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    word = _wait_for_word()
    run, pid, ticks = args.run_dir, args.launcher_pid, args.launcher_ticks
    try:
        if word == KEEP:
            keep(run, pid, ticks)
        elif word != DONE:
            who = f"its supervisor (ezpz-tui, pid {args.supervisor_pid})"
            take_down(run, pid, ticks, f"{who} exited; the run was stopped with it")
    except OSError:
        return 1  # the disk refuses: readers will call the run lost, which it then is
    return 0


if __name__ == "__main__":
    sys.exit(main())
