"""Let a hung rank be asked for its Python stacks: ``faulthandler`` on SIGUSR1.

``ezpz-tui stacks RUN`` sends SIGUSR1 to every rank's process and reads the dump each writes
into its log (all threads, innermost frame first). Two ways in, both narrow on purpose:

* :func:`register`, called by :func:`runtime.setup`, for ranks built on this runtime;
* :func:`add_site`, used by the capture wrapper, for plain scripts: it puts a directory holding
  only a ``sitecustomize.py`` first on the rank's ``PYTHONPATH``. That file registers the same
  handler at interpreter start, takes its directory back off ``sys.path``, and runs the
  ``sitecustomize`` it shadows (a distribution's or a virtual environment's), so nothing else
  changes. ``PYTHONFAULTHANDLER`` alone would not do: it covers only fatal signals.

Neither takes SIGUSR1 from a program that handles it itself: they register only while its
action is still the default (terminate), and a handler the program installs later replaces
theirs. Python's default for SIGUSR1 is to terminate, so whoever sends it must first check
that the process catches it (``SigCgt`` in ``/proc/PID/status``). ``EZPZ_STACKS=0`` in the
launch's environment keeps the handler out; the same ``sitecustomize`` also registers the raise
hook (:mod:`runtime.raise_hook`), the exit hook (:mod:`runtime.exit_hook`) and the Flight
Recorder's thread (:mod:`runtime.flight`), so it stays on ``PYTHONPATH`` unless the last two
are turned off too.
"""

from __future__ import annotations

import faulthandler
import os
import signal
from pathlib import Path

from runtime import exit_hook, flight

SIGNAL_NAME = "SIGUSR1"
SITE_DIR = Path(__file__).resolve().parent / "_site"
ENABLE_VAR = "EZPZ_STACKS"
_STDERR_FD = 2  # the rank log under the capture wrapper, whatever sys.stderr became since


def register() -> bool:
    """Dump every thread's stack to stderr on SIGUSR1 unless the program handles SIGUSR1
    itself or the platform has none; whether the handler is now in place."""
    sig = getattr(signal, SIGNAL_NAME, None)
    if sig is None:  # Windows
        return False
    try:
        if signal.getsignal(sig) not in (signal.SIG_DFL, None):
            return False
        faulthandler.register(sig, file=_STDERR_FD, all_threads=True, chain=False)
    except (ValueError, OSError, RuntimeError):
        return False
    return True


def add_site(env: dict[str, str]) -> None:
    """Put the ``sitecustomize`` first on ``env``'s ``PYTHONPATH`` (once), unless all its jobs
    are turned off: ``EZPZ_STACKS=0``, ``EZPZ_DESTROY_AT_EXIT=0`` (:mod:`runtime.exit_hook`) and
    ``EZPZ_FLIGHT_RECORDER=0`` (:mod:`runtime.flight`). It reads each of them itself."""
    jobs = (exit_hook.switched_on(env, ENABLE_VAR), exit_hook.wanted(env), flight.wanted(env))
    if not any(jobs):
        return
    site, given = str(SITE_DIR), env.get("PYTHONPATH", "")
    if site in given.split(os.pathsep):
        return
    # Kept verbatim after ours: an empty entry in it means the working directory.
    env["PYTHONPATH"] = f"{site}{os.pathsep}{given}" if given else site
