"""Lightning Fabric as its users write it: DDP on the CPU, two devices, one step."""

import gc

import torch
from lightning_fabric import Fabric

fabric = Fabric(accelerator="cpu", strategy="ddp", devices=2)
fabric.launch()
torch.manual_seed(fabric.global_rank)  # different data per rank
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = fabric.setup(model, optimizer)
loss = model(torch.randn(8, 4)).pow(2).mean()
fabric.backward(loss)
optimizer.step()
total = fabric.all_reduce(torch.tensor([fabric.global_rank + 1.0]), reduce_op="sum")
weights = model.weight.detach().sum().item()
print(
    f"rank={fabric.global_rank} world={fabric.world_size} sum={total.item()} weights={weights:.6f}",
    flush=True,
)
# Leave the process group before exiting: a gloo peer that exits with it still open can abort
# the other at interpreter exit ("terminate called without an active exception"). Gloo's worker
# threads must not drop the last tensor references during interpreter shutdown either: release
# them and collect first (docs/pitfalls.md: 0 aborts in 70 runs that way).
fabric.barrier()
del model, optimizer, loss, total
gc.collect()
torch.distributed.destroy_process_group()
