"""What decides a run's peak beyond the run itself, in a module of its own: every launch's
supervisor holds one for its finalizer, and a launch starts without the efficiency reader
(:mod:`ezpz_tui.core.watching.efficiency`: the probe, the peak table) that only a run's end uses.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PeakSettings:
    """What decides a run's peak beyond the run itself: the config's ``[efficiency]``, and
    whether the CPU probe may run now (seconds) when this host's answer is not cached."""

    peak_tflops: float | None = None
    dtype: str = "bf16"
    probe: bool = True
