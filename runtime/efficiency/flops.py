"""Model FLOPs per token, counted as torchtitan and nanoGPT count them (the MFU numerator).

Model FLOPs (for MFU) are ``6 N + 12 L H Q T``: a forward and backward pass cost six FLOPs per
parameter per token (two forward, four backward), ``N`` without the embedding tables (a lookup,
not a matmul), and attention's score and value matmuls add ``12 L H Q T`` per token (``L``
layers, ``H`` heads of width ``Q``, ``T`` tokens of context). The count depends only on the
model, never on how it is split, so MFU is the same for every layout at the same tokens/s.

Hardware FLOPs (for HFU) are counted by :mod:`runtime.efficiency.hardware`, apart: this module
is standard library only, so the readers import it without torch.
"""

from __future__ import annotations

FLOPS_PER_TOKEN = "flops_per_token"
"""The metric a run's first record carries its model FLOPs per token as (``History``)."""
HARDWARE_FLOPS_PER_TOKEN = "hardware_flops_per_token"
"""The metric it carries the hardware FLOPs per token as, where the script counted them
(:func:`runtime.efficiency.hardware.hardware_flops_per_token`): the HFU numerator."""


def transformer_flops_per_token(
    params: int, layers: int, heads: int, head_dim: int, seq_len: int
) -> float:
    """``6 N + 12 L H Q T`` for a decoder of ``params`` non-embedding parameters."""
    return 6.0 * params + 12.0 * layers * heads * head_dim * seq_len


def demo_params(vocab: int, dim: int, layers: int) -> int:
    """The demo's (:class:`runtime.examples.model.TinyLM`) parameters without its token and
    position embeddings: per block two LayerNorms, four bias-free attention projections and a
    4x MLP with biases; then the final LayerNorm and the bias-free head."""
    block = 2 * (2 * dim) + 4 * dim * dim + (dim * 4 * dim + 4 * dim) + (4 * dim * dim + dim)
    return layers * block + 2 * dim + dim * vocab


def demo_flops_per_token(vocab: int, dim: int, heads: int, layers: int, seq_len: int) -> float:
    """The demo model's FLOPs per token from its sizes: the whole model, whatever the layout."""
    return transformer_flops_per_token(
        demo_params(vocab, dim, layers), layers, heads, dim // heads, seq_len
    )
