"""A script written for torchrun and nothing else: the default ``env://`` rendezvous."""

import torch
import torch.distributed as dist

dist.init_process_group(backend="gloo")
value = torch.ones(1) * (dist.get_rank() + 1)
dist.all_reduce(value)
print(f"rank={dist.get_rank()} world={dist.get_world_size()} sum={value.item()}", flush=True)
dist.destroy_process_group()
