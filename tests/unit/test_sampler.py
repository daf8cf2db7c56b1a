"""runtime.sampler: one global order, shares by DP rank, one cursor across layouts."""

from __future__ import annotations

import pytest

from runtime.sampler import GlobalSampler, SamplerError


def ranks(dp: int, **kw: int) -> list[GlobalSampler]:
    return [GlobalSampler(10, 4, dp_rank=r, dp_size=dp, seed=3, **kw) for r in range(dp)]


def step(samplers: list[GlobalSampler]) -> list[int]:
    return [i for s in samplers for i in s.next_indices()]


def test_the_ranks_shares_make_the_global_batch_whatever_the_dp() -> None:
    one, two, four = ranks(1), ranks(2), ranks(4)
    for _ in range(7):
        batch = step(one)
        assert step(two) == batch == step(four)
        assert len(batch) == 4


def test_every_epoch_takes_each_sample_once_in_a_new_order() -> None:
    (sampler,) = ranks(1)
    taken = [i for _ in range(10) for i in sampler.next_indices()]  # 40 = 4 epochs of 10
    epochs = [taken[e * 10 : (e + 1) * 10] for e in range(4)]
    assert all(sorted(e) == list(range(10)) for e in epochs)
    assert len({tuple(e) for e in epochs}) == 4
    assert sampler.epoch == 4


def test_without_shuffle_the_order_is_the_datasets() -> None:
    (sampler,) = ranks(1, shuffle=False)
    assert [sampler.next_indices() for _ in range(3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1]]


def test_a_loaded_cursor_continues_under_another_dp() -> None:
    straight = ranks(2)
    for _ in range(3):
        step(straight)
    state = straight[0].state_dict()
    resumed = ranks(4)
    for s in resumed:
        s.load_state_dict(state)
    assert step(resumed) == step(straight)


def test_iteration_ends_with_the_epoch() -> None:
    (sampler,) = ranks(1)
    assert len(sampler) == 3
    assert len(list(sampler)) == 3  # the third step reaches into the next epoch
    assert sampler.cursor == 12 and len(sampler) == 2


def test_another_seed_or_dataset_is_refused_by_name() -> None:
    saved = GlobalSampler(10, 4, dp_rank=0, dp_size=1, seed=4).state_dict()
    with pytest.raises(SamplerError, match="seed 4 over 10 samples, this run's by seed 3 over 10"):
        ranks(1)[0].load_state_dict(saved)


@pytest.mark.parametrize(
    ("batch", "dp", "rank", "said"),
    [
        (6, 4, 0, "global batch 6 does not split into DP 4 equal shares: make it a multiple of 4"),
        (2, 4, 0, "global batch 2 does not split into DP 4"),
        (4, 2, 2, "DP rank 2 is outside DP 2"),
    ],
)
def test_a_layout_that_cannot_share_is_said(batch: int, dp: int, rank: int, said: str) -> None:
    with pytest.raises(SamplerError, match=said):
        GlobalSampler(10, batch, dp_rank=rank, dp_size=dp)
