"""A preflight rank's world: torch's fake process group, and what torch needs to run on it.

Only a preflight's rank (:mod:`runtime.preflight`) joins one: ``init_process_group("fake")``
with a ``FakeStore`` makes a world of any size in one process, whose collectives return at once
without touching their tensors. Two parts of torch read what a collective brought and fail on
that, and a side group of another backend (runtime.checkpoint's gloo group for writing in the
background) cannot be made without real peers; each is made to go without, in this process
only.
"""

from __future__ import annotations

from typing import Any


def init_fake_group(rank: int, world: int) -> None:
    """Join a fake process group of ``world`` ranks as ``rank``: no store to meet at, no peer."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore  # registers "fake"

    dist.init_process_group("fake", rank=rank, world_size=world, store=FakeStore())
    _pipeline_votes_alone()
    _ddp_reduces_alone()
    _side_groups_fake(dist)


def _side_groups_fake(dist: Any) -> None:
    """``new_group(backend="gloo")`` would meet its peers through the world's store, which a
    fake world has none of: every group of a fake world is fake."""
    made = dist.new_group

    def new_group(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("backend") is not None:
            kwargs["backend"] = "fake"
        return made(*args, **kwargs)

    dist.new_group = new_group


def _ddp_reduces_alone() -> None:
    """DDP's reducer reads each bucket's all-reduce from the work's future, which a fake group
    leaves empty (the backward then fails inside torch). In a preflight every DDP's buckets
    are "reduced" to themselves, as a real group of identical replicas would; a hook the script
    registers is kept out, since its communication would be fake too."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    def reduced(_state, bucket):  # type: ignore[no-untyped-def]  # DDP checks annotations
        done = torch.futures.Future()
        done.set_result(bucket.buffer())
        return done

    built = DistributedDataParallel.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        built(self, *args, **kwargs)
        self.register_comm_hook(None, reduced)
        self.register_comm_hook = lambda *_args, **_kwargs: None

    DistributedDataParallel.__init__ = init  # type: ignore[method-assign]


def _pipeline_votes_alone() -> None:
    """torch's pipeline schedules (2.6+) agree on a static or dynamic shape inference by a vote
    passed from stage to stage; a fake group's receive brings zeros, so every stage would
    infer shapes dynamically by exchanging pickled metadata, which a fake group cannot carry.
    Here each stage decides from its own metadata, as the vote would on a real group when the
    script gives every stage its shapes (the demo does)."""
    try:
        from torch.distributed.pipelining import schedules
        from torch.distributed.pipelining._utils import InferenceMode
        from torch.distributed.pipelining.stage import PipelineStage
    except ImportError:  # a torch without pipelining, or with another warm-up
        return
    if not hasattr(schedules._PipelineSchedule, "_warmup_p2p"):
        return

    def warmup_alone(self: Any, stages: list[Any], has_backward: bool, p2p_done: bool) -> None:
        for stage in stages:
            if isinstance(stage, PipelineStage):
                dynamic = InferenceMode.needs_dynamic(stage._user_meta, has_backward)
                stage._inference_mode = InferenceMode.DYNAMIC if dynamic else InferenceMode.STATIC

    schedules._PipelineSchedule._warmup_p2p = warmup_alone
