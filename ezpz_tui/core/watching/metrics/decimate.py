"""Min/max decimation: a million points cut to about two per cell of the plot, so plotext's cost
follows the plot's width, not the run's length, and spikes and NaNs stay visible."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import NDArray

    FloatArray = NDArray[np.float64]
    Array = NDArray[Any]


def _buckets(n: int, buckets: int) -> tuple[int, int]:
    """``(size, full)``: bucket size and how many full buckets; the rest is one short bucket."""
    size = -(-n // buckets)
    return size, n // size


def _reduce(values: Array, size: int, full: int, ufunc: Any) -> Array:
    """``ufunc.reduce`` over each bucket: the reshape trick on the full buckets, plus the tail."""
    head = ufunc.reduce(values[: full * size].reshape(full, size), axis=1)
    if full * size == len(values):
        return head
    return np.append(head, ufunc.reduce(values[full * size :]))


def _arg(values: Array, size: int, full: int, pick: Any) -> Array:
    """Index (into ``values``) of ``pick`` (argmin / argmax) of each bucket."""
    head = pick(values[: full * size].reshape(full, size), axis=1) + np.arange(0, full * size, size)
    if full * size == len(values):
        return head
    return np.append(head, full * size + pick(values[full * size :]))


def decimate(x: Array, y: Array, max_points: int) -> tuple[Array, Array]:
    """At most ``max_points`` of the points (x, y), chosen so that a line through them looks
    like the line through all of them at that resolution.

    The points are cut into equal buckets in order; each bucket keeps its lowest and its highest
    finite point, so spikes survive and the global min and max are kept. A bucket holding a
    NaN or an infinity also keeps its first such point: a loss that became NaN stays visible.
    (With non-finite values present the buckets are a third smaller to make room.) Points are
    returned in their original order; when there are few enough, the inputs come back as they
    are.
    """
    if max_points < 3:
        raise ValueError(f"max_points must be at least 3, not {max_points}")
    n = len(y)
    if n <= max_points:
        return x, y
    finite = np.isfinite(y)
    all_finite = bool(finite.all())
    size, full = _buckets(n, max_points // (2 if all_finite else 3))
    if all_finite:
        low, high = y, y
    else:
        low, high = np.where(finite, y, np.inf), np.where(finite, y, -np.inf)
    keep = [_arg(low, size, full, np.argmin), _arg(high, size, full, np.argmax)]
    if not all_finite:
        odd = ~finite
        has = _reduce(odd, size, full, np.logical_or)
        keep.append(_arg(odd, size, full, np.argmax)[has])
    index = np.unique(np.concatenate(keep))
    return x[index], y[index]


def envelope(
    x: Array, lo: FloatArray, hi: FloatArray, buckets: int
) -> tuple[Array, FloatArray, FloatArray]:
    """A band reduced to at most ``buckets`` slices: the lowest ``lo`` and the highest ``hi`` of
    each bucket (NaNs ignored), at the bucket's first x. A plot fills each slice from its low to
    its high end."""
    n = len(x)
    if n <= buckets:
        return x, lo, hi
    size, full = _buckets(n, buckets)
    with np.errstate(invalid="ignore"):  # an all-NaN bucket stays NaN, without a warning
        low = _reduce(lo, size, full, np.fmin)
        high = _reduce(hi, size, full, np.fmax)
    return x[::size], low, high
