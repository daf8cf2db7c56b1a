"""A gloo job whose ranks record a step with History every ~50 ms until ``MARKS/stop`` exists.

Each rank waits while ``MARKS/hold`` exists, then marks ``MARKS/steady-<rank>`` past step 10.
When ``MARKS/abandon`` names a rank that is its node's digest writer, that rank ends its part as
if its writer had died
(``runtime.node_digest._abandon``: socket closed, thread stopped, no report sent again) and
marks ``MARKS/abandoned-<rank>``; it trains on, so the job lives and another rank can take over.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from runtime import node_digest
from runtime.history import History

marks = Path(sys.argv[1])
dist.init_process_group("gloo")
rank, t = dist.get_rank(), torch.ones(4)
while (marks / "hold").exists():  # nothing reported before the test lets the ranks go
    time.sleep(0.05)
abandoned = False
with History() as history:
    step = 0
    while not (marks / "stop").exists():
        start = time.perf_counter()
        time.sleep(0.05)
        dist.all_reduce(t)
        history.record(step, {"loss": 1.0 / (step + 1)}, dt=time.perf_counter() - start)
        if step == 10:
            (marks / f"steady-{rank}").touch()
        client = node_digest._clients[0] if node_digest._clients else None
        if not abandoned and client is not None and client.writer is not None:
            asked = marks / "abandon"
            if asked.exists() and asked.read_text().strip() == str(rank):
                node_digest._abandon()
                abandoned = True
                (marks / f"abandoned-{rank}").touch()
        step += 1
dist.destroy_process_group()
