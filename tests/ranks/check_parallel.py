"""Run inside each rank by the multi-rank tests: one training step, then facts as JSON.

``python tests/ranks/check_parallel.py MODE OUT_DIR`` with MODE ddp, fsdp or tp. Each rank writes
``OUT_DIR/result-<rank>.json``; the test compares them across ranks.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F

import runtime
from runtime.examples.data import make_batch
from runtime.examples.model import TinyLM, apply_tensor_parallel

VOCAB, DIM, HEADS, LAYERS, SEQ = 32, 32, 4, 2, 16


def model_and_batch(seed_data: int) -> tuple[TinyLM, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = TinyLM(VOCAB, DIM, HEADS, LAYERS, SEQ)
    x, y = make_batch(torch.Generator().manual_seed(seed_data), 4, SEQ, VOCAB, 0.1)
    return model, x, y


def step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
    loss.backward()
    opt.step()
    return loss.item()


def full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def main(mode: str, out: Path) -> None:
    info = runtime.setup(tp=2 if mode == "tp" else 1)
    result: dict = {
        "rank": info.rank,
        "world": info.world_size,
        "source": info.source,
        "backend": info.backend,
        "sizes": info.sizes,
    }
    if mode == "ddp":
        model, x, y = model_and_batch(seed_data=info.rank)  # different data per rank
        ddp = runtime.wrap_model(model, info, "ddp")
        result["loss"] = step(ddp, x, y)
        grads = torch.cat([p.grad.flatten() for p in model.parameters()])
        gathered = [torch.empty_like(grads) for _ in range(info.world_size)]
        dist.all_gather(gathered, grads)
        result["grads_equal"] = all(torch.equal(gathered[0], g) for g in gathered)
        result["grad_norm"] = grads.norm().item()
        # The averaged gradient must be the mean of each rank's own gradient.
        ref, _, _ = model_and_batch(0)
        own = []
        for r in range(info.world_size):
            ref.zero_grad()
            _, xr, yr = model_and_batch(seed_data=r)
            F.cross_entropy(ref(xr).reshape(-1, VOCAB), yr.reshape(-1)).backward()
            own.append(torch.cat([p.grad.flatten() for p in ref.parameters()]))
        result["grads_are_mean"] = torch.allclose(grads, torch.stack(own).mean(0), atol=1e-6)
    elif mode == "fsdp":
        model, x, y = model_and_batch(seed_data=info.rank)
        ref = model_and_batch(0)[0]
        ref.load_state_dict(model.state_dict())
        sharded = runtime.wrap_model(model, info, "fsdp", shard_modules=list(model.blocks))
        result["loss"] = step(sharded, x, y)
        params = torch.cat([full(p).detach().flatten() for p in sharded.parameters()])
        local = sum(p.to_local().numel() for p in sharded.parameters())
        result["sharded"] = local < params.numel()
        # Reference: one process stepping on the mean gradient of every rank's batch.
        opt = torch.optim.SGD(ref.parameters(), lr=0.1)
        for r in range(info.world_size):
            _, xr, yr = model_and_batch(seed_data=r)
            loss = F.cross_entropy(ref(xr).reshape(-1, VOCAB), yr.reshape(-1))
            (loss / info.world_size).backward()
        opt.step()
        expect = torch.cat([p.detach().flatten() for p in ref.parameters()])
        result["matches_reference"] = torch.allclose(params, expect, atol=1e-5)
    elif mode == "tp":
        model, x, y = model_and_batch(seed_data=0)  # TP peers see the same batch
        ref, _, _ = model_and_batch(seed_data=0)
        apply_tensor_parallel(model, info)
        result["is_dtensor"] = hasattr(model.blocks[0].wq.weight, "full_tensor")
        result["local_shape"] = list(model.blocks[0].wq.weight.to_local().shape)
        result["loss"] = step(model, x, y)
        ref_loss = step(ref, x, y)
        result["loss_matches"] = abs(result["loss"] - ref_loss) < 1e-5
        params = torch.cat([full(p).detach().flatten() for p in model.parameters()])
        expect = torch.cat([p.detach().flatten() for p in ref.parameters()])
        result["params_match"] = torch.allclose(params, expect, atol=1e-5)
    history = runtime.History()
    for i in range(3):
        history.record(i, {"loss": result.get("loss", 0.0) - i, "rank_plus": info.rank + i})
    history.close()
    (out / f"result-{info.rank}.json").write_text(json.dumps(result))
    del model
    runtime.cleanup()


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))
