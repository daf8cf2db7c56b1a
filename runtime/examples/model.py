"""The demo's model: a small causal transformer that can be cut into pipeline stages.

Every rank builds the whole model from the same seed and then keeps its part (its stage's
layers, its TP shard, its sequence chunk), so the initial weights are the same whatever the
layout and a loss can be compared across layouts.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from runtime.dist import DistInfo
from runtime.examples.context import ContextShard


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, cp: ContextShard | None = None) -> None:
        super().__init__()
        self.head_dim = dim // heads
        self.cp = cp
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
            return t.view(batch, t.shape[1], heads, self.head_dim).transpose(1, 2)

        if self.cp is None:
            att = F.scaled_dot_product_attention(split(q), split(k), split(v), is_causal=True)
        else:
            k, v = self.cp.gather_kv(k, v)
            mask = self.cp.causal_mask(seq, k.shape[1], x.device)
            att = F.scaled_dot_product_attention(split(q), split(k), split(v), attn_mask=mask)
        x = x + self.wo(att.transpose(1, 2).reshape(batch, seq, width))
        return x + self.down(F.gelu(self.up(self.mlp_norm(x))))


class Elsewhere(nn.Identity):
    """The place of a block another pipeline stage holds: it keeps the blocks' indices, and so
    every parameter's name, those of the whole model on every stage. A checkpoint saved by one
    stage layout then loads into another, each stage taking the layers it holds."""


class TinyLM(nn.Module):
    """Embedding, blocks, head; a pipeline stage keeps a slice of this and drops the rest."""

    def __init__(
        self,
        vocab: int,
        dim: int,
        heads: int,
        layers: int,
        seq_len: int,
        cp: ContextShard | None = None,
    ) -> None:
        super().__init__()
        self.offset = cp.offset if cp is not None else 0
        self.tok: nn.Embedding | None = nn.Embedding(vocab, dim)
        self.pos: nn.Parameter | None = nn.Parameter(torch.zeros(1, seq_len, dim))
        self.blocks = nn.ModuleList(Block(dim, heads, cp) for _ in range(layers))
        self.norm: nn.LayerNorm | None = nn.LayerNorm(dim)
        self.head: nn.Linear | None = nn.Linear(dim, vocab, bias=False)

    def keep_stage(self, layers: range, first: bool, last: bool) -> None:
        """Drop what another pipeline stage holds: the embedding unless ``first``, the head
        unless ``last``, and every block outside ``layers``."""
        self.blocks = nn.ModuleList(
            block if i in layers else Elsewhere() for i, block in enumerate(self.blocks)
        )
        if not first:
            self.tok = self.pos = None
        if not last:
            self.norm = self.head = None

    def held_blocks(self) -> list[Block]:
        return [block for block in self.blocks if isinstance(block, Block)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens in on the first stage, hidden states between stages, logits out of the last."""
        if self.tok is not None and self.pos is not None:
            x = self.tok(x) + self.pos[:, self.offset : self.offset + x.shape[1]]
        for block in self.held_blocks():
            x = block(x)
        if self.norm is not None and self.head is not None:
            x = self.head(self.norm(x))
        return x


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
    for block in model.held_blocks():
        parallelize_module(block, info.mesh["tp"], plan)


def local_numel(model: nn.Module) -> int:
    """Parameters this rank stores: a DTensor (TP, FSDP) counts only its local shard."""
    total = 0
    for p in model.parameters():
        to_local = getattr(p, "to_local", None)
        total += (to_local() if to_local is not None else p).numel()
    return total
