"""The demo's synthetic data: one global batch per step from one seed, sliced per rank.

Every rank draws the same global batch and keeps its rows (its DP replica) and columns (its CP
chunk), so the data a step trains on does not depend on the layout and losses from different
layouts can be compared step by step.
"""

from __future__ import annotations

import torch


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


class GlobalBatches:
    """Draws the global batch of each step and hands this rank its slice of it."""

    def __init__(
        self, seed: int, global_batch: int, seq_len: int, vocab: int, noise: float
    ) -> None:
        self.gen = torch.Generator().manual_seed(seed)
        self.shape = (global_batch, seq_len, vocab, noise)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Where the draw is: a resumed run draws the global batches the first run would have."""
        return {"generator": self.gen.get_state()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.gen.set_state(state["generator"])

    def next(self, rows: slice, columns: slice) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = make_batch(self.gen, *self.shape)
        return x[rows, columns].contiguous(), y[rows, columns].contiguous()
