"""The outputs directory: where it is, what lies in it besides runs, and what went wrong with
it, in one line a person can act on.

Runs go under ``$EZPZ_OUTPUTS``, else ``./outputs`` (:func:`default_outputs`), next to the code
being run as ezpz does; submitted jobs' scripts and records under its hidden ``.batch/``
(:func:`batch_dir`).

The outputs directory is wherever the user pointed it: a path that is a file, a path under a
file, a read-only mount, a full or over-quota filesystem. Every such error from the filesystem
while a run is made becomes :class:`OutputsError` with a message naming the outputs directory
and the cause in the system's own words, lower-cased to read as part of a sentence::

    cannot create a run in /x/out: read-only file system
    cannot create a run in /x/out: not a directory (/x is a file)
    cannot list runs in /x/out: not a directory

The CLI prints it after ``ezpz-tui:`` with exit status 2; the TUI shows it in a notification.
Errors are worded here, once, so both say the same thing.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ezpz_tui.core.runs.record import RunStoreError

OUTPUTS_VAR = "EZPZ_OUTPUTS"


def default_outputs() -> Path:
    """``$EZPZ_OUTPUTS`` or ``./outputs``: next to the code being run, as ezpz does."""
    return Path(os.environ.get(OUTPUTS_VAR) or "outputs")


def batch_dir(outputs: Path) -> Path:
    """Scripts, job records and job outputs: hidden, so the runs listing passes it by."""
    return outputs / ".batch"


class OutputsError(RunStoreError):
    """The outputs directory cannot be used; the message names it and the cause."""


def cause(exc: OSError) -> str:
    """The system's reason for ``exc``, lower-cased (``no space left on device``)."""
    text = exc.strerror or (os.strerror(exc.errno) if exc.errno else str(exc)) or "unknown error"
    return text[:1].lower() + text[1:]


def _file_above(path: Path) -> Path | None:
    """The nearest existing part of ``path`` (itself included) that is not a directory."""
    for part in (path, *path.parents):
        try:
            if part.exists():
                return None if part.is_dir() else part
        except OSError:
            return None
    return None


def _explained(path: Path, exc: OSError) -> str:
    """The cause, saying which file is in the way when the path is or lies under a file."""
    blocker = _file_above(path)
    if blocker is not None:
        where = "" if blocker == path else f" ({blocker} is a file)"
        return f"{os.strerror(errno.ENOTDIR).lower()}{where}"
    return cause(exc)


def creating(outputs: Path, exc: OSError) -> OutputsError:
    """The error to raise when making a run under ``outputs`` failed with ``exc``."""
    return OutputsError(f"cannot create a run in {outputs}: {_explained(outputs, exc)}")


def listing(outputs: Path, exc: OSError) -> OutputsError:
    """The error to raise when the runs under ``outputs`` cannot be listed."""
    return OutputsError(f"cannot list runs in {outputs}: {_explained(outputs, exc)}")


def check_listable(outputs: Path) -> None:
    """Raise :class:`OutputsError` when ``outputs`` exists (or is blocked) but cannot be listed.

    A missing outputs directory is fine (it has no runs yet): only a path that is a file, lies
    under a file, or cannot be read is an error, so ``ezpz-tui runs`` can tell "no runs" from
    "this is not where runs can be".
    """
    try:
        with os.scandir(outputs):
            pass
    except FileNotFoundError:
        return
    except OSError as exc:
        raise listing(outputs, exc) from None


def launch_error(outputs: Path, exc: OSError | RunStoreError) -> str:
    """The one line for an error that ended an attempt to launch into ``outputs``."""
    if isinstance(exc, OSError):
        return str(creating(outputs, exc))
    return str(exc)
