"""When a run will finish, against the walltime its job has left.

The steps left (the command's ``--steps``, less the steps recorded) times the median step time
(from the ranks' JSONL) is the time the run still needs; when that is more than the walltime
left, the run will not finish in this job, and the step it will reach is said instead, so the
person can checkpoint, ask for more time or submit the continuation in time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

DEMO = "runtime.examples.train"
DEMO_STEPS = 1000  # the demo's --steps default


def total_steps(command: Sequence[str]) -> int | None:
    """The steps a command trains for: its ``--steps N`` (or ``--steps=N``), the demo's
    default without one; None when it does not say."""
    for i, word in enumerate(command):
        text = command[i + 1] if word == "--steps" and i + 1 < len(command) else None
        if word.startswith("--steps="):
            text = word.split("=", 1)[1]
        if text is not None:
            return int(text) if text.isdigit() else None
    return DEMO_STEPS if DEMO in command else None


@dataclass(frozen=True)
class Finish:
    """``needs_s`` more seconds for the ``total`` steps; ``reached`` the step the walltime
    ends at when it ends first (None when the run fits, or the walltime is not known)."""

    needs_s: float
    total: int
    walltime_s: float | None
    reached: int | None

    def words(self) -> str:
        if self.reached is not None:
            return f"⚠ walltime ends first, at ~step {self.reached} of {self.total}"
        return f"finish in {duration(self.needs_s)}"


def expected_finish(
    last_step: int | None, total: int | None, step_s: float | None, walltime_s: float | None
) -> Finish | None:
    """None while any figure is missing or the run is past its total."""
    if last_step is None or total is None or not step_s or step_s <= 0:
        return None
    left = total - (last_step + 1)
    if left < 0:
        return None
    needs = left * step_s
    reached = None
    if walltime_s is not None and needs > walltime_s:
        reached = last_step + 1 + int(max(walltime_s, 0.0) / step_s)
    return Finish(needs, total, walltime_s, reached)


def duration(seconds: float) -> str:
    """``H:MM:SS``, as the allocation panel shows the walltime."""
    whole = max(0, int(seconds))
    hours, rem = divmod(whole, 3600)
    return f"{hours}:{rem // 60:02d}:{rem % 60:02d}"
