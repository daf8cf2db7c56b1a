"""The per-rank wrapper the launcher puts in front of the user's command.

``python -m runtime.capture --run-dir D -- CMD ...``

It learns its rank from the launcher's environment (never from MPI: initialising MPI here would
take the PMI connection the real rank needs), points the child's stdout and stderr straight at
the rank's log in D (a file, so there is no pipe to stall on and a native crash's last words are
kept), forwards the signals a stop sends, and records how the child ended in the rank's status
(:class:`runtime.rundir.RankStatus`). Inherited descriptors stay open for the child: MPICH's
Hydra hands each rank its PMI connection as an inherited fd (PMI_FD).

Nothing is left behind: the wrapper is a child subreaper (:mod:`runtime.reaper`), so processes
the rank starts and abandons are re-parented to it, and once the rank's own process has ended it
ends them (SIGTERM, then SIGKILL) and names them in the rank's status and log. Plain scripts can
dump their stacks on SIGUSR1 (:mod:`runtime.stackdump`), so a hung job can be looked into, and
have a process group they leave alive destroyed at exit (:mod:`runtime.exit_hook`), so a script
that finished does not abort in the interpreter's teardown, record an uncaught exception the
moment it is raised (:mod:`runtime.raise_hook`), so the rank that failed first is known whatever
order the ranks exit in, and keep torch's Flight Recorder on
with its newest entries in ``flight/`` (:mod:`runtime.flight`), so a hang is named at the
collective.
While the rank runs, a thread samples its process tree and accelerator into the rank's
telemetry file (:mod:`runtime.telemetry.sampler`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from dataclasses import replace
from pathlib import Path

from runtime import exit_hook, flight, raise_hook, reaper, stackdump
from runtime.env import RANK_SOURCE_VAR, RUN_DIR_VAR, RankInfo, rank_info_or_single, torchrun_env
from runtime.rundir import RankState, RankStatus, RunDir, write_status

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers; the rank's start does not wait for typing
    from typing import BinaryIO

    from runtime.telemetry.sampler import Sampler

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
# The sampler starts once the rank has run this long: its first line comes one interval after
# its start (CPU use needs two readings), so a rank that ends sooner had none to get, and a
# short rank's end does not wait for the sampler's imports and thread.
SAMPLER_AFTER_S = 0.25


def _omp_threads(local_world_size: int) -> str:
    """Split this node's cores among its ranks unless a CPU binding already did."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        usable = os.cpu_count() or 1
    total = os.cpu_count() or usable
    per_rank = usable if usable < total else usable // max(local_world_size, 1)
    return str(max(per_rank, 1))


def child_env(run_dir: Path, info: RankInfo) -> dict[str, str]:
    """The rank's environment: torchrun's contract whatever the launcher, so a script written
    for torchrun (a bare ``init_process_group()``, Accelerate, Lightning) runs unchanged.

    Values already there win: torchrun set its own, and a user's own setting is theirs.
    MASTER_ADDR/MASTER_PORT come from the launcher's env flags, chosen once for the run.
    """
    env = dict(os.environ)
    env[RUN_DIR_VAR] = str(run_dir)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("OMP_NUM_THREADS", _omp_threads(info.local_world_size))
    if info.source != "torchrun":
        for name, value in torchrun_env(info).items():
            env.setdefault(name, value)
        env.setdefault(RANK_SOURCE_VAR, info.source)
    run = RunDir(run_dir, fresh=True)
    env[exit_hook.MARK_VAR] = str(run.destroyed_mark(info.rank))
    env[raise_hook.FILE_VAR] = str(run.raised(info.rank))
    env.pop(raise_hook.OWNER_VAR, None)  # the rank's first Python process claims its record
    flight.add_env(
        env,
        str(run.flight(info.rank)),
        str(run.flight_request(info.rank)),
        run.nccl_dump_prefix(info.rank),
    )
    stackdump.add_site(env)
    return env


def open_log(run: RunDir, rank: int) -> BinaryIO:
    """The rank's log, opened to append. The supervisor made the run's folders and their blocks
    before any rank started, so 16,384 ranks do not each ``mkdir`` on the metadata server; only
    a wrapper run by hand into a bare directory, or into one an older version made, makes its
    rank's blocks."""
    try:
        return open(run.log(rank), "ab", buffering=0)
    except FileNotFoundError:
        run.make_rank_folders(rank)
        return open(run.log(rank), "ab", buffering=0)


def _say(log: BinaryIO, line: str) -> None:
    """A line of the wrapper's own in the rank's log; a full disk loses it, nothing more."""
    with contextlib.suppress(OSError):
        log.write(f"{line}\n".encode())


def _record(run_dir: Path, status: RankStatus, log: BinaryIO | None) -> None:
    """Write the rank's status. One that cannot be written (a disk full even for the old
    record's room: :func:`runtime.rundir.write_status`) is said in one line, in the rank's log
    if that takes it and on stderr (the launcher's log), and the rank goes on: its end is then
    the supervisor's to record. A traceback here would leave the rank's process unwatched."""
    try:
        write_status(run_dir, status)
    except OSError as exc:
        line = f"ezpz capture: cannot record rank {status.rank}'s status: {exc.strerror or exc}"
        if log is not None:
            _say(log, line)
        with contextlib.suppress(OSError, ValueError, AttributeError):
            print(line, file=sys.stderr, flush=True)


class Watch:
    """The watching side of one rank, whichever process does it: this wrapper in front of the
    rank's command, or the watcher a rank's own interpreter forks before its program
    (:mod:`runtime.in_process`). It forwards the signals a stop sends, records the rank's start
    and end in its status, samples its telemetry and ends what it leaves behind."""

    def __init__(self, run_dir: Path, info: RankInfo, command: tuple[str, ...]) -> None:
        self.run_dir = run_dir
        self.run = RunDir(run_dir, fresh=True)
        self.rank = info.rank
        self.local_rank = info.local_rank
        self.status = RankStatus(
            rank=info.rank,
            local_rank=info.local_rank,
            world_size=info.world_size,
            host=os.uname().nodename,  # gethostname(2) is uname's nodename: no socket module
            wrapper_pid=os.getpid(),
            command=command,
            start=time.time(),
        )
        self.received: list[int] = []
        # The child's pid until it is reaped: this process reaps it itself, so until then the
        # pid cannot name another process and a forwarded signal cannot hit a stranger.
        self.live: list[int] = []
        self.unsent: list[int] = []  # received before there was a child to forward them to

    def forward(self, signum: int, _frame: object) -> None:
        self.received.append(signum)
        if not self.live:
            self.unsent.append(signum)
        for pid in self.live:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def catch_signals(self) -> None:
        for sig in FORWARDED:
            signal.signal(sig, self.forward)

    def cannot_start(self, log: BinaryIO, what: str, exc: OSError) -> int:
        """Record a rank whose command never started (exit 127, as a shell says it)."""
        _say(log, f"ezpz capture: cannot start {what!r}: {exc}")
        failed = RankState.FAILED
        ended = replace(self.status, end=time.time(), state=failed, exit_code=127, error=str(exc))
        _record(self.run_dir, ended, log)
        return 127

    def started(self, pid: int, log: BinaryIO) -> None:
        """The rank's process is ``pid``: forward to it from here on and record the start."""
        self.live.append(pid)
        self.status = replace(self.status, pid=pid)
        _record(self.run_dir, self.status, log)
        if self.unsent:  # a stop that arrived while the child was being started
            os.kill(pid, self.unsent[-1])

    def wait(self, pid: int, log: BinaryIO) -> int:
        """Sample the rank until its process ends, then end its leftovers; its exit code
        (-N: the signal that ended it)."""
        sampler = None if _ends_within(pid, SAMPLER_AFTER_S) else self._sampler(pid, log)
        code = os.waitstatus_to_exitcode(reaper.wait_for(pid, self.live.clear))
        self.status = replace(self.status, end=time.time())  # the rank's own end, not that
        # of the leftovers ended after it
        if sampler is not None:  # before the leftovers: a tool it runs is none of the rank's
            sampler.stop()
        ended = reaper.end_leftovers()
        if ended:
            _say(log, f"ezpz capture: {reaper.describe_ended(ended)}")
            leftovers = tuple(item.describe() for item in ended)
            self.status = replace(self.status, leftovers=leftovers)
        return code

    def _sampler(self, pid: int, log: BinaryIO) -> Sampler | None:
        # Imported once the rank runs, not before: its start does not wait for the sampler.
        from runtime.telemetry.sampler import start_sampler

        def note(line: str) -> None:
            _say(log, line)

        return start_sampler(self.run_dir, self.rank, self.local_rank, pid, note)

    def finish(self, code: int) -> int:
        """Record the rank's end and return this process's exit status (128+N for a signal it
        forwarded; it dies of one it did not, see :func:`_die_of`)."""
        flight.remove_request(self.run.flight_request(self.rank))  # nothing special left
        status = self.status
        if _took_mark(self.run.destroyed_mark(self.rank)):
            status = replace(status, destroyed_at_exit=True)
        if code < 0:
            name = signal.Signals(-code).name
            status = replace(status, state=RankState.FAILED, signal=-code, signal_name=name)
            exit_code = 128 - code
        else:
            state = RankState.SUCCEEDED if code == 0 else RankState.FAILED
            status = replace(status, state=state, exit_code=code)
            exit_code = code
        if self.received:
            names = tuple(signal.Signals(s).name for s in self.received)
            status = replace(status, signals_received=names)
        _record(self.run_dir, status, None)
        if code < 0 and -code not in self.received:
            _die_of(-code)
        return exit_code


def run(run_dir: Path, command: list[str]) -> int:
    """Run ``command`` as this rank, record its end, and return the wrapper's exit status
    (128+N for a signal it forwarded; it dies of one it did not, see :func:`_die_of`)."""
    import subprocess  # the wrapper's alone: a rank watched in process never needs it

    info = rank_info_or_single()
    watch = Watch(run_dir, info, tuple(command))
    watch.catch_signals()
    reaper.become_subreaper()
    with open_log(watch.run, info.rank) as log:
        try:
            child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env(run_dir, info),
                close_fds=False,
            )
        except OSError as exc:
            return watch.cannot_start(log, command[0], exc)
        watch.started(child.pid, log)
        code = watch.wait(child.pid, log)
        child.returncode = code  # reaped here: Popen must never wait for that pid again
    return watch.finish(code)


def _ends_within(pid: int, seconds: float) -> bool:
    """Whether the child ``pid`` ends within ``seconds``, left unreaped; False at once where
    Linux has no process descriptors (before 5.3)."""
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        return False
    try:
        import select

        return bool(select.select([fd], [], [], seconds)[0])
    finally:
        os.close(fd)


def _took_mark(path: Path) -> bool:
    """Whether the rank's exit hook left its mark (the hook said so in the log itself)."""
    try:
        path.unlink()
    except OSError:
        return False
    return True


def _die_of(signum: int) -> None:
    """End this wrapper by the signal that killed its child (a crash, the OOM killer).

    Launchers tell a crash from an exit: MPICH's Hydra tears the whole job down when a rank
    dies of a signal but lets the others run on after a non-zero exit, so a wrapper that only
    exited 128+N would leave the healthy ranks waiting for a dead peer. No core file: the child
    has written its own.
    """
    import resource

    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    with contextlib.suppress(ValueError, OSError):  # SIGKILL has no handler to reset
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if len(given) > 3 and given[0] == "--run-dir" and given[1][:1] != "-" and given[2] == "--":
        # As every launch writes it; anything else (help, a mistake) goes to the parser, which
        # is not imported for the launch's form: every rank waits for this process's start.
        return run(Path(given[1]).resolve(), given[3:])
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m runtime.capture",
        description="Run one rank's command with its output and exit status in the run directory.",
    )
    parser.add_argument("--run-dir", required=True, type=Path, help="the run directory")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    return run(args.run_dir.resolve(), command)


if __name__ == "__main__":
    sys.exit(main())
