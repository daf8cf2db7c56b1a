"""A run never outlives its supervisor unsupervised: a small process that stops it if the
supervisor dies without recording the run's end.

The supervisor (``ezpz-tui launch`` or the TUI) can die in ways it cannot handle: SIGKILL, an
out-of-memory kill, a crash. Its ranks would then run on with nobody to stop them or record
their end. So next to every launcher the supervisor starts a tether: ``python -m
ezpz_tui.core.launching.tether`` in a session of its own (a closed terminal does not reach it),
reading a pipe whose writing end only the supervisor holds. The kernel closes that end however
the supervisor dies, so end-of-file without the word ``done`` means the supervisor is gone: the
tether stops the run as a stop from the user would
(:meth:`~.processes.RunProcesses.stop`), then records every rank and the run as ``stopped``,
with the reason. When the supervisor records the end itself it writes ``done`` and the tether
exits at once.

A user who quits the TUI may leave a run running instead (an SSH session about to drop): the
supervisor then writes ``keep`` and the tether becomes the run's supervisor
(:mod:`~ezpz_tui.core.launching.tethered`): it names itself in the run's state, keeps the
heartbeat, records the run's end from its ranks' once the launcher is gone, and takes SIGTERM as
the user's stop, which is how a later ``ezpz-tui`` stops a run it did not start. Either way, a
run whose environment was staged on its nodes has the copies removed after its end is recorded,
unless kept (``stage.json`` holds the removal's command). Until its
supervisor says a word the tether has imported only ``os``, ``signal`` and ``sys``, not even its
argument parser: every run has one, it starts while the ranks start (on the same cores), and the
supervisor waits for it to exit after ``done``. So it is started by its file's path with ``-S``:
no ``site`` (in a venv with an editable install, its ``.pth`` finder alone is half of an
interpreter's start), which it imports only when it has to act.

A pipe rather than ``PR_SET_PDEATHSIG`` on the launcher: that signal fires when the *thread*
that started the launcher ends, and the TUI starts launches from worker threads that end long
before the run does.
"""

from __future__ import annotations

import os
import signal
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers; the tether's start does not wait for typing or pathlib
    import subprocess
    from pathlib import Path

    from ezpz_tui.core.launching.finalize import FinishSettings

DONE = b"done\n"
KEEP = b"keep\n"


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
        import contextlib  # here: the tether itself starts without it
        import subprocess

        writer, self._writer = self._writer, None
        if writer is None:
            return
        with contextlib.suppress(OSError):
            os.write(writer, word)
        os.close(writer)
        if wait:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)


def tether_argv(
    run_dir: Path, launcher_pid: int, launcher_ticks: int | None, settings: FinishSettings
) -> list[str]:
    """The tether's command line: this file run with ``-S`` (see the module's docstring)."""
    return [
        sys.executable,
        "-S",
        os.path.abspath(__file__),
        str(run_dir),
        str(launcher_pid),
        str(launcher_ticks or 0),
        str(os.getpid()),
        *settings.args(),
    ]


def start_tether(
    run_dir: Path, launcher_pid: int, launcher_ticks: int | None, settings: FinishSettings
) -> Tether:
    """Start the tether of the run in ``run_dir`` led by ``launcher_pid``; ``settings`` are the
    supervisor's, for the finalizer the tether starts in its place."""
    import subprocess

    argv = tether_argv(run_dir, launcher_pid, launcher_ticks, settings)
    reader, writer = os.pipe()  # neither end is inherited by anything else this process starts
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


def main(argv: list[str] | None = None) -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    # The word first, the arguments after: a run that ends while this process is still
    # starting (a short one) waits for its interpreter only, not for argparse and the
    # finalizer's options to be imported for nothing.
    word = _wait_for_word()
    if word == DONE:
        return 0
    # Only now the code that acts: until then this process costs a launch nearly nothing.
    _import_as_usual()
    import argparse
    from pathlib import Path

    from ezpz_tui.core.launching.finalize import add_settings_args
    from ezpz_tui.core.launching.tethered import keep, take_down

    parser = argparse.ArgumentParser(prog="python -m ezpz_tui.core.launching.tether")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("launcher_pid", type=int)
    parser.add_argument("launcher_ticks", type=int)
    parser.add_argument("supervisor_pid", type=int)
    add_settings_args(parser)
    args = parser.parse_args(argv)

    run, pid, ticks = args.run_dir, args.launcher_pid, args.launcher_ticks
    try:
        if word == KEEP:
            keep(run, pid, ticks)
        else:
            who = f"its supervisor (ezpz-tui, pid {args.supervisor_pid})"
            take_down(run, pid, ticks, f"{who} exited; the run was stopped with it")
    except OSError:
        return 1  # the disk refuses: readers will call the run lost, which it then is
    from ezpz_tui.core.launching.staging import unstage_recorded
    from runtime.env import RUN_DIR_VAR

    # A staged run's copies go too, unless kept, as the supervisor would have removed them.
    unstage_recorded(run, {k: v for k, v in os.environ.items() if k != RUN_DIR_VAR})
    from ezpz_tui.core.launching.finalize import settings_from, start_finalize

    # summary.json, metrics.nc, as the supervisor would have, with its settings.
    start_finalize(run, settings_from(args))
    return 0


def _import_as_usual() -> None:
    """Make the packages importable as in an interpreter started without ``-S``: the folder
    that holds ``ezpz_tui`` in place of this file's own (first on ``sys.path`` for a script
    run by its path), then ``site``'s directories and ``.pth`` files."""
    if not sys.flags.no_site:
        return  # started as usual (``python -m``): nothing to add
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(os.path.dirname(here)))
    sys.path[:] = [root, *(p for p in sys.path if os.path.abspath(p or os.curdir) != here)]
    import site

    site.main()


if __name__ == "__main__":
    sys.exit(main())
