"""A step's loss and gradient norm for the whole model, whichever rank holds which piece.

Each rank holds some gradients as its own (a pipeline stage's layers, a TP or FSDP shard) and
others as copies (replicated over TP, or over the replica group under DDP). Every rank weighs
each squared gradient norm by one over its number of copies and one all-reduce over the world
sums them, so each piece counts once. The loss rides along in the same all-reduce: the ranks of
the last stage add their share, so every rank logs the mean loss of the global batch. One
collective per step instead of a broadcast, an all-reduce over replicas and one per norm.
"""

from __future__ import annotations

import math

import torch

from runtime.dist import DistInfo


def tp_shards(params: list[torch.nn.Parameter]) -> list[int]:
    """How many pieces TP cut each parameter into, read before DDP turns DTensors into plain
    tensors (it localises them) and the placements are gone."""
    return [_shards(p) for p in params]


def _shards(t: torch.Tensor) -> int:
    placements = getattr(t, "placements", None)
    if placements is None:
        return 1
    mesh = t.device_mesh  # type: ignore[attr-defined]
    # Not is_shard(): FSDP over a TP shard places a _StridedShard, which does not count as one.
    return math.prod(mesh.size(i) for i, p in enumerate(placements) if not p.is_replicate())


class StepReducer:
    """Global loss and gradient norm in one all-reduce, and clipping by that norm."""

    def __init__(self, params: list[torch.nn.Parameter], tp_pieces: list[int], info: DistInfo):
        self.params = params
        self.info = info
        per_stage = info.world_size // info.size("pp")
        # FSDP's DTensors know their own sharding; DDP's localised tensors keep TP's.
        pieces = [
            _shards(p) if hasattr(p, "placements") else n
            for p, n in zip(params, tp_pieces, strict=True)
        ]
        self.weights = [1.0 / (per_stage // n) for n in pieces]
        self.loss_share = 1.0 / per_stage

    def __call__(self, loss: torch.Tensor | None, max_norm: float) -> tuple[float, float]:
        """(mean loss of the global batch, gradient norm before clipping); clips in place."""
        total = torch.zeros(2, dtype=torch.float64, device=self.info.device)
        if loss is not None:
            total[0] = loss.double() * self.loss_share
        for p, weight in zip(self.params, self.weights, strict=True):
            if p.grad is not None:
                g = p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
                total[1] += torch.linalg.vector_norm(g, dtype=torch.float32).double() ** 2 * weight
        if self.info.mesh is not None:
            import torch.distributed as dist

            dist.all_reduce(total)
        loss_value, norm = total[0].item(), math.sqrt(total[1].item())
        coef = max_norm / (norm + 1e-6)
        if coef < 1.0:
            for p in self.params:
                if p.grad is not None:
                    p.grad.mul_(coef)
        return loss_value, norm
