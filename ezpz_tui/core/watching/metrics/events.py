"""Events on a curve, for the plot's ``]`` / ``[``: where a person looking at a loss curve wants
the cursor to go next.

Four kinds, each found with whole-array numpy passes so a million points cost tens of ms, once
per data change:

- a spike: a jump between two points beyond ``k`` robust standard deviations of the jumps in the
  recent window (1.4826 x the median absolute deviation of the previous ``window`` jumps, so one
  spike does not hide the next; a flat stretch has a small floor instead of a zero MAD);
- a non-finite value: where the curve turns NaN or infinite;
- a gap: steps missing between two points (a rank that skipped, or a resume further on);
- a relaunch boundary: where an overlaid parent run's curve ends.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from ezpz_tui.core.watching.metrics.store import nonfinite_word

if TYPE_CHECKING:
    from numpy.typing import NDArray

    Array = NDArray[Any]

WINDOW = 64
"""Jumps in the recent window a spike is measured against."""

K = 8.0
"""Robust standard deviations a jump must exceed to count as a spike: high, because a noisy
loss has heavy tails and a jump list full of ordinary noise is useless."""

MAD_SIGMA = 1.4826
"""The MAD of normal data times this is its standard deviation."""


class Event(NamedTuple):
    """One event: the index of its point on the curve, its kind, and the words the readout
    shows (``spike +1.83 (12σ)``)."""

    index: int
    kind: str
    text: str


def _medians(grid: Array, finite: bool) -> Array:
    """The median of each row, NaNs left out (an all-NaN row gives NaN, and flags nothing).
    ``finite``: only the last row (padded) can hold NaN, so the others take the fast median."""
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if not finite:
            return np.nanmedian(grid, axis=1)
        return np.append(np.median(grid[:-1], axis=1), np.nanmedian(grid[-1]))


def _spikes(y: Array, window: int, k: float) -> list[Event]:
    jumps = np.diff(y)
    n = len(jumps)
    if n < 4:
        return []
    blocks = -(-n // window)
    padded = np.full(blocks * window, np.nan)
    padded[:n] = jumps
    grid = padded.reshape(blocks, window)
    finite = bool(np.isfinite(jumps).all())
    centre = _medians(grid, finite)
    spread = MAD_SIGMA * _medians(np.abs(grid - centre[:, None]), finite)
    # Each block is judged by the block before it (the recent past); the first by itself.
    centre = np.concatenate([centre[:1], centre[:-1]])
    spread = np.concatenate([spread[:1], spread[:-1]])
    scale = np.nanmedian(np.abs(y[np.isfinite(y)])) if np.isfinite(y).any() else 1.0
    floor = max(1e-12, 1e-6 * float(scale))
    spread = np.where(np.isfinite(spread), np.maximum(spread, floor), np.inf)
    sigmas = np.abs(padded - np.repeat(centre, window)) / np.repeat(spread, window)
    with np.errstate(invalid="ignore"):
        flagged = np.flatnonzero(sigmas[:n] > k)
    events = []
    last = -10
    for i in flagged.tolist():
        if i > last + 2:  # the jump back down after a spike is the same event
            events.append(Event(i + 1, "spike", f"spike {jumps[i]:+.4g} ({sigmas[i]:.0f}σ)"))
        last = i
    return events


def _nonfinite(y: Array) -> list[Event]:
    bad = ~np.isfinite(y)
    starts = np.flatnonzero(bad & ~np.concatenate([[False], bad[:-1]]))
    return [Event(i, "nonfinite", nonfinite_word(float(y[i]))) for i in starts.tolist()]


def _gaps(steps: Array) -> list[Event]:
    jumps = np.diff(steps)
    return [
        Event(i + 1, "gap", f"gap: {int(jumps[i]) - 1} steps missing after step {int(steps[i])}")
        for i in np.flatnonzero(jumps > 1).tolist()
    ]


def _boundaries(steps: Array, parents: Mapping[str, int]) -> list[Event]:
    events = []
    for name, last in parents.items():
        i = int(np.searchsorted(steps, last, side="right"))
        if len(steps):
            text = f"relaunch: {name} ended at step {last}"
            events.append(Event(min(i, len(steps) - 1), "relaunch", text))
    return events


def find_events(
    steps: Array,
    y: Array,
    parents: Mapping[str, int] | None = None,
    window: int = WINDOW,
    k: float = K,
) -> list[Event]:
    """The events of the curve ``y`` over ``steps`` (one value per step, in step order), sorted
    by index; ``parents``: overlaid runs by name with the last step each logged."""
    steps = np.asarray(steps)
    y = np.asarray(y, dtype=np.float64)
    events = _spikes(y, window, k) + _nonfinite(y) + _gaps(steps)
    events += _boundaries(steps, parents or {})
    return sorted(events)


def next_event(events: Sequence[Event], index: int, step: int) -> Event | None:
    """The first event after point ``index`` (``step`` 1) or the last before it (-1); None
    when there is none that way."""
    if step > 0:
        return next((e for e in events if e.index > index), None)
    return next((e for e in reversed(events) if e.index < index), None)
