"""Which followed files to look at in this poll, within a budget of filesystem calls a second.

Following a 4,096-rank run by stat'ing every file four times a second made ~9,800 metadata
calls a second on a run that had already ended (docs/pitfalls.md): on Lustre that load falls
on every user of the machine. Here each file has its own interval instead: looked at every poll
while it grows, twice as seldom each time it has not changed, up to ``slowest`` seconds. The
files due are taken oldest-due first while the budget lasts (a token bucket refilled at
``per_second``); the caller charges what a look really cost (a grown file costs an open and a
read besides the stat). ``hot`` files (the rank on screen) are looked at every poll, first.

The budget yields to one promise: every file is looked at within ``slowest`` seconds (or a
multiple of it, for files that matter less). When there are more files than that allows, the
refill rate grows to what the promise needs (``files / slowest``).

UI-free and filesystem-free, so a test drives it with a clock.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

FASTEST_S = 0.25  # the interval of a file that just grew
BURST_S = 0.5  # how much unspent budget may be saved up, in seconds of refill


@dataclass
class _Entry:
    interval: float
    due: float
    slowest: float


class PollSchedule(Generic[K]):
    """Files (any hashable keys) with the time each is next due.

    ``per_second`` None means no budget: every file every poll, as a test or a small local run
    wants."""

    def __init__(
        self, per_second: float | None, slowest: float, fastest: float = FASTEST_S
    ) -> None:
        self.per_second = per_second
        self.slowest = max(slowest, fastest)
        self.fastest = fastest
        self.hot: frozenset[K] = frozenset()
        self._entries: dict[K, _Entry] = {}
        self._heap: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._tokens = 0.0
        self._refilled: float | None = None
        self._need = 0.0  # looks a second that the entries' ``slowest`` promises need

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    @property
    def rate(self) -> float:
        """The refill rate now: the budget, or what ``slowest`` needs when that is more."""
        if self.per_second is None:
            return float("inf")
        return max(self.per_second, self._need)

    def add(self, key: K, now: float, slower: float = 1.0) -> None:
        """Follow ``key`` from now on, due at once; looked at within ``slower`` times
        ``slowest`` (what matters less: telemetry for sparklines, status files whose rewrites
        a folder listing shows anyway)."""
        if key not in self._entries:
            entry = _Entry(self.fastest, now, self.slowest * slower)
            self._entries[key] = entry
            self._need += 1 / entry.slowest
            heapq.heappush(self._heap, (now, next(self._seq), key))

    def remove(self, key: K) -> None:
        """Never look at ``key`` again (its rank ended and it was read to its end)."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._need -= 1 / entry.slowest

    def due(self, now: float) -> list[K]:
        """The keys to look at now: the hot ones, then those due, oldest first, while the
        budget lasts. Each taken key is charged one call (its stat)."""
        if self.per_second is None:
            return list(self._entries)
        if self._refilled is not None:
            # Saved up: half a second's worth, or all of a long gap between polls (a busy UI
            # slows the polls; the files must still be looked at within ``slowest``).
            rate, gap = self.rate, now - self._refilled
            self._tokens = min(rate * max(BURST_S, gap), self._tokens + rate * gap)
        self._refilled = now
        taken = [key for key in self.hot if key in self._entries]
        self._tokens -= len(taken)
        heap = self._heap
        while heap and heap[0][0] <= now and self._tokens >= 1:
            when, _, key = heapq.heappop(heap)
            entry = self._entries.get(key)
            if entry is None or entry.due != when or key in self.hot:
                continue  # removed, rescheduled since, or already taken as hot
            taken.append(key)
            self._tokens -= 1
        return taken

    def spend(self, calls: int) -> None:
        """Charge calls a poll made beyond the one per key that :meth:`due` charged."""
        if self.per_second is not None:
            self._tokens -= calls

    def checked(self, key: K, now: float, changed: bool) -> None:
        """``key`` was looked at: due again soon when it changed, later when it did not."""
        entry = self._entries.get(key)
        if entry is None:
            return
        if changed:
            entry.interval = self.fastest
        else:
            entry.interval = min(entry.slowest, entry.interval * 2)
        entry.due = now + entry.interval
        if self.per_second is not None:
            heapq.heappush(self._heap, (entry.due, next(self._seq), key))

    def set_hot(self, keys: Iterable[K]) -> None:
        self.hot = frozenset(keys)
