"""One rank raises at step 5 while its peers wait in that step's all_reduce: the most common
failure of a distributed job. ``python raise_at_step.py RANK``: the rank that raises.

Plain torch.distributed over gloo, as a user's script would be (no runtime import): the group is
left to the exit hook, whose destroy at exit makes the raising rank end after the peers that lost
it, so the order of the ranks' ends names a bystander about half the time.
"""

import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
culprit = int(sys.argv[1])
tensor = torch.ones(1)
for step in range(6):
    if dist.get_rank() == culprit and step == 5:
        raise ValueError("bad batch at step 5")
    dist.all_reduce(tensor)
print("done", flush=True)
