"""The embedded demo job: a small causal transformer on synthetic sequences.

Nothing is downloaded. Each sequence follows ``x[t+1] = (a*x[t] + b) mod vocab`` with some
random tokens mixed in, so the loss falls quickly towards a floor above zero and a broken
gradient sync is visible as a curve that stalls. The sizes it is given are used for real:

- TP > 1 splits attention heads and MLP columns with torch's tensor-parallel API;
- data parallelism (DDP or FSDP2) runs over the replica group;
- PP and CP build their process groups (checked with an all-reduce at start); the demo does not
  split layers or sequences, so ranks along those dimensions train as extra replicas, and it says
  so in the log.

Run under any launcher, e.g. ``mpiexec -n 2 python -m runtime.examples.train --steps 20``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import runtime
from runtime.dist import MESH_DIMS, DistInfo, replica_mesh


class Block(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.head_dim = dim // heads
        self.attn_norm = nn.LayerNorm(dim)
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        self.mlp_norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.attn_norm(x)
        q, k, v = self.wq(h), self.wk(h), self.wv(h)
        batch, seq, width = q.shape  # width is dim/tp under tensor parallelism
        heads = width // self.head_dim

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, seq, heads, self.head_dim).transpose(1, 2)

        att = F.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True)
        x = x + self.wo(att.transpose(1, 2).reshape(batch, seq, width))
        return x + self.down(F.gelu(self.up(self.mlp_norm(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab: int, dim: int, heads: int, layers: int, seq_len: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(1, seq_len, dim))
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.tok(tokens) + self.pos[:, : tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def apply_tensor_parallel(model: TinyLM, info: DistInfo) -> None:
    """Column-split q/k/v and the MLP's up projection, row-split the outputs (Megatron style)."""
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    plan = {
        "wq": ColwiseParallel(),
        "wk": ColwiseParallel(),
        "wv": ColwiseParallel(),
        "wo": RowwiseParallel(),
        "up": ColwiseParallel(),
        "down": RowwiseParallel(),
    }
    for block in model.blocks:
        parallelize_module(block, info.mesh["tp"], plan)


def make_batch(
    gen: torch.Generator, batch: int, seq: int, vocab: int, noise: float
) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = 5, 3  # a is coprime with any power-of-two vocab, so the map is a permutation
    tokens = torch.empty(batch, seq + 1, dtype=torch.long)
    tokens[:, 0] = torch.randint(vocab, (batch,), generator=gen)
    for t in range(seq):
        tokens[:, t + 1] = (a * tokens[:, t] + b) % vocab
    mask = torch.rand(batch, seq + 1, generator=gen) < noise
    tokens[mask] = torch.randint(vocab, (int(mask.sum()),), generator=gen)
    return tokens[:, :-1], tokens[:, 1:]


def lr_at(step: int, steps: int, peak: float) -> float:
    warmup = max(1, steps // 10)
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def check_groups(info: DistInfo, log: Any) -> None:
    """Prove every mesh dimension's group works with one all-reduce, and say what it is for."""
    import torch.distributed as dist

    for dim in MESH_DIMS:
        ones = torch.ones(1, device=info.device)
        dist.all_reduce(ones, group=info.group(dim))
        if int(ones.item()) != info.size(dim):
            raise RuntimeError(f"{dim} group all-reduce gave {ones.item()}, want {info.size(dim)}")
    notes = [f"{d}={info.size(d)} (coord {info.coord(d)})" for d in MESH_DIMS]
    log.info("process groups ok: %s", ", ".join(notes))
    for dim, name in (("pp", "pipeline"), ("cp", "context")):
        if info.size(dim) > 1:
            log.info(
                "%s parallel size %d: group built; the demo does not split %s, so these ranks "
                "train as data-parallel replicas",
                name,
                info.size(dim),
                "layers" if dim == "pp" else "sequences",
            )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m runtime.examples.train", description=__doc__)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=8, help="sequences per replica per step")
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--vocab", type=int, default=128)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--noise", type=float, default=0.1, help="fraction of random tokens")
    p.add_argument("--strategy", choices=("ddp", "fsdp", "none"), default="ddp")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--tp", type=int, default=None, help="default: EZPZ_TP from the launcher")
    p.add_argument("--pp", type=int, default=None, help="default: EZPZ_PP from the launcher")
    p.add_argument("--cp", type=int, default=None, help="default: EZPZ_CP from the launcher")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--sleep", type=float, default=0.0, help="extra seconds per step (demos)")
    p.add_argument("--log-every", type=int, default=1)
    return p.parse_args(argv)


def train(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Set up, train, and tear down once every tensor of the run has been released."""
    log = runtime.get_logger("ezpz.train", all_ranks=True)
    info = runtime.setup(args.tp, args.pp, args.cp, seed=args.seed)
    log.info("%s", info.describe())
    for key, reason in info.reasons.items():
        log.info("%s: %s", key, reason)
    if args.heads % info.size("tp"):
        raise SystemExit(f"--heads {args.heads} must be divisible by tp={info.size('tp')}")
    if info.mesh is not None:
        check_groups(info, log)
    summary = _train_loop(args, info, log)  # its model, optimizer and tensors die on return
    if "loss" in summary:
        log.info("loss mean=%.4f last=%.4f", summary["loss"]["mean"], summary["loss"]["last"])
    runtime.cleanup()
    return summary


def _train_loop(args: argparse.Namespace, info: DistInfo, log: Any) -> dict[str, dict[str, float]]:
    tp = info.size("tp")
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = TinyLM(args.vocab, args.dim, args.heads, args.layers, args.seq_len).to(info.device)
    if tp > 1:
        apply_tensor_parallel(model, info)
    dtype = getattr(torch, args.dtype)
    model = runtime.wrap_model(
        model,
        info,
        args.strategy,
        param_dtype=dtype if args.strategy == "fsdp" else None,
        reduce_dtype=torch.float32 if args.strategy == "fsdp" else None,
        shard_modules=list(model.blocks),
    )
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    replicas = replica_mesh(info)
    replica = replicas.get_local_rank() if replicas is not None else 0
    n_replicas = replicas.size() if replicas is not None else 1
    gen = torch.Generator().manual_seed(args.seed * 1000 + replica)  # TP peers share data
    autocast = args.dtype != "float32" and args.strategy != "fsdp"
    history = runtime.History()
    log.info("metrics -> %s", history.path)
    tokens_per_step = args.batch_size * args.seq_len * n_replicas
    for step in range(args.steps):
        t0 = time.perf_counter()
        x, y = make_batch(gen, args.batch_size, args.seq_len, args.vocab, args.noise)
        x, y = x.to(info.device), y.to(info.device)
        lr = lr_at(step, args.steps, args.lr)
        for group in opt.param_groups:
            group["lr"] = lr
        with torch.autocast(info.device.type, dtype=dtype, enabled=autocast):
            logits = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, args.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        metrics: dict[str, Any] = {"loss": loss.item(), "lr": lr}
        if tp == 1:
            metrics["grad_norm"] = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if args.sleep:
            time.sleep(args.sleep)
        dt = time.perf_counter() - t0
        metrics.update(dt=dt, tokens_per_s=tokens_per_step / dt)
        history.record(step, metrics)
        if step % args.log_every == 0 or step == args.steps - 1:
            log.info(
                "step %d/%d loss=%.4f lr=%.2e dt=%.1fms tok/s=%.0f",
                step,
                args.steps,
                metrics["loss"],
                lr,
                dt * 1e3,
                metrics["tokens_per_s"],
            )
    history.close()
    return history.summary()


def main(argv: list[str] | None = None) -> int:
    train(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
