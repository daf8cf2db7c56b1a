"""Hugging Face Accelerate as its users write it: one prepared model, one step, one reduce."""

import gc

import torch
from accelerate import Accelerator

accelerator = Accelerator(cpu=True)
torch.manual_seed(accelerator.process_index)  # different data per rank, as a sampler gives
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model, optimizer = accelerator.prepare(model, optimizer)
loss = model(torch.randn(8, 4)).pow(2).mean()
accelerator.backward(loss)
optimizer.step()
total = accelerator.reduce(torch.tensor([accelerator.process_index + 1.0]), reduction="sum")
weights = accelerator.unwrap_model(model).weight.detach().sum().item()
print(
    f"rank={accelerator.process_index} world={accelerator.num_processes} sum={total.item()} "
    f"distributed={accelerator.distributed_type} weights={weights:.6f}",
    flush=True,
)
# Leave the process group before exiting: a gloo peer that exits with it still open can abort
# the other at interpreter exit ("terminate called without an active exception").
# Release the tensors and collect first, so gloo's threads do not drop them at shutdown.
accelerator.wait_for_everyone()
del model, optimizer, loss, total
gc.collect()
accelerator.end_training()  # destroys the process group
