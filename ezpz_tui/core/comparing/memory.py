"""The demo's model, fixed for a tune, and what one rank of a layout needs to hold it.

A tune compares layouts of one model at one global batch, so the demo's sizes that would
otherwise follow the layout (layers = max(2, pp), heads a multiple of tp, sequence a multiple of
cp, the batch per replica) are fixed once for every layout it tries (:func:`demo_model`), and a
layout they do not divide is pruned with the reason, as the demo would refuse it.

The estimate (:func:`estimate`) is the worst rank's, in float32 under DDP and AdamW: parameters
(4 bytes each), gradients (4, plus 4 for DDP's buckets), optimizer state (8: Adam's two moments),
and activations: per layer and token about 34 x dim floats outside attention (split by TP) plus
5 x heads x the key length for the attention scores (Korthikanti et al., 2022, in fp32), the
logits on the last stage, and under 1F1B up to pp microbatches in flight on the first stage.
It is an estimate, made to rank layouts and to prune those far over a limit, not to the byte.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass

from ezpz_tui.core.launching.plan import DEMO_MODULE
from runtime.efficiency.flops import demo_params
from runtime.examples.schedule import default_microbatches

GIB = 2**30
FLOAT = 4  # bytes


@dataclass(frozen=True)
class DemoModel:
    """The demo's sizes, the same for every layout of a tune."""

    vocab: int
    dim: int
    heads: int
    layers: int
    seq_len: int
    global_batch: int

    def args(self) -> tuple[str, ...]:
        """The demo's options that fix these sizes."""
        return (
            *("--vocab", str(self.vocab), "--dim", str(self.dim), "--heads", str(self.heads)),
            *("--layers", str(self.layers), "--seq-len", str(self.seq_len)),
            *("--global-batch", str(self.global_batch)),
        )


def demo_model(
    tps: Sequence[int], pps: Sequence[int], cps: Sequence[int], global_batch: int
) -> DemoModel:
    """The demo's default model made to fit every size tried: layers for the largest pp,
    heads a multiple of every tp, the sequence a multiple of every cp."""
    heads = math.lcm(4, *tps)
    seq = math.lcm(64, *cps)
    return DemoModel(128, 16 * heads, heads, max(2, *pps), seq, global_batch)


def demo_problem(model: DemoModel, tp: int, pp: int, cp: int, dp: int) -> str | None:
    """Why the demo would refuse this layout of ``model`` (its own checks), or None."""
    if model.global_batch % dp:
        return f"global batch {model.global_batch} is not a multiple of dp={dp}"
    if model.heads % tp:
        return f"{model.heads} heads do not split over tp={tp}"
    if model.seq_len % cp:
        return f"sequence {model.seq_len} does not split over cp={cp}"
    if model.layers < pp:
        return f"{model.layers} layers are fewer than pp={pp} stages"
    if pp > 1 and default_microbatches(pp, model.global_batch // dp) is None:
        return f"no microbatch count from {pp} to {2 * pp} divides the replica's batch"
    return None


@dataclass(frozen=True)
class MemoryEstimate:
    """One rank's bytes (the worst rank of the layout), by what they hold."""

    params: float
    grads: float
    optimizer: float
    activations: float

    @property
    def total(self) -> float:
        return self.params + self.grads + self.optimizer + self.activations

    @property
    def total_gb(self) -> float:
        return self.total / GIB

    def as_dict(self) -> dict[str, float]:
        parts = ("params", "grads", "optimizer", "activations")
        return {f"{k}_gb": getattr(self, k) / GIB for k in parts} | {"total_gb": self.total_gb}


def estimate(model: DemoModel, tp: int, pp: int, cp: int, dp: int) -> MemoryEstimate:
    """The worst rank's memory for ``model`` laid out as tp x pp x cp x dp (see above)."""
    d, v, t = model.dim, model.vocab, model.seq_len
    per_layer = (demo_params(v, d, model.layers) - 2 * d - d * v) / model.layers
    layers = math.ceil(model.layers / pp)
    embedding = v * d + t * d  # on the first stage
    head = d * v + 2 * d  # on the last
    params = layers * per_layer / tp + max(embedding, head if pp > 1 else embedding + head)
    local_batch = model.global_batch // dp
    tokens = local_batch * t // cp
    in_flight = 1.0
    if pp > 1:
        micro = default_microbatches(pp, local_batch) or pp
        in_flight = min(pp, micro) / micro  # the share of the replica's batch held at once
    attention = 5 * (model.heads / tp) * t  # scores against every key (CP gathers them)
    per_token = layers * (34 * d / tp + attention) * FLOAT
    logits = tokens * v * FLOAT * 2  # the logits and their gradient, on the last stage
    activations = tokens * in_flight * per_token + logits
    return MemoryEstimate(
        params=params * FLOAT,
        grads=params * FLOAT * 2,
        optimizer=params * FLOAT * 2,
        activations=activations,
    )


def demo_estimate(
    command: Sequence[str], tp: int, pp: int, cp: int, dp: int
) -> MemoryEstimate | None:
    """The estimate for the model the demo run by ``command`` builds under these sizes (a
    relaunch's preflight sets it beside what it measured); None for another command, one
    whose options cannot be read, or sizes the demo refuses."""
    model = _demo_model_of(command, tp, pp, cp, dp)
    return None if model is None else estimate(model, tp, pp, cp, dp)


def _demo_model_of(command: Sequence[str], tp: int, pp: int, cp: int, dp: int) -> DemoModel | None:
    """The demo's model, its defaults filled in as the demo fills them (``runtime.examples.
    train.resolve_layout``, which imports torch)."""
    if list(command[1:3]) != ["-m", DEMO_MODULE]:
        return None
    p = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    for name in ("vocab", "dim", "heads", "layers", "seq-len", "global-batch", "batch-size"):
        p.add_argument(f"--{name}", type=int)
    try:
        args, _ = p.parse_known_args(list(command[3:]))
    except (argparse.ArgumentError, SystemExit):
        return None
    heads = args.heads or tp * math.ceil(4 / tp)
    model = DemoModel(
        vocab=args.vocab or 128,
        dim=args.dim or 16 * heads,
        heads=heads,
        layers=args.layers or max(2, pp),
        seq_len=args.seq_len or cp * math.ceil(64 / cp),
        global_batch=args.global_batch or (args.batch_size or 8) * dp,
    )
    if model.dim % model.heads or demo_problem(model, tp, pp, cp, dp):
        return None
    return model
