"""Context parallelism for the demo: each CP rank holds one contiguous chunk of every sequence.

Attention is the only place where positions meet, so it is the only place that talks to the
group: a rank's queries need every earlier key and value, which it gets with one autograd-aware
all-gather of its chunk's K and V. The backward of that all-gather sums what every rank's
queries contributed to this rank's K and V, so after the gradients are averaged over the
replica group (dp x cp) they equal the gradients of the unsplit sequence. Ring attention would
save memory at long context; for a demo the plain gather is exact and easy to check.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class ContextShard:
    """Which chunk of the sequence this rank holds, and the group that holds the others."""

    group: Any
    rank: int
    size: int
    seq_len: int

    @property
    def chunk(self) -> int:
        return self.seq_len // self.size

    @property
    def offset(self) -> int:
        """Global position of this chunk's first token: positional embeddings and the causal
        mask are offset by it so a token sees exactly what it would in the whole sequence."""
        return self.rank * self.chunk

    def columns(self) -> slice:
        return slice(self.offset, self.offset + self.chunk)

    def gather_kv(self, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every rank's K and V along the sequence (dim 1), in one collective instead of two."""
        from torch.distributed._functional_collectives import all_gather_single

        width = k.shape[-1]
        kv = all_gather_single(torch.cat([k, v], dim=-1), gather_dim=1, group=self.group)
        return kv[..., :width], kv[..., width:]

    def causal_mask(self, queries: int, keys: int, device: torch.device) -> torch.Tensor:
        """True where a query of this chunk may attend a key of the whole sequence."""
        q_pos = torch.arange(queries, device=device).unsqueeze(1) + self.offset
        k_pos = torch.arange(keys, device=device).unsqueeze(0)
        return k_pos <= q_pos
