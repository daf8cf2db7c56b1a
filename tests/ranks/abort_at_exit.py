"""Both ranks record steps with ``runtime.History``; then rank 1 prints torch's terminate
message and aborts (SIGABRT), as a rank whose process group dies in the interpreter's teardown.

``at-exit``: rank 1 aborts after its last step, the same as its peer's. ``mid-run``: rank 1
aborts three steps in while rank 0 went on to its last step and waits, as a peer in a collective.
No torch: the ending is what is under test, and it starts in a fraction of the time.
"""

import os
import resource
import sys
import time

from runtime.env import rank_info_or_single
from runtime.history import History
from runtime.records import decode
from runtime.rundir import RunDir

STEPS = 6
TERMINATE = "terminate called without an active exception"


def recorded(rank: int) -> int:
    """The last step rank ``rank`` has written, -1 before any."""
    path = RunDir(os.environ["EZPZ_RUN_DIR"]).metrics(rank)
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return -1
    steps = [r.step for r in map(decode, lines) if r is not None and r.step is not None]
    return max(steps, default=-1)


mode, rank = sys.argv[1], rank_info_or_single().rank
last = 3 if mode == "mid-run" and rank == 1 else STEPS
with History() as history:
    for step in range(last):
        history.record(step, {"loss": 1.0 / (step + 1)})
print(f"rank {rank}: recorded {last} steps", flush=True)
if rank == 0:
    if mode == "mid-run":
        time.sleep(120)  # waits for its peer, until the run's failure stops it
    sys.exit(0)
deadline = time.monotonic() + 60
while recorded(0) < STEPS - 1 and time.monotonic() < deadline:  # the peer's steps are on disk
    time.sleep(0.05)
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
print(TERMINATE, file=sys.stderr, flush=True)
os.abort()
