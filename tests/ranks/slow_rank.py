"""A rank script whose rank ``EZPZ_SLOW_RANK`` sleeps longer in every step: a straggler.

Each rank records its own step time (``dt``) with History, as a training loop that times its
compute before the collective would, for 40 steps."""

from __future__ import annotations

import os
import time

from runtime.env import rank_info_or_single
from runtime.history import History

rank = rank_info_or_single().rank
slow = rank == int(os.environ.get("EZPZ_SLOW_RANK", "1"))
with History() as history:
    for step in range(40):
        start = time.perf_counter()
        time.sleep(0.3 if slow else 0.05)
        history.record(step, {"loss": 1.0 / (step + 1)}, dt=time.perf_counter() - start)
        print(f"rank {rank} step {step}", flush=True)
