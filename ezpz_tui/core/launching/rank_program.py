"""What the launcher starts as each rank: the rank's command itself when its own interpreter can
watch it, the capture wrapper in front of it otherwise.

A rank whose command is the launch's own Python (``python``, ``python3``, that venv's, with
``-m``, ``-c`` or a script) loads the ``sitecustomize`` of :mod:`runtime.stackdump` at its
start, and :mod:`runtime.in_process` there does the wrapper's work from a fork of the rank's
interpreter: one interpreter a rank instead of two (the wrapper's start was about a third of a
trivial launch's CPU). Anything else (a shell script, another Python, a Python told to skip
``PYTHONPATH`` or ``site`` with ``-E``, ``-I`` or ``-S``) keeps ``python -m runtime.capture``,
which needs nothing of the command.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import runtime.env
from runtime.env import CAPTURE_IN_PROCESS_VAR

# runtime.stackdump.SITE_DIR, without importing the hooks it loads (a launch's CLI would)
SITE_DIR = Path(runtime.env.__file__).resolve().parent / "_site"

_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")
_NO_SITE = frozenset("EIS")  # PYTHONPATH ignored (-E, -I) or site not imported (-S)
_PLAIN = frozenset("bBdhiOPqRsuvVx?")  # Python's one-letter options that take no value
_VALUED = frozenset("WX")  # ... and those that take one (-X importtime, -W error)
_VALUED_LONG = frozenset({"--check-hash-based-pycs"})


def watched_in_process(
    command: Sequence[str], python: str, which: Callable[[str], str | None]
) -> bool:
    """Whether ``command`` runs ``python`` itself (the interpreter the wrapper would run in, so
    one that can import this ``runtime``) in a way that loads the rank's ``sitecustomize``."""
    if not command:
        return False
    found = command[0] if os.sep in command[0] else which(command[0])
    if not found or not _PYTHON.fullmatch(Path(found).name):
        return False
    ours, theirs = Path(python).absolute(), Path(found).absolute()
    # The same folder as well as the same file: a venv's python is a link to the base
    # interpreter, which has none of the venv's packages.
    try:
        if theirs.parent != ours.parent or not os.path.samefile(theirs, ours):
            return False
    except OSError:
        return False
    return _loads_site(command[1:])


def _loads_site(args: Sequence[str]) -> bool:
    """Whether Python's own options before the program leave ``PYTHONPATH`` and ``site`` on;
    an option not known here says no, and the wrapper runs the command as it always did."""
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if arg in _VALUED_LONG:
            index += 1
            continue
        if arg == "--" or arg == "-" or not arg.startswith("-"):
            return True  # the program (a script, or stdin) comes next: options end
        if arg.startswith("--"):
            return False
        for at, letter in enumerate(arg[1:], start=1):
            if letter in "cm":
                return True  # the rest is the program's
            if letter in _VALUED:
                index += at == len(arg) - 1  # its value is the next argument
                break
            if letter in _NO_SITE or letter not in _PLAIN:
                return False
    return True


def in_process_env(run_dir: Path, pythonpath: str) -> dict[str, str]:
    """What the ranks' environment adds for :mod:`runtime.in_process`: the run directory, the
    ``sitecustomize`` first on ``PYTHONPATH`` (before ``pythonpath``, the one the ranks would
    have had), and unbuffered output, which only the interpreter's start can set."""
    site = str(SITE_DIR)
    if site in pythonpath.split(os.pathsep):
        path = pythonpath
    else:  # kept verbatim after ours: an empty entry in it means the working directory
        path = f"{site}{os.pathsep}{pythonpath}" if pythonpath else site
    return {CAPTURE_IN_PROCESS_VAR: str(run_dir), "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}


def launcher_env(env: dict[str, str]) -> None:
    """Take the in-process watch out of the launcher's own environment (``env``, in place): the
    ranks get it through the launcher's flags, and a launcher that is itself a Python program
    (a site's wrapper script around ``mpiexec``) would otherwise load the ranks'
    ``sitecustomize`` and watch itself as rank 0 of 1, its ``RANK`` then inherited by every
    rank it starts."""
    if env.pop(CAPTURE_IN_PROCESS_VAR, None) is None:
        return
    site = str(SITE_DIR)
    kept = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p != site]
    if any(kept):
        env["PYTHONPATH"] = os.pathsep.join(kept)
    else:
        env.pop("PYTHONPATH", None)
