"""The settings a run's end products are judged by (:class:`FinishSettings`), apart from the
finalizer that uses them (:mod:`ezpz_tui.core.launching.finalize`): the supervisor holds them
from its start, and a launch does not load the finalizer's module before its launcher starts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ezpz_tui.core.watching.efficiency import PeakSettings


@dataclass(frozen=True)
class FinishSettings:
    """The config's settings a run's end products are judged by, given by whoever starts the
    finalizer (the supervisor, its tether, ``ezpz-tui finalize``), which reads no config: the
    peak MFU divides by (``[efficiency]``) and the step-time factor that makes a rank a
    straggler in the summary's verdicts (``[monitor] slow_factor``), as the live view judged."""

    peaks: PeakSettings | None = None  # None: the device table's peak
    slow_factor: float = 1.5

    def args(self) -> list[str]:
        """These settings as the finalizer's (and the tether's) command-line options."""
        peaks = self.peaks
        given = []
        if peaks is not None and peaks.peak_tflops is not None:
            given = ["--peak-tflops", repr(peaks.peak_tflops)]
        dtype = ["--peak-dtype", peaks.dtype] if peaks is not None else []
        return [*given, *dtype, "--slow-factor", repr(self.slow_factor)]
