"""A gloo job whose rank ``EZPZ_LATE_RANK`` (default 2) sleeps 40 ms before each of its
all_reduces: a straggler everyone waits for at the collectives, with no metrics of its own.
Every rank makes ``steady-<rank>`` in the folder named by the first argument after 60 of them,
and keeps going for a while, then waits."""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, t = dist.get_rank(), torch.ones(4)
late = int(os.environ.get("EZPZ_LATE_RANK", "2"))
for i in range(2000):
    if rank == late:
        time.sleep(0.04)
    dist.all_reduce(t)
    if i == 60:
        open(os.path.join(sys.argv[1], f"steady-{rank}"), "w").close()
while True:
    time.sleep(0.5)
