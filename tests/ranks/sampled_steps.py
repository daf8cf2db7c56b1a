"""Trains a tiny model on the samples a :class:`runtime.sampler.GlobalSampler` hands this rank.

``sampled_steps.py END [RESUME]``: from step 0 (or the step of the checkpoint ``RESUME``) to step
``END``, each rank writes the sample ids of each step to ``seen/rank-<N>.jsonl`` in the run
directory, then the run saves a checkpoint at ``END``. Whatever DP the launch has (its world
size), a test can put together which samples every step of every run trained on.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

import runtime
from runtime.checkpoint import Checkpointer
from runtime.sampler import GlobalSampler

SAMPLES, GLOBAL_BATCH = 20, 8  # 20 is no multiple of 8: steps reach across epochs

end = int(sys.argv[1])
resume = sys.argv[2] if len(sys.argv) > 2 else None
info = runtime.setup()
run_dir = Path(os.environ["EZPZ_RUN_DIR"])
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
sampler = GlobalSampler.for_rank(info, SAMPLES, GLOBAL_BATCH, seed=7)
ckpt = Checkpointer(model, optimizer, run_dir, data=sampler, async_save=False, poll_every=0)
start = ckpt.resume(resume) if resume else 0
seen = run_dir / "seen"
seen.mkdir(parents=True, exist_ok=True)
features = torch.arange(SAMPLES * 4, dtype=torch.float32).reshape(SAMPLES, 4) / 100
with (seen / f"rank-{info.rank:05d}.jsonl").open("w") as out:
    for step in range(start, end):
        ids = sampler.next_indices()
        loss = model(features[ids]).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        out.write(json.dumps({"step": step, "dp": info.size("dp"), "ids": ids}) + "\n")
ckpt.save(end)
ckpt.close()
runtime.cleanup()
