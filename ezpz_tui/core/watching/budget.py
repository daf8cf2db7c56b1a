"""Which followed files to look at in this poll, within a budget of filesystem calls a second.

Following a 4,096-rank run by stat'ing every file four times a second made ~9,800 metadata
calls a second on a run that had already ended (docs/pitfalls.md): on Lustre that load falls
on every user of the machine. Here each file has its own interval instead: looked at every poll
while it grows, twice as seldom each time it has not changed, up to its ceiling: what half the
budget affords for looking at every file (``files / (per_second / 2)`` seconds, so a 2-rank run
looks at each file every ``fastest`` seconds and a 16,384-rank one backs off to ``slowest``). A
quiet file must not back off further than the budget needs: a rank whose log stays empty while
its node is loaded, then writes, would wait up to ``slowest`` while its peers' lines are shown
(issue 38). The files due are taken oldest-due first while the budget lasts (a token bucket
refilled at ``per_second``); the caller charges what a look really cost (a grown file costs an
open and a read besides the stat). ``hot`` files (the rank on screen) are looked at every poll,
first, and leave the hot set due within ``fastest``.

The budget yields to two promises: every file is looked at within ``slowest`` seconds (or a
multiple of it, for files that matter less), and the oldest due file, once overdue by its
ceiling, is looked at even when the hot files spent the budget (so none waits behind them for
more than the longest ceiling). When there are more files than ``slowest``
allows, the refill rate grows to what the promise needs (``files / slowest``).

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
QUIET_SHARE = 0.5  # the share of the budget that looks at files that did not change may take


@dataclass
class _Entry:
    interval: float
    due: float
    slowest: float
    slower: float


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
            entry = _Entry(self.fastest, now, self.slowest * slower, slower)
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
        while heap and heap[0][0] <= now:
            when, _, key = heap[0]
            entry = self._entries.get(key)
            if entry is None or entry.due != when or key in self.hot:
                heapq.heappop(heap)  # removed, rescheduled since, or already taken as hot
                continue
            if self._tokens < 1 and now - when < self._ceiling(entry):
                break  # the budget is spent, and the oldest due has not waited too long
            heapq.heappop(heap)
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
        if changed or key in self.hot:  # a hot key is due soon once it is no longer hot
            entry.interval = self.fastest
        else:
            entry.interval = min(self._ceiling(entry), entry.interval * 2)
        entry.due = now + entry.interval
        if self.per_second is not None:
            heapq.heappush(self._heap, (entry.due, next(self._seq), key))

    def _ceiling(self, entry: _Entry) -> float:
        """The longest interval of ``entry``: as often as :data:`QUIET_SHARE` of the budget
        affords looking at every file (times its ``slower``), never beyond its ``slowest``."""
        if self.per_second is None:
            return entry.slowest
        every = len(self._entries) / (self.rate * QUIET_SHARE)
        return min(entry.slowest, max(self.fastest, every) * entry.slower)

    def set_hot(self, keys: Iterable[K]) -> None:
        self.hot = frozenset(keys)
