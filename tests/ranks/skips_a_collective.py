"""A gloo job whose rank ``EZPZ_SKIPPING_RANK`` (default 3) never enters the
``EZPZ_SKIPPED``-th all_reduce (default the 6th): the others wait in it for ever. The skipping
rank makes ``skipping`` in the folder named by the first argument when it gets there, and then
sleeps."""

from __future__ import annotations

import os
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, t = dist.get_rank(), torch.ones(4)
skipping = int(os.environ.get("EZPZ_SKIPPING_RANK", "3"))
skipped = int(os.environ.get("EZPZ_SKIPPED", "6"))
for i in range(skipped + 2):
    if rank == skipping and i == skipped - 1:
        open(os.path.join(sys.argv[1], "skipping"), "w").close()
        while True:
            time.sleep(0.5)
    dist.all_reduce(t)
