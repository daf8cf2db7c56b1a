"""The runs list, read again only where it can have changed: what the TUI looks at every 2 s.

Listing an outputs directory costs a stat of every run's ``state.json`` (more for a run without
one), and on a shared filesystem each is a metadata round trip; an outputs directory holds
hundreds of runs. A look costs a stat of the outputs directory, of its ``.batch`` folder and of
each folder the last listing found no run in (a run made, removed or renamed changes one of
them: its mtime or inode), and reads again only the rows whose state can change without that:
a run that has not ended (pending, running, ``lost``, an ezpz run whose files may still
change). A run of ours that has ended is not looked at again: its ``state.json`` is never
rewritten once final (every writer checks that the run is still live first). While a batch job
is queued, every look lists in full, as before (the scheduler is asked at most every 15 s).

An mtime within :data:`SETTLING_S` of now does not tell a change from none (a filesystem whose
mtimes tick in seconds can change a folder twice within one tick, git's "racy" entries): such a
folder is listed in full at the next look too.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ezpz_tui.core.runs.outputs import batch_dir
from ezpz_tui.core.runs.queued import JobStates, job_states, with_queued
from ezpz_tui.core.runs.store import RunStore, RunSummary
from runtime.rundir import FINAL

SETTLING_S = 2.0
_RACY = (-1, -1)  # a mark never equal to a stat's


def mark(folder: Path) -> tuple[int, int] | None:
    """The identity of ``folder`` as it is now (inode, mtime); None where it is not there."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    if time.time() - st.st_mtime < SETTLING_S:
        return _RACY
    return (st.st_ino, st.st_mtime_ns)


def unchanged(before: tuple[int, int] | None, now: tuple[int, int] | None) -> bool:
    """Whether two marks of a path say it has not changed between them."""
    return before == now and before != _RACY


def settled(run: RunSummary) -> bool:
    """Whether ``run``'s line changes only with a change in its folder: ours, ended."""
    return not run.queued and run.state in FINAL


class OutputsWatch:
    """The runs of one outputs directory, as :func:`~ezpz_tui.core.runs.queued.listed_runs`
    lists them, for a caller that asks again and again."""

    def __init__(self, store: RunStore, ask: JobStates = job_states) -> None:
        self.store = store
        self.ask = ask
        self._marks: dict[Path, tuple[int, int] | None] = {}
        self._runs: list[RunSummary] | None = None

    @property
    def runs(self) -> list[RunSummary]:
        """The list as last returned (empty before the first look)."""
        return self._runs or []

    def look(self, whole: bool = False) -> list[RunSummary] | None:
        """The runs list where it may differ from the one last returned (``whole``: listed in
        full, and returned whatever it holds); None when nothing it shows can have changed."""
        runs = self._runs
        if whole or runs is None:
            return self._list()
        if any(r.queued for r in runs) or any(
            not unchanged(m, mark(p)) for p, m in self._marks.items()
        ):
            return self._list(only_changed=True)
        try:
            again = [r if settled(r) else self.store.summary(r.path) for r in runs]
        except OSError:  # a run's folder went meanwhile: the outputs directory changed too
            return self._list(only_changed=True)
        if again == runs:
            return None
        self._runs = again
        return again

    def _list(self, only_changed: bool = False) -> list[RunSummary] | None:
        outputs = self.store.outputs
        marks = {outputs: mark(outputs), batch_dir(outputs): mark(batch_dir(outputs))}
        found, others = self.store.scan()
        marks.update((p, mark(p)) for p in others)
        runs = with_queued(outputs, found, self.ask)
        self._marks = marks
        if only_changed and runs == self._runs:
            return None
        self._runs = runs
        return runs
