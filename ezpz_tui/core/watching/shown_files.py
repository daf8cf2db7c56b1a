"""The files of a finished run's shown ranks, each read once when its rank is first shown.

A finished run opened from its digest (:mod:`~ezpz_tui.core.watching.digested`) has every rank's
row already; what is left to read is the log of the rank on screen and the launcher's, and a
shown rank's last minute of telemetry for its sparklines. Each is read once, from near its end,
when its rank is first shown, into the same :class:`~.followers.Batch` a
:class:`~.followers.RunFollower` hands over. Nothing is listed and nothing polled: a finished
run's files no longer change, and a poll with no rank newly shown makes no filesystem call.
A file that cannot be read, or holds unreadable lines, is said as the follower says it (the
batch's ``problems``), so a shown rank's empty log is never mistaken for a silent one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ezpz_tui.core.runs.unreadable import named
from ezpz_tui.core.watching import fscalls
from ezpz_tui.core.watching.followers import TELEMETRY_BACKLOG, TELEMETRY_LINE, Batch, RankLines
from ezpz_tui.core.watching.listing import LAUNCHER
from ezpz_tui.core.watching.tails import DEFAULT_MAX_LINE, DEFAULT_READ, Lines, LineTail
from runtime.rundir import RunDir
from runtime.telemetry.record import parse_line


class ShownFiles:
    """Reads the log (and telemetry) of each rank ``focus`` names, once, the first time it
    does; :attr:`opened` lists the files read, in order."""

    def __init__(
        self,
        run_dir: str | Path,
        focus: Callable[[], Iterable[int]],
        log_backlog: int,
        read_bytes: int = DEFAULT_READ,
        max_line: int = DEFAULT_MAX_LINE,
    ) -> None:
        self.run = RunDir(Path(run_dir))
        self.focus = focus
        self.log_backlog = log_backlog
        self.read_bytes = read_bytes
        self.max_line = max_line
        self.opened: list[Path] = []
        self._read: set[int] = set()
        self._seq = 0

    def poll(self) -> Batch:
        """The files of the ranks shown since the last poll, read to their ends."""
        batch = Batch()
        for rank in [r for r in self.focus() if r not in self._read]:
            self._read.add(rank)
            if rank == LAUNCHER:
                batch.launcher = self._log(rank, self.run.launcher_log, batch)
            else:
                self._log(rank, self.run.log(rank), batch)
                self._telemetry(rank, self.run.telemetry(rank), batch)
        return batch

    def _drain(
        self, rank: int, path: Path, max_line: int, backlog: int, batch: Batch
    ) -> Iterator[Lines]:
        """``path``'s lines from within ``backlog`` bytes of its end; none when it is missing,
        and its error said in ``batch`` when it cannot be read."""
        if fscalls.stat(path) is None:
            return
        self.opened.append(path)
        tail = LineTail(path, max_line)
        tail.skip_to_tail(backlog)
        while True:
            lines = tail.read(self.read_bytes)
            if lines:
                yield lines
            if not tail.more:
                break
        if tail.error is not None:
            self._problem(batch, rank, path, f" cannot be read: {tail.error}")

    def _problem(self, batch: Batch, rank: int, path: Path, why: str) -> None:
        """Say in ``batch`` that ``path`` (named as the follower names it) is ``why``."""
        name = named(self.run.path, path)
        batch.problems.setdefault(rank, {})[name] = f"{name}{why}"

    def _log(self, rank: int, path: Path, batch: Batch) -> bool:
        """Whether the log exists."""
        for lines in self._drain(rank, path, self.max_line, self.log_backlog, batch):
            batch.logs.append(RankLines(rank, self._seq, lines))
            self._seq += len(lines)
        return bool(self.opened) and self.opened[-1] == path

    def _telemetry(self, rank: int, path: Path, batch: Batch) -> None:
        bad = 0
        for lines in self._drain(rank, path, TELEMETRY_LINE, TELEMETRY_BACKLOG, batch):
            samples = [s for s in map(parse_line, lines.texts) if s]
            bad += sum(1 for text in lines.texts if text.strip()) - len(samples)
            if samples:
                batch.telemetry.setdefault(rank, []).extend(samples)
        if bad:
            self._problem(batch, rank, path, f": {bad} unreadable line{'s' * (bad != 1)} skipped")

    def watch(self, stop: threading.Event, interval_s: float) -> Iterator[Batch]:
        """Non-empty batches until ``stop`` is set: a rank's files within ``interval_s`` of
        its being shown."""
        while not stop.is_set():
            batch = self.poll()
            if batch:
                yield batch
            stop.wait(interval_s)
