"""What a reader says about a file of a run it could not use: which file, and why.

A run's files may be unreadable (permissions, a folder where a file should be) or hold what no
writer of ours wrote (garbage, a torn copy, another program's bytes). The rule
(docs/run-directory.md, "A corrupt or unreadable file costs only what it holds"): a reader says
so in one line naming the file within the run directory and the cause, where it would have
shown what the file holds, and goes on to show everything else. These are those lines, worded
once for the CLI and the TUI.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from runtime.rundir import RankStatus, RunDir


def cannot_read(path: Path) -> str | None:
    """How reading ``path`` fails, in the system's words (``Permission denied``, ``Is a
    directory``); None when it reads, or is not there (a file not written yet is no fault)."""
    try:
        with open(path, "rb") as fh:
            fh.read(1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def named(run_dir: Path, path: Path) -> str:
    """``path`` as a person finds it from the run directory: ``logs/rank-00001.log``."""
    try:
        return Path(path).relative_to(run_dir).as_posix()
    except ValueError:
        return str(path)


def unreadable(run_dir: Path, path: Path) -> str | None:
    """``logs/rank-00001.log cannot be read: Permission denied``, or None when it can be."""
    why = cannot_read(path)
    return None if why is None else f"{named(run_dir, path)} cannot be read: {why}"


def unusable_status(run_dir: Path, path: Path) -> str | None:
    """Why the status file ``path``, which gave no status, gives none: it cannot be read, or
    is not a status record (garbage, torn); None when it is not there any more."""
    if not path.exists():
        return None
    return unreadable(run_dir, path) or (
        f"{named(run_dir, path)} is not a status record (not the JSON object its wrapper writes)"
    )


def unusable_statuses(run_dir: Path, read: Iterable[RankStatus]) -> dict[int, str]:
    """The ranks whose status file is there but gave no status (``read`` are those that did),
    each with its line (:func:`unusable_status`)."""
    seen = {status.rank for status in read}
    out = {}
    for path, rank in RunDir(run_dir).statuses():
        why = None if rank in seen else unusable_status(run_dir, path)
        if why is not None:
            out[rank] = why
    return out
