"""Hardware FLOPs per token, for HFU: what torch's flop counter sees one training step execute.

Unlike the model FLOPs of :mod:`runtime.efficiency.flops`, recomputation (activation
checkpointing) and anything else the model's code does count too, so HFU >= MFU. Imported by
the rank that asks for it (it imports torch); pass the result to ``History(flops_per_token=)``
only when HFU is what the run should report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def hardware_flops_per_token(step: Callable[[], Any], tokens: int) -> float:
    """The FLOPs one call of ``step`` (a forward and backward over ``tokens`` tokens) executes,
    per token, as ``torch.utils.flop_counter`` counts them: the HFU numerator. Raises
    ``ValueError`` when the counter sees none (a model whose operations it cannot count)."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        step()
    total = counter.get_total_flops()
    if total <= 0:
        raise ValueError("torch's flop counter counted no FLOPs in the step")
    return total / tokens
