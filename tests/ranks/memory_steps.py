"""Ranks that record STEPS steps with History, each with a peak-memory metric, as a GPU run does.

``python memory_steps.py STEPS [fail]``: every rank records ``loss``, its rate (64 tokens per
step) and ``mem_peak_gb`` (memory.py's name; GiB), which rises and falls within the run, so a
rank's peak is not its last value. The last rank records one step more than the others, so the
run's highest step is on it alone. With ``fail`` the last rank then raises, and the others,
waiting for it, are stopped: the run fails.
"""

from __future__ import annotations

import sys
import time

from runtime.env import rank_info_or_single
from runtime.history import History

steps, fail = int(sys.argv[1]), sys.argv[2:] == ["fail"]
info = rank_info_or_single()
last = info.rank == info.world_size - 1
with History() as history:
    for step in range(steps + (1 if last else 0)):
        time.sleep(0.02)
        peak = 1.0 + info.rank + (2.0 if step == steps // 2 else 0.25 * (step % 3))
        history.record(step, {"loss": 2.0 / (step + 1), "mem_peak_gb": peak}, tokens=64)
    if fail and last:
        raise ValueError(f"the data ran out at step {step}")
if fail:
    time.sleep(120)  # the other ranks wait for a peer that is gone, until they are stopped
