"""A rank that raised and did not die: its log ends in an uncaught Python traceback while its
process lives on.

That happens when the interpreter cannot exit: MPI finalisation (mpi4py's atexit hook) waits for
a peer that waits for this rank, a non-daemon thread keeps running, a collective holds it. The
traceback is the whole story, yet the rank looks ``running`` and its peers hang until a timeout.
Readers (the rank list, the supervisor's fail-fast) look at the end of the log only: a traceback
that the program printed and went on from is followed by more lines, and is no reason to stop.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from ezpz_tui.core.runs.tail import read_tail
from ezpz_tui.core.runs.tracebacks import TRACEBACK, unprefixed
from runtime.rundir import RunDir

TAIL_BYTES = 16384  # a traceback deeper than this is cut to its end, which still says enough


def raised_exception(lines: Sequence[str]) -> str | None:
    """The exception line that closes ``lines`` when they end in a Python traceback (its header,
    indented frames, then the exception; torch.distributed's ``[rankN]: `` before each line
    once a process group exists); ``None`` when they end any other way."""
    lines = unprefixed(lines)
    end = len(lines)
    while end and not lines[end - 1].strip():
        end -= 1
    if not end:
        return None
    exception = lines[end - 1].rstrip()
    if exception[:1].isspace() or exception.startswith(TRACEBACK):
        return None
    at = end - 2
    while at >= 0 and lines[at][:1] in (" ", "\t"):
        at -= 1
    if at < 0 or at == end - 2 or not lines[at].strip().endswith(TRACEBACK):
        return None
    return exception.strip()


class RaisedWatch:
    """The supervisor's look at the ends of its running ranks' logs, sparing the filesystem:
    one ``stat`` per rank every :meth:`interval` seconds, and a read only of a log that grew.

    A rank whose log has ended in a traceback for ``grace_s`` seconds, with nothing after it,
    is reported once: its peers will wait for it forever.
    """

    def __init__(self, run: RunDir, grace_s: float) -> None:
        self.run = run
        self.grace_s = grace_s
        self._sizes: dict[int, int] = {}
        self._since: dict[int, tuple[float, str]] = {}
        self._next = 0.0

    @staticmethod
    def interval(ranks: int) -> float:
        """Every 2 s, or slower so a big job costs at most ~100 stats a second."""
        return max(2.0, ranks / 100)

    def look(self, ranks: Sequence[int], now: float) -> tuple[int, str] | None:
        """The rank (and its exception) whose traceback has stood longest past the grace."""
        if now < self._next:
            return None
        self._next = now + self.interval(len(ranks))
        for rank in ranks:
            path = self.run.log(rank)
            try:
                size = os.stat(path).st_size
            except OSError:
                continue
            if size == self._sizes.get(rank):
                continue
            self._sizes[rank] = size
            exception = raised_exception(read_tail(path, TAIL_BYTES).splitlines())
            if exception is None:
                self._since.pop(rank, None)
            else:
                self._since[rank] = (now, exception)
        live = set(ranks)
        ready = [
            (t, r, e) for r, (t, e) in self._since.items() if r in live and now - t >= self.grace_s
        ]
        if not ready:
            return None
        _, rank, exception = min(ready)
        return rank, exception
