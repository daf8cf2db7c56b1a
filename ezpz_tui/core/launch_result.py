"""What asking the session for a run came to: it started, or it did not and why, worded once.

A launch is not started for its plan (every error of the plan), for the outputs directory (a
path that is a file, read-only, full: :func:`~ezpz_tui.core.runs.outputs.launch_error`'s
line) or for a value the launcher cannot take (the ``ValueError``'s text). The CLI prints the
reasons, the TUI shows them and a sweep records them; none of them catches these exceptions
itself, so all three say the same thing and cannot disagree on which error is which.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ezpz_tui.core.launching.plan import LaunchRefused
from ezpz_tui.core.launching.supervisor import RunHandle
from ezpz_tui.core.runs.outputs import launch_error
from ezpz_tui.core.runs.record import RunStoreError

Kind = Literal["refused", "outputs", "invalid", "busy"]


@dataclass(frozen=True)
class Started:
    handle: RunHandle


@dataclass(frozen=True)
class NotStarted:
    """A launch that made no run: ``reasons`` as the person should read them, one a line.

    ``kind`` says which check stopped it: ``refused`` (the plan's errors), ``outputs`` (the
    outputs directory cannot take a run), ``invalid`` (a value the launcher cannot use) or
    ``busy`` (the run a relaunch replaces is saving for one already, or cannot be stopped
    from here).
    ``must_fix``: trying again as it stands cannot work and nothing else on screen says why (the
    outputs directory, no host left to retry on), so the TUI shows a dialog that stays rather
    than a notification that fades; the form already lists a refused plan's errors.
    """

    title: str
    reasons: tuple[str, ...]
    kind: Kind
    must_fix: bool = False

    @property
    def text(self) -> str:
        return "\n".join(self.reasons)


LaunchResult = Started | NotStarted


def refusal(refused: LaunchRefused, title: str) -> NotStarted:
    """The plan's errors, one a line: the form lists them too, so they need no dialog."""
    return NotStarted(title, tuple(p.message for p in refused.problems), "refused")


def not_started(exc: ValueError | OSError | RunStoreError, outputs: Path, verb: str) -> NotStarted:
    """What ``exc``, raised while a ``verb`` (``launch``, ``relaunch``) into ``outputs`` was
    made, tells the person."""
    if isinstance(exc, LaunchRefused):
        return refusal(exc, f"Not {verb}ed")
    if isinstance(exc, OSError | RunStoreError):
        return NotStarted(f"Not {verb}ed", (launch_error(outputs, exc),), "outputs", True)
    return NotStarted(f"{verb.capitalize()} failed", (str(exc),), "invalid")
