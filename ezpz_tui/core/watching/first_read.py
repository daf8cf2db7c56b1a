"""A run's first read, in a process of its own: every rank's log, status, metrics and telemetry
read, parsed and folded off the UI's interpreter lock.

Opening a 4,096-rank run reads some 16,000 files; parsing them and folding every rank's records
into the metric bands held the UI's lock for seconds (in a thread it still shares the lock, and
the folding ran on the UI thread itself), so a key pressed meanwhile waited. Here a child process
(``python -m ezpz_tui.core.watching.first_read``, never a fork of the threaded app) runs the
same :class:`~.followers.RunFollower` into its own :class:`~.monitor.RunMonitor` and
:class:`~.metrics.store.MetricStore`, and hands back what they hold: after each poll a
:class:`Part` (the rows, newest lines and telemetry of the ranks that poll touched, the progress),
then one :class:`Ending` (the all-ranks lines, the step times, the metric store with its bands
and last values, and where each file was left, so the follower that goes on in the app reads only
what is new). Each crosses the pipe as its own pickle, a few hundred ranks at most, so unpickling
one holds the app's lock for milliseconds; installing one is dictionary updates
(:func:`install_part`, :func:`install_ending`).
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from ezpz_tui.core.watching.followers import LAUNCHER, RunFollower
from ezpz_tui.core.watching.metrics.lean import RankSummary
from ezpz_tui.core.watching.metrics.load import rank_loader
from ezpz_tui.core.watching.metrics.store import MetricStore
from ezpz_tui.core.watching.monitor import Changes, LogLine, RankInfo, RunMonitor
from ezpz_tui.core.watching.progress import Progress
from ezpz_tui.core.watching.stragglers import StepTimes
from ezpz_tui.core.watching.telemetry import RankTelemetry

IDLE_POLL_S = 0.05  # between polls that found nothing new (files still being listed)
NICE = 10  # the child yields the CPU to the app it reads for: keys first, on a busy node too
PIECE_RANKS = 256  # ranks a pickle carries at most: unpickling one takes a few ms
_FRAME = struct.Struct("<Q")  # each pickle's length, before it


@dataclass
class Request:
    """What the child reads, as the app's follower would: the run, its ranks, the rank on
    screen (None: all), the monitor's line budgets and the follower's settings."""

    run_dir: str
    world: int | None
    shown: int | None
    keep_per_rank: int
    keep_all: int
    slow_factor: float
    read_bytes: int
    log_backlog: int
    stats_per_second: float | None
    slowest: float
    first_reads: int

    def follower(
        self, focus: Callable[[], Iterable[int]], resume: dict[str, tuple[int, int]] | None = None
    ) -> RunFollower:
        """The follower these settings make: the worker's, and the app's that goes on from
        where the worker left each file (``resume``)."""
        return RunFollower(
            self.run_dir,
            read_bytes=self.read_bytes,
            log_backlog=self.log_backlog,
            stats_per_second=self.stats_per_second,
            slowest=self.slowest,
            first_reads=self.first_reads,
            focus=focus,
            resume=resume,
        )


@dataclass
class Part:
    """What one poll of the child read: the ranks it touched, each as its monitor now holds it
    (row, newest lines, telemetry), the launcher's too when touched, every file problem, and
    the summary bar's progress."""

    ranks: dict[int, RankInfo]
    lines: dict[int, deque[LogLine]]
    telemetry: dict[int, RankTelemetry]
    problems: dict[int, dict[str, str]]
    progress: Progress | None = None
    launcher: RankInfo | None = None

    def merge(self, later: Part) -> None:
        """Take in ``later``'s ranks (the newer of each), so that the app installs both at once."""
        self.ranks.update(later.ranks)
        self.lines.update(later.lines)
        self.telemetry.update(later.telemetry)
        self.problems = later.problems
        self.progress = later.progress or self.progress
        self.launcher = later.launcher or self.launcher


@dataclass
class Ending:
    """The end of the first read: the all-ranks view's lines, the step times (stragglers), the
    metric store, and where each file was left (``finished``: the run had ended and every file
    was read to its end, so nothing is left to follow)."""

    all_lines: deque[LogLine]
    total_lines: int
    has_launcher: bool
    steps: StepTimes
    store: MetricStore
    resume: dict[str, tuple[int, int]]
    finished: bool
    took_s: float = 0.0
    pid: int = field(default_factory=os.getpid)


@dataclass
class Summaries:
    """Some ranks' metric summaries of the ending's (lean) store, sent before it."""

    ranks: dict[int, RankSummary]


class FirstReadFailed(Exception):
    """The child died or said something that is not a part: its last words, or why."""


# --- the child ----------------------------------------------------------------------------------


def read_first(request: Request, send: Callable[[Part | Summaries | Ending], None]) -> None:
    """Read ``request``'s run until every file it lists was read once, sending a :class:`Part`
    (or a few) after each poll that read something, and at the end the metric store's
    :class:`Summaries`, then the :class:`Ending`."""
    began = time.monotonic()
    monitor = RunMonitor(
        Path(request.run_dir),
        keep_per_rank=request.keep_per_rank,
        keep_all=request.keep_all,
        slow_factor=request.slow_factor,
    )
    if request.world:
        monitor.expect_ranks(request.world)
    monitor.show(request.shown)
    follower = request.follower(monitor.shown_ranks)
    store = MetricStore(rank_loader(request.run_dir))
    progress = Progress()
    polls = 0
    while True:
        batch = follower.poll()
        polls += 1
        if batch:
            changes = monitor.apply(monitor.prepare(batch), time.time())
            for rank in batch.metric_restarts:
                store.reset(rank)
            for rank, columns in batch.records.items():
                store.add(rank, columns)
            lowest = min(batch.records, default=None)
            if lowest is not None:
                progress.update(batch.records[lowest])
            touched = {*changes.by_rank, *batch.status, *batch.telemetry, *batch.records}
            touched |= {*batch.problems, *batch.log_restarts}
            ordered = sorted(touched)
            for start in range(0, len(ordered), PIECE_RANKS):
                send(_part(monitor, ordered[start : start + PIECE_RANKS], progress))
        # The first poll reads the statuses only (the rows come first): the files after it.
        if follower.finished or (polls > 1 and follower.read_once):
            break
        if not batch:
            time.sleep(IDLE_POLL_S)
    store.attach(None)
    summaries = store.summaries
    if summaries:
        moved = list(summaries.items())
        summaries.clear()
        for start in range(0, len(moved), PIECE_RANKS):
            send(Summaries(dict(moved[start : start + PIECE_RANKS])))
    send(
        Ending(
            monitor.all_lines,
            monitor.total_lines,
            monitor.has_launcher,
            monitor.steps,
            store,
            {} if follower.finished else follower.resume_points(),
            follower.finished,
            time.monotonic() - began,
        )
    )


def _part(monitor: RunMonitor, touched: list[int], progress: Progress) -> Part:
    ranks = {r: monitor.ranks[r] for r in touched if r in monitor.ranks}
    lines = {r: monitor.lines_of(r) for r in ranks}
    telemetry = {r: monitor.telemetry[r] for r in ranks if r in monitor.telemetry}
    launcher = None
    if LAUNCHER in touched:
        launcher = monitor.launcher
        lines[LAUNCHER] = monitor.lines_of(LAUNCHER)
    return Part(ranks, lines, telemetry, monitor.problems, progress, launcher)


def main() -> int:
    """The child: a pickled :class:`Request` on stdin, framed pickles on stdout."""
    with contextlib.suppress(OSError):
        os.nice(NICE)
    request = pickle.load(sys.stdin.buffer)
    out = sys.stdout.buffer

    def send(item: Part | Summaries | Ending) -> None:
        data = pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL)
        out.write(_FRAME.pack(len(data)) + data)
        out.flush()

    try:
        read_first(request, send)
    except BrokenPipeError:  # the app closed the run, or itself
        return 1
    return 0


# --- the app's side -----------------------------------------------------------------------------


class FirstRead:
    """The child reading ``request``'s run; :meth:`items` hands back what it sends."""

    def __init__(self, request: Request) -> None:
        root = str(Path(__file__).resolve().parents[3])  # this checkout's ezpz_tui, first
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        self._errors: BinaryIO = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        self.process = subprocess.Popen(
            [_interpreter(), "-m", "ezpz_tui.core.watching.first_read"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            env=env,
            start_new_session=True,  # a ctrl+c in the terminal is the app's to handle
        )
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            pickle.dump(request, self.process.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self.process.stdin.close()

    @property
    def pid(self) -> int:
        return self.process.pid

    def items(self, stop: threading.Event) -> Iterator[Part | Ending]:
        """Each part as it comes, then the ending; :class:`FirstReadFailed` when the child ends
        without one. Stops (and ends the child) once ``stop`` is set."""
        pipe = self.process.stdout
        assert pipe is not None
        summaries: dict[int, RankSummary] = {}
        while not stop.is_set():
            head = pipe.read(_FRAME.size)
            if len(head) < _FRAME.size:
                raise FirstReadFailed(f"{self._last_words()}; its output ended")
            data = pipe.read(_FRAME.unpack(head)[0])
            # Unpickling a part makes thousands of objects, enough to start full collections
            # that walk the app's whole heap with the lock held (100-500 ms each at 4,096
            # ranks): what is held now is moved out of their reach (see :func:`release`).
            gc.freeze()
            try:
                item = pickle.loads(data)
            except Exception as exc:  # a torn frame: the child died while writing it
                raise FirstReadFailed(f"{self._last_words()}; {len(data)} bytes: {exc!r}") from exc
            if isinstance(item, Summaries):
                summaries.update(item.ranks)
                continue
            if not isinstance(item, Part | Ending):
                raise FirstReadFailed(f"it sent a {type(item).__name__}")
            if isinstance(item, Ending) and item.store.summaries is not None:
                item.store.summaries.update(summaries)
            yield item
            if isinstance(item, Ending):
                return

    def _last_words(self) -> str:
        """Why the child ended: its exit and the end of what it wrote to stderr."""
        try:
            code = self.process.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        self._errors.seek(0)
        lines = self._errors.read().decode("utf-8", "replace").strip().splitlines()
        said = lines[-1] if lines else ""
        if code is not None and code < 0:
            ended = f"killed by signal {-code}"
        else:
            ended = f"exited {code}" if code is not None else "stopped answering"
        return f"{ended}: {said}" if said else ended

    def close(self) -> None:
        """End the child if it still reads, and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._errors.close()


def _interpreter() -> str:
    """This environment's Python: ``sys.executable`` where it names a file (it may be empty,
    or a bare name when Python is embedded), else the one in ``sys.prefix``."""
    named = Path(sys.executable)
    if named.is_absolute() and named.is_file():
        return str(named)
    return str(Path(sys.prefix, "bin", "python3"))


def release() -> None:
    """Let the collector walk again what :meth:`FirstRead.items` froze (the run it read was
    closed: its objects may be garbage now)."""
    gc.unfreeze()


def install_part(monitor: RunMonitor, part: Part, now: float) -> Changes:
    """Hold ``part``'s ranks in ``monitor`` (on the thread that reads it), active as of
    ``now``; the changes say which logs to show again."""
    for info in part.ranks.values():
        if info.last_activity is not None:
            info.last_activity = now
    monitor.ranks.update(part.ranks)
    monitor.activity_changed()
    for rank, lines in part.lines.items():
        monitor.adopt_lines(rank, lines)
    monitor.telemetry.update(part.telemetry)
    monitor.problems = part.problems
    if part.launcher is not None:
        monitor.launcher = part.launcher
        monitor.has_launcher = True
    return Changes({}, [], set(part.lines), problems=bool(part.problems))


def install_ending(monitor: RunMonitor, ending: Ending) -> Changes:
    """Hold the all-ranks lines and the step times of ``ending`` in ``monitor``."""
    monitor.all_lines = deque(ending.all_lines, maxlen=monitor.keep_all)
    monitor.total_lines = ending.total_lines
    monitor.has_launcher |= ending.has_launcher
    monitor.steps = ending.steps
    return Changes({}, list(ending.all_lines), set())


if __name__ == "__main__":
    # What it sends must name this module's classes, not ``__main__``'s copies of them.
    from ezpz_tui.core.watching.first_read import main as module_main

    sys.exit(module_main())
