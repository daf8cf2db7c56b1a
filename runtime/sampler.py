"""One global order of samples, handed out by DP rank, with one cursor a checkpoint keeps.

A relaunch into another DP size must neither skip nor repeat a sample. torch's
``DistributedSampler`` keeps a position per rank and strides by the world size, so its position
means nothing to a run with another DP (torchtitan refuses to reshard a data loader across a DP
change, pytorch/torchtitan#816). Here the position is the job's: how many samples every DP
replica together has taken, in an order fixed by the seed alone (a permutation per epoch, epoch
after epoch). Each step takes the next ``global_batch`` samples of that order and DP rank ``r``
trains on the ``r``-th equal share of them, so a run with any DP continues at the same sample.

Pass the sampler as a :class:`runtime.checkpoint.Checkpointer`'s ``data`` (or next to it in
``data``'s ``state_dict``): the cursor and the seed are saved with the step. Take a step's
indices with :meth:`GlobalSampler.next_indices` in the training loop; iterating the sampler
gives the same lists, for a ``DataLoader(batch_sampler=...)`` without workers (workers fetch
ahead, so the cursor would count samples no step trained on).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

_SEED_BITS = 32


class SamplerError(ValueError):
    """A layout or a saved state this sampler cannot honour, said the way a person fixes it."""


class GlobalSampler:
    """This DP rank's indices of each step's global batch, from one global cursor."""

    def __init__(
        self,
        num_samples: int,
        global_batch: int,
        *,
        dp_rank: int,
        dp_size: int,
        seed: int = 0,
        shuffle: bool = True,
    ) -> None:
        if num_samples < 1:
            raise SamplerError(f"the dataset holds {num_samples} samples: it needs at least 1")
        if not 0 <= dp_rank < dp_size:
            raise SamplerError(f"DP rank {dp_rank} is outside DP {dp_size}")
        if global_batch < dp_size or global_batch % dp_size:
            raise SamplerError(
                f"global batch {global_batch} does not split into DP {dp_size} equal shares: "
                f"make it a multiple of {dp_size}"
            )
        self.num_samples, self.global_batch = num_samples, global_batch
        self.dp_rank, self.dp_size = dp_rank, dp_size
        self.seed, self.shuffle = seed, shuffle
        self.cursor = 0  # samples the whole job has taken, over every epoch
        self._epoch: int | None = None
        self._order: list[int] = []

    @classmethod
    def for_rank(
        cls, info: Any, num_samples: int, global_batch: int, *, seed: int = 0, shuffle: bool = True
    ) -> GlobalSampler:
        """The sampler of the rank :func:`runtime.setup` returned ``info`` for: its DP
        coordinate and size (1 and 0 on a single process)."""
        return cls(
            num_samples,
            global_batch,
            dp_rank=info.coord("dp"),
            dp_size=info.size("dp"),
            seed=seed,
            shuffle=shuffle,
        )

    @property
    def epoch(self) -> int:
        return self.cursor // self.num_samples

    def next_indices(self) -> list[int]:
        """This rank's share of the next global batch; every rank moves the cursor alike."""
        share = self.global_batch // self.dp_size
        start = self.cursor + self.dp_rank * share
        self.cursor += self.global_batch
        return [self._at(position) for position in range(start, start + share)]

    def __iter__(self) -> Iterator[list[int]]:
        """Steps until this epoch's samples are all taken (the last may reach into the next)."""
        end = (self.epoch + 1) * self.num_samples
        while self.cursor < end:
            yield self.next_indices()

    def __len__(self) -> int:
        left = (self.epoch + 1) * self.num_samples - self.cursor
        return -(-left // self.global_batch)

    def _at(self, position: int) -> int:
        epoch, offset = divmod(position, self.num_samples)
        if not self.shuffle:
            return offset
        if epoch != self._epoch:
            self._order, self._epoch = _permutation(self.num_samples, self.seed, epoch), epoch
        return self._order[offset]

    def state_dict(self) -> dict[str, Any]:
        """The cursor and what the order depends on, as tensors: torch.distributed.checkpoint
        saves one copy of what every rank holds alike and hands it to each rank on a load."""
        import torch

        return {
            "cursor": torch.tensor(self.cursor, dtype=torch.int64),
            "seed": torch.tensor(self.seed, dtype=torch.int64),
            "num_samples": torch.tensor(self.num_samples, dtype=torch.int64),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue at the saved cursor; another dataset or seed would change the order, so
        continuing would skip and repeat samples: refused, naming both."""
        seed, num_samples = int(state["seed"]), int(state["num_samples"])
        if (seed, num_samples) != (self.seed, self.num_samples):
            raise SamplerError(
                f"the checkpoint's samples are ordered by seed {seed} over {num_samples} "
                f"samples, this run's by seed {self.seed} over {self.num_samples}: resuming "
                "would skip and repeat samples"
            )
        self.cursor = int(state["cursor"])


def _permutation(n: int, seed: int, epoch: int) -> list[int]:
    """The same order on every rank and every run: torch's CPU generator is deterministic."""
    import torch

    mixed = ((seed & (2**_SEED_BITS - 1)) << _SEED_BITS) | (epoch & (2**_SEED_BITS - 1))
    generator = torch.Generator().manual_seed(mixed)
    return torch.randperm(n, generator=generator).tolist()
