"""Exact exponential smoothing (TensorBoard's), vectorised: a blocked scan in numpy instead of a
Python loop over a million points (scipy is not a dependency)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

    FloatArray = NDArray[np.float64]
    Array = NDArray[Any]


def _linear_scan(b: FloatArray, a: float, before: float, scale: float = 1.0) -> FloatArray:
    """``out[t] = a * out[t-1] + scale * b[t]`` with ``out[-1] = before``, for 0 <= a < 1, in
    numpy.

    The series is cut into blocks short enough that ``a ** -block <= 1e8`` (so the scaled sums
    neither overflow nor lose precision). Inside block i, ``out[i, j] = a**j * (a * e[i] +
    cumsum(b[i] * a**-j)[j])`` where ``e[i]`` is the state entering the block; those states obey
    the same recurrence with ``a ** block`` over the blocks' sums, solved by the same function
    on a series ``block`` times shorter. One buffer, five passes over the data.
    """
    n = len(b)
    if a < 1e-12:  # the carried state is below float precision after one step
        out = b * scale
        if n:
            out[0] += a * before
        return out
    if n <= 64:
        out = np.empty(n)
        state = before
        for t in range(n):
            state = a * state + scale * b[t]
            out[t] = state
        return out
    block = max(2, min(n, int(8.0 / -math.log10(a))))
    rows = -(-n // block)
    j = np.arange(block)
    work = np.zeros((rows, block))
    np.multiply(b, scale, out=work.reshape(-1)[:n])
    work *= a ** (-j)
    ends = work.sum(axis=1) * a ** (block - 1)  # each block's own contribution to its last value
    entering = np.empty(rows)
    entering[0] = before
    entering[1:] = _linear_scan(ends[:-1], a**block, before)
    work[:, 0] += a * entering
    np.cumsum(work, axis=1, out=work)
    work *= a**j
    return work.reshape(-1)[:n]


def ema(y: Array, alpha: float) -> FloatArray:
    """Exponential moving average, ``s[t] = alpha * s[t-1] + (1 - alpha) * y[t]`` from
    ``s[0] = y[0]`` (TensorBoard's smoothing weight: 0 is off, 0.99 is very smooth).

    Exact and vectorised: under 10 ms for a million points, where a Python loop takes 350 ms.
    A NaN or infinity does not poison what follows: the average carries on over the last
    finite value and the non-finite point stays non-finite in the output, so it remains
    visible after smoothing.
    """
    if not 0.0 <= alpha < 1.0:
        raise ValueError(f"alpha must be in [0, 1), not {alpha}")
    values = np.asarray(y, dtype=np.float64)
    if alpha == 0.0 or len(values) == 0:
        return values.copy()
    finite = np.isfinite(values)
    if finite.all():
        return _linear_scan(values, alpha, values[0], 1.0 - alpha)
    if not finite.any():
        return values.copy()
    last = np.where(finite, np.arange(len(values)), -1)
    np.maximum.accumulate(last, out=last)
    last[last < 0] = int(np.argmax(finite))  # before the first finite value: use that one
    filled = values[last]
    out = _linear_scan(filled, alpha, filled[0], 1.0 - alpha)
    out[~finite] = values[~finite]
    return out
