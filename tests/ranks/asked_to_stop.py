"""A training loop whose rank 0 is asked, at step ``ASK`` (``asked_to_stop.py ASK``), to save
and stop, as a relaunch asks: it writes the request itself, so the test knows the step it was
seen at. Each rank appends the steps it finishes to ``steps/rank-<N>.txt`` in the run
directory, one a line, after :meth:`runtime.checkpoint.Checkpointer.step_done`: the steps run.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import torch

import runtime
from runtime.checkpoint import Checkpointer
from runtime.checkpoint_dirs import request_path

ask = int(sys.argv[1])
info = runtime.setup()
run_dir = Path(os.environ["EZPZ_RUN_DIR"])
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
ckpt = Checkpointer(model, optimizer, run_dir)  # the defaults: no periodic save
done = run_dir / "steps"
done.mkdir(parents=True, exist_ok=True)
with (done / f"rank-{info.rank:05d}.txt").open("w") as out:
    for step in range(1, 1000):
        loss = model(torch.ones(2, 4)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step == ask and info.rank == 0:
            request_path(run_dir).write_text(json.dumps({"stop": True, "id": "test"}))
        ckpt.step_done(step)
        out.write(f"{step}\n")
        out.flush()
ckpt.close()
runtime.cleanup()
