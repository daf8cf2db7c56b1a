"""The demo's layout arithmetic, without ranks: stages, microbatches, refusals, the CP mask."""

from __future__ import annotations

import pytest
import torch

from runtime.dist import DistInfo
from runtime.examples.context import ContextShard
from runtime.examples.pipeline import stage_layers
from runtime.examples.schedule import default_microbatches
from runtime.examples.train import data_slice, parse_args, resolve_layout


def _info(tp: int = 1, pp: int = 1, cp: int = 1, dp: int = 1) -> DistInfo:
    world = tp * pp * cp * dp
    sizes = {"tp": tp, "pp": pp, "cp": cp, "dp": dp}
    return DistInfo(0, 0, world, world, 0, "test", torch.device("cpu"), None, sizes)


@pytest.mark.parametrize(("layers", "stages"), [(2, 2), (5, 2), (4, 3), (7, 7)])
def test_stages_cover_every_layer_once_in_order(layers: int, stages: int) -> None:
    parts = [stage_layers(layers, s, stages) for s in range(stages)]
    assert [i for part in parts for i in part] == list(range(layers))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert len(parts[0]) >= len(parts[-1])  # the first stage, which also embeds, is not smaller


def test_default_microbatches_divide_the_replica_batch() -> None:
    assert default_microbatches(2, 8) == 4
    assert default_microbatches(4, 8) == 8
    assert default_microbatches(3, 8) == 4
    assert default_microbatches(3, 7) is None


def test_defaults_follow_the_sizes() -> None:
    args = parse_args([])
    assert resolve_layout(args, _info(pp=4, dp=2)) is None
    assert (args.layers, args.global_batch, args.microbatches) == (4, 16, 8)
    args = parse_args(["--global-batch", "8"])
    assert resolve_layout(args, _info(cp=2, dp=2)) is None
    assert data_slice(args, _info(cp=2, dp=2)) == (slice(0, 4), slice(0, 32))
    args = parse_args([])
    assert resolve_layout(args, _info(tp=2, cp=2)) is None
    assert (args.heads, args.dim, args.seq_len) == (4, 64, 64)  # the classic model where it fits
    args = parse_args([])
    assert resolve_layout(args, _info(tp=3, cp=3)) is None
    assert (args.heads, args.dim, args.seq_len) == (6, 96, 66)


@pytest.mark.parametrize(
    ("argv", "sizes", "message"),
    [
        (["--heads", "3"], {"tp": 2}, "--heads 3 must be divisible by tp=2"),
        (["--dim", "30"], {}, "--dim 30 must be divisible by --heads 4"),
        (["--seq-len", "15"], {"cp": 2}, "--seq-len 15 must be divisible by cp=2"),
        (
            ["--global-batch", "6"],
            {"dp": 4},
            "--global-batch 6 must be a positive multiple of dp=4",
        ),
        (["--layers", "1"], {"pp": 2}, "--layers 1 must be at least pp=2, one per stage"),
        (["--microbatches", "3"], {"pp": 2}, "--microbatches 3 must be at least pp=2 and divide"),
        (["--batch-size", "7"], {"pp": 3}, "no microbatch count from pp=3 to 6 divides"),
    ],
)
def test_bad_layouts_get_one_line(argv: list[str], sizes: dict[str, int], message: str) -> None:
    problem = resolve_layout(parse_args(argv), _info(**sizes))
    assert problem is not None and problem.startswith(message) and "\n" not in problem


def test_causal_mask_is_offset_by_the_chunk() -> None:
    shard = ContextShard(group=None, rank=1, size=2, seq_len=4)
    assert (shard.offset, shard.columns()) == (2, slice(2, 4))
    mask = shard.causal_mask(queries=2, keys=4, device=torch.device("cpu"))
    assert mask.tolist() == [[True, True, True, False], [True, True, True, True]]
