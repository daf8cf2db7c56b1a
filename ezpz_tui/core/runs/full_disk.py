"""A run that ended on a full disk: its recorded cause and what to do, worded once.

When the filesystem of a run's outputs fills up, its ranks die of it (``ENOSPC``), their
wrappers may find no room to record their ends and the launcher's output goes nowhere. Whoever
supervised the run still records it ``failed`` with :data:`NO_SPACE` as its cause (its reserve,
:mod:`ezpz_tui.core.launching.reserve`, makes the room), and every reader says so the same way:
the launch as it ends, ``ezpz-tui runs``, ``ezpz-tui why`` and the TUI.
"""

from __future__ import annotations

from pathlib import Path

from runtime.rundir import RunState

NO_SPACE = "no space left on device"
"""The cause to record for a run that ended on a full disk (the system's own words)."""


def ended_on_full_disk(state: RunState) -> bool:
    """Whether the run's record says it ended for want of space."""
    return state.cause == NO_SPACE


def what_to_do() -> str:
    """The two ways out, for a sentence that has already said which disk."""
    return "free space on it, or point the outputs elsewhere (--outputs DIR or EZPZ_OUTPUTS)"


def where_and_what_to_do(run_dir: Path) -> str:
    """The line a person acts on: which place filled, and the two ways out."""
    return f"{NO_SPACE} in {run_dir}: {what_to_do()} and relaunch"
