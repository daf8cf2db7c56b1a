"""A plain gloo DDP loop that never destroys its process group, as many users' scripts end.

Left to the interpreter's teardown, such a group aborted about one 2-rank run in six here
("terminate called without an active exception"); the exit hook destroys it first.
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group(backend="gloo")
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    optimizer.zero_grad()
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    optimizer.step()
print(f"rank {dist.get_rank()} done, loss {loss.item():.4f}", flush=True)
