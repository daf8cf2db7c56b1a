"""A rank script whose lines say when they were written: rank 0 is silent for ``EZPZ_QUIET_S``
seconds first (a rank still importing on a loaded node, its log open and empty), then every rank
prints a line every 0.1 s until ``EZPZ_LINES_S`` seconds from its start."""

from __future__ import annotations

import os
import time

from runtime.env import rank_info_or_single

rank = rank_info_or_single().rank
start = time.time()
if rank == 0:
    time.sleep(float(os.environ.get("EZPZ_QUIET_S", "0")))
line = 0
while time.time() - start < float(os.environ["EZPZ_LINES_S"]):
    print(f"rank {rank} line {line} written at {time.time():.3f}", flush=True)
    line += 1
    time.sleep(0.1)
