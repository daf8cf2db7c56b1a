"""The capture wrapper's work done by a rank's own Python interpreter, one interpreter a rank.

When a rank's command is the launch's own Python, the launcher starts it directly (no ``python
-m runtime.capture`` in front) with :data:`runtime.env.CAPTURE_IN_PROCESS_VAR` (the run
directory) and the ``sitecustomize`` of :mod:`runtime.stackdump` in its environment. That
``sitecustomize`` calls :func:`start` before the interpreter runs the program: the process the
launcher started forks, and the fork runs the program while the process the launcher started
becomes its watcher, exactly as the wrapper watches the child it starts
(:class:`runtime.capture.Watch`): the rank's stdout and stderr are its log (the descriptors
themselves, so a native crash's last words are kept), its status is written at the start and the
end (exit code, or the signal that ended it, read by ``waitpid``), the signals a stop sends are
forwarded, the leftovers ended, the telemetry sampled, and a death by a signal passed on to the
launcher. The program gets the wrapper's environment (:func:`runtime.capture.child_env`:
torchrun's contract, ``OMP_NUM_THREADS``, the hooks' files).

What this saves is a second interpreter's start and imports in front of every rank: the fork
shares the interpreter already started, and the watcher's own imports (the sampler, the reaper's
``/proc`` reading) come after the fork, so the program does not wait for them.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from runtime import reaper
from runtime.capture import FORWARDED, Watch, child_env, open_log
from runtime.env import rank_info_or_single

WATCHER_FAILED = 70  # EX_SOFTWARE: the watcher itself failed (its traceback is in its stderr)


def start(run_dir: str) -> None:
    """Fork this rank's program off and watch it; returns only in the fork, whose environment,
    standard descriptors and signal mask are then the program's."""
    info = rank_info_or_single()
    watch = Watch(Path(run_dir), info, tuple(sys.orig_argv))
    env = child_env(watch.run_dir, info)
    log = open_log(watch.run, info.rank)
    # Not inherited by a fork: the process that stays (the watcher) adopts the program's
    # orphans. Before the fork, so no orphan the program makes at once can miss it.
    reaper.become_subreaper()
    # A stop that comes during the fork waits, then is forwarded by the watcher's handlers.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    try:
        pid = os.fork()
    except OSError as exc:
        os._exit(watch.cannot_start(log, sys.orig_argv[0], exc))
    if pid == 0:
        _become_program(env, log.fileno())
        log.close()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return
    try:  # the watcher never returns into the program, whatever happens here
        watch.catch_signals()
        watch.started(pid, log)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        code = watch.wait(pid, log)
        log.close()
        os._exit(watch.finish(code))
    finally:
        os._exit(WATCHER_FAILED)


def _become_program(env: dict[str, str], log_fd: int) -> None:
    """The fork's own: the wrapper's environment for the program, stdin from /dev/null, stdout
    and stderr into the rank's log."""
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    for name, value in env.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
