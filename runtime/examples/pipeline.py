"""One training step's forward and backward, whole or as a pipeline over the PP group.

With PP > 1 each rank runs one stage under torch's 1F1B schedule: the batch is cut into
microbatches, the first stage embeds, the last one applies the head and the loss, and hidden
states and their gradients travel between neighbours point to point. Each microbatch's loss is
divided by their number, so the gradients add up to those of the whole batch. The schedule can
scale the gradients afterwards instead, but it scales the stage module's parameters of the
moment, and DDP over TP replaces those on every forward: the parameters the optimizer holds
kept the sum (a 2.3x gradient norm at pp2 x tp2 x dp2).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from runtime.dist import DistInfo

StepFn = Callable[[torch.Tensor, torch.Tensor], "torch.Tensor | None"]
"""Runs forward and backward on (inputs, targets); the loss where this rank computes it."""


def stage_layers(layers: int, stage: int, stages: int) -> range:
    """The blocks a stage holds: an even split, earlier stages taking one more when uneven."""
    base, extra = divmod(layers, stages)
    start = stage * base + min(stage, extra)
    return range(start, start + base + (1 if stage < extra else 0))


def loss_fn(vocab: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    def loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float().reshape(-1, vocab), targets.reshape(-1))

    return loss


def whole_step(model: nn.Module, vocab: int, autocast: Any) -> StepFn:
    compute_loss = loss_fn(vocab)

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with autocast():
            logits = model(x)
        loss = compute_loss(logits, y)
        loss.backward()
        return loss.detach()

    return step


def pipeline_step(
    model: nn.Module,
    info: DistInfo,
    *,
    microbatches: int,
    local_shape: tuple[int, int],
    dim: int,
    vocab: int,
    hidden_dtype: torch.dtype,
    logits_dtype: torch.dtype,
    autocast: Any,
) -> StepFn:
    """A 1F1B schedule around this rank's stage.

    The stage's input and output shapes are given up front (static mode): torch would otherwise
    infer them from the first microbatch with an extra exchange of metadata between stages,
    which gains nothing when every step has the same shape. Hidden states are marked as
    requiring grad: that is what makes a stage send its input's gradient back to the one
    before it (without it the first stage's backward got no gradient and failed).
    """
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B

    stage_index, stages = info.coord("pp"), info.size("pp")
    rows, columns = local_shape
    mb = rows // microbatches
    meta = torch.device("meta")
    if stage_index == 0:
        inputs = torch.empty(mb, columns, dtype=torch.long, device=meta)
    else:
        inputs = torch.empty(mb, columns, dim, dtype=hidden_dtype, device=meta, requires_grad=True)
    out_width, out_dtype = (
        (vocab, logits_dtype) if stage_index == stages - 1 else (dim, hidden_dtype)
    )
    outputs = torch.empty(mb, columns, out_width, dtype=out_dtype, device=meta, requires_grad=True)
    stage = PipelineStage(
        model,
        stage_index,
        stages,
        info.device,
        input_args=inputs,
        output_args=outputs,
        group=info.group("pp"),
    )
    mean_loss = loss_fn(vocab)

    def microbatch_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return mean_loss(logits, targets) / microbatches

    schedule = Schedule1F1B(stage, microbatches, loss_fn=microbatch_loss, scale_grads=False)

    def step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor | None:
        losses: list[torch.Tensor] = []
        args = (x,) if stage.is_first else ()
        kwargs = {"target": y, "losses": losses} if stage.is_last else {}
        with autocast():
            schedule.step(*args, **kwargs)
        return torch.stack(losses).sum().detach() if losses else None

    return step


def autocast_for(device: torch.device, dtype: torch.dtype, enabled: bool) -> Any:
    """A factory of autocast contexts, or of null ones when the step runs in its own dtype."""
    if not enabled:
        return contextlib.nullcontext
    return lambda: torch.autocast(device.type, dtype=dtype)
