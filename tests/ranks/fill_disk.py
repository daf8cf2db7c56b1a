"""A rank script that fills the disk of its run directory, as a checkpoint too big for it does.

Each rank prints a line, then writes ``checkpoint-<rank>.pt`` into the run directory in 64 KiB
pieces until the filesystem refuses (``ENOSPC``), and dies of that error with its traceback, as
``torch.save`` would. The partial checkpoint stays where it is.
"""

from __future__ import annotations

import os
import time

from runtime.env import rank_info_or_single

rank = rank_info_or_single().rank
print(f"rank {rank} saving a checkpoint", flush=True)
path = os.path.join(os.environ["EZPZ_RUN_DIR"], f"checkpoint-{rank}.pt")
with open(path, "wb") as fh:
    while True:
        fh.write(os.urandom(65536))
        fh.flush()
        time.sleep(0.005)
