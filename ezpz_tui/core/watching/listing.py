"""A run's files found by listing its folders, never by a ``stat`` per file.

One listing of ``status/`` answers for every rank at once: status files are rewritten whole
through a rename (:func:`runtime.atomic.write_atomic`), so a rewritten one has a new inode, and
the inode comes with the listing. A folder is listed again only when its own ``stat`` says it
changed (a file was added, removed or renamed into it), or while its last change is so recent
that a second one within the clock's granularity could hide behind it, or when asked (``force``).

A rank folder holds blocks of 1,024 ranks (``logs/b0124/``; a run made before holds its files in
the folder itself), and a file added to a block changes the block, not the folder: each block
is looked at by its own ``stat``. A block that changed is looked at again at the next look; one
that did not, twice as seldom each time, up to what :data:`BLOCK_SHARE` of the ``[follow]``
budget affords for every block (at 127,488 ranks: 125 blocks of ``status/``, a few of the
others); a block of logs, metrics or telemetry that holds every rank it can is never looked at
again (a file, once found, is followed by itself). A local write wakes its block at once
(:meth:`RunListing.wake`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from ezpz_tui.core.runs.ezpz_layout import ezpz_logs
from ezpz_tui.core.watching import fscalls
from runtime.rundir import (
    EZPZ_HISTORY_FILE,
    EZPZ_METRICS_FILE,
    EZPZ_SHARED_METRICS,
    JSONL_FILE,
    LAUNCHER_LOG,
    LOG_FILE,
    RANK_FOLDERS,
    RUN_TOML,
    STATE_JSON,
    STATUS_FILE,
    RunDir,
    block_span,
    is_block,
)

LOG, METRICS, TELEMETRY = "log", "metrics", "telemetry"
RECENT_S = 2.0  # a folder changed this recently is listed again: mtimes are coarse
BLOCK_SHARE = 0.1  # the share of the [follow] budget that looks at quiet blocks may take
BLOCK_FASTEST_S = 0.25  # a quiet block's first interval, doubled at each look that finds no change
LAUNCHER = -1
"""The pseudo-rank that the launcher's log is followed as: its lines travel with the ranks' logs
(one tail machinery, one log view), and readers that count ranks or plot metrics skip it."""


class Found(NamedTuple):
    """A file to follow: what it holds and the rank it belongs to."""

    path: Path
    kind: str
    rank: int


def ezpz_metrics_rank(name: str) -> int | None:
    """The rank an ezpz metrics file's name gives (``metrics-3.jsonl``: 3, the shared
    ``metrics.jsonl`` or a default ``History()``'s ``<run-id>.jsonl``: 0, whose records name
    their own), or None for another file."""
    match = EZPZ_METRICS_FILE.search(name)
    if match:
        return int(match.group(1))
    return 0 if name == EZPZ_SHARED_METRICS or EZPZ_HISTORY_FILE.fullmatch(name) else None


class RunListing:
    """The files of one run directory that have not been reported yet, and the status files
    rewritten since the last look."""

    def __init__(self, run_dir: Path, stats_per_second: float | None = None) -> None:
        """``stats_per_second``: the ``[follow]`` budget, of which looks at quiet blocks take
        :data:`BLOCK_SHARE` (None: every block at every look)."""
        self.run = RunDir(run_dir)
        self.stats_per_second = stats_per_second
        self.world_size: int | None = None  # as the ranks say: how full the last block gets
        self._known: set[Path] = set()
        self._dirs: dict[Path, tuple[int, int]] = {}
        self._status_ino: dict[Path, int] = {}
        self._blocks: dict[Path, list[Path]] = {}  # each rank folder's blocks, as last listed
        self._looks: dict[Path, tuple[float, float]] = {}  # a block's interval and next look
        self._woken: set[Path] = set()
        self._ranks_in: dict[Path, set[int]] = {}  # ranks found in each block
        self._complete: set[Path] = set()  # blocks that hold every rank they can

    def _entries(self, folder: Path, force: bool) -> list[os.DirEntry[str]] | None:
        """The folder's entries, or None when it is missing or has not changed."""
        st = fscalls.stat(folder)
        if st is None:
            self._dirs.pop(folder, None)
            return None
        sig = (st.st_ino, st.st_mtime_ns)
        recent = time.time() - st.st_mtime < RECENT_S
        if not force and not recent and self._dirs.get(folder) == sig:
            return None
        self._dirs[folder] = sig
        return fscalls.scandir(folder)

    def new_files(self, force: bool = False) -> list[Found]:
        """Logs, metric and telemetry files (ours and ezpz's) not reported before."""
        run = self.run
        found: list[Found] = []
        root = self._entries(run.path, force)
        if root is not None:
            ours = any(e.name in RANK_FOLDERS for e in root)
            for entry in root:
                if entry.name == LAUNCHER_LOG:
                    found.append(Found(Path(entry.path), LOG, LAUNCHER))
                elif entry.name.endswith(".jsonl"):
                    rank = ezpz_metrics_rank(entry.name)
                    if rank is not None:
                        found.append(Found(Path(entry.path), METRICS, rank))
                elif not ours and entry.is_dir(follow_symlinks=False):
                    found += _ezpz_metrics_below(Path(entry.path))
            if not {e.name for e in root} & {STATE_JSON, RUN_TOML}:  # ezpz's own: its logs
                found += [Found(path, LOG, rank) for path, rank in ezpz_logs(run.path)]
        for folder, kind in ((run.logs_dir, LOG), (run.metrics_dir, METRICS)):
            found += self._ranked(folder, kind, force)
        found += self._ranked(run.telemetry_dir, TELEMETRY, force)
        new = [f for f in found if f.path not in self._known]
        self._known.update(f.path for f in new)
        return new

    def _listed(
        self, folder: Path, force: bool, once: bool
    ) -> Iterator[tuple[Path, list[os.DirEntry[str]]]]:
        """``folder`` with its entries when it changed, then each of its blocks that is due
        and changed; ``once``: a block that holds every rank it can is left alone."""
        entries = self._entries(folder, force)
        if entries is not None:
            self._blocks[folder] = sorted(Path(e.path) for e in entries if is_block(e))
            yield folder, entries
        now = time.monotonic()
        for block in self._blocks.get(folder, ()):
            if once and block in self._complete:
                continue
            look = self._looks.get(block)
            if not force and look is not None and now < look[1] and block not in self._woken:
                continue
            self._woken.discard(block)
            inside = self._entries(block, force)
            if inside is None:
                interval = min(self._ceiling(), max(BLOCK_FASTEST_S, 2 * look[0] if look else 0))
            else:
                interval = 0.0
            self._looks[block] = (interval, now + interval)
            if inside is not None:
                yield block, inside

    def _ceiling(self) -> float:
        """The longest a quiet block waits: every block not yet complete within
        :data:`BLOCK_SHARE` of the budget."""
        if self.stats_per_second is None:
            return 0.0
        blocks = sum(map(len, self._blocks.values())) - len(self._complete)
        return blocks / (BLOCK_SHARE * self.stats_per_second)

    def wake(self, folders: Iterable[Path]) -> None:
        """Look at these blocks at the next look whatever their interval (a local write in
        them was heard)."""
        self._woken.update(folders)

    def _ranked(self, folder: Path, kind: str, force: bool) -> list[Found]:
        pattern = LOG_FILE if kind == LOG else JSONL_FILE
        found = []
        for where, entries in self._listed(folder, force, once=True):
            ranks = self._ranks_in.setdefault(where, set()) if where != folder else None
            for entry in entries:
                match = pattern.fullmatch(entry.name)
                if match:
                    rank = int(match.group(1))
                    found.append(Found(where / entry.name, kind, rank))
                    if ranks is not None:
                        ranks.add(rank)
                elif kind == METRICS:
                    rank = ezpz_metrics_rank(entry.name)
                    if rank is not None:
                        found.append(Found(where / entry.name, kind, rank))
            if ranks is not None and len(ranks) >= self._expected(where):
                self._complete.add(where)
        return found

    def _expected(self, block: Path) -> int:
        """How many ranks ``block`` holds once every rank has started."""
        first, end = block_span(block.name)
        world = self.world_size
        return max(1, min(end, world) - first) if world else end - first

    def changed_statuses(self, force: bool = False) -> list[tuple[Path, int]]:
        """Status files that are new or were rewritten (a new inode) since the last call."""
        changed = []
        for where, entries in self._listed(self.run.status_dir, force, once=False):
            for entry in entries:
                match = STATUS_FILE.fullmatch(entry.name)
                if not match:
                    continue
                path, inode = where / entry.name, entry.inode()
                if self._status_ino.get(path) != inode:
                    self._status_ino[path] = inode
                    changed.append((path, int(match.group(1))))
        return changed

    def folders(self) -> list[Path]:
        """The folders of the run seen to exist at their last look (no call of its own)."""
        return sorted(self._dirs)

    def forget_status(self, path: Path) -> None:
        """Read ``path`` again at the next look (it could not be read this time)."""
        self._status_ino.pop(path, None)


def _ezpz_metrics_below(folder: Path) -> list[Found]:
    """ezpz's metrics files anywhere below ``folder`` (a run ezpz made, not ours)."""
    found = []
    for entry in fscalls.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            found += _ezpz_metrics_below(Path(entry.path))
        else:
            rank = ezpz_metrics_rank(entry.name)
            if rank is not None:
                found.append(Found(Path(entry.path), METRICS, rank))
    return found
