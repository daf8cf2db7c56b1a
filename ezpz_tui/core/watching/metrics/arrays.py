"""The numpy pieces the store and its bands share: a column that grows in place, and the test
that tells a gap from a NaN the training really logged."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from runtime.record_columns import MISSING

if TYPE_CHECKING:
    from numpy.typing import NDArray

    FloatArray = NDArray[np.float64]
    Array = NDArray[Any]

_MISSING_BITS = int(np.array([MISSING]).view(np.int64)[0])
"""The bits of :data:`runtime.record_columns.MISSING`, the NaN stored where a record lacks a
metric (the follower's columns already hold it there): a quiet NaN with a payload that no
arithmetic and no JSON reader produces, so gaps can be dropped without dropping a real NaN."""


def is_missing(values: Array) -> Array:
    """Where ``values`` holds :data:`~runtime.record_columns.MISSING` (a real NaN is not)."""
    return values.view(np.int64) == _MISSING_BITS


class Column:
    """A growable 1-d numpy array: capacity doubles, so n appends cost O(n) copies in total."""

    __slots__ = ("data", "n")

    def __init__(self, dtype: type, fill: float | None = None, length: int = 0) -> None:
        self.data = np.empty(max(16, length), dtype=dtype)
        if length:
            self.data[:length] = fill
        self.n = length

    def extend(self, chunk: Array) -> None:
        need = self.n + len(chunk)
        if need > len(self.data):
            grown = np.empty(max(need, 2 * len(self.data)), dtype=self.data.dtype)
            grown[: self.n] = self.data[: self.n]
            self.data = grown
        self.data[self.n : need] = chunk
        self.n = need

    def view(self) -> Array:
        return self.data[: self.n]


class NonFinite(NamedTuple):
    """The non-finite values (NaN, ±inf) one rank logged for one metric: how many, and the
    first one (its step, timestamp and value) so a plot can mark where it started."""

    count: int
    step: int
    timestamp: float
    value: float


def noted_nonfinite(
    bad: NonFinite | None, chunk: FloatArray, missing: Array, steps: Array, times: FloatArray
) -> NonFinite | None:
    """``bad`` (a series' non-finite values so far) with those of ``chunk`` counted in; gaps
    (``missing``) are not values."""
    found = ~np.isfinite(chunk)
    if not found.any():
        return bad
    found &= ~missing
    count = int(found.sum())
    if not count:
        return bad
    if bad is not None:
        return bad._replace(count=bad.count + count)
    i = int(np.argmax(found))
    return NonFinite(count, int(steps[i]), float(times[i]), float(chunk[i]))
