"""Where is each rank of a hung job? Ask every rank for its Python stacks, fold identical ones.

A job whose ranks all wait in a collective shows nothing wrong in its logs: every rank is just
silent. The runtime makes each rank dump its stacks on SIGUSR1 (:mod:`runtime.stackdump`, via
``faulthandler``, into the rank's log); :func:`request_stacks` sends that signal to every rank
it can, reads back what each wrote, and :func:`group_stacks` folds ranks with the same main
thread stack together, as LLNL's STAT does for MPI jobs::

    ranks 0-1022: all_reduce at train.py:88
    rank 1023: __next__ at dataloader.py:40

Sending SIGUSR1 is only safe to a process that catches it: Python's default action for it is
to terminate. So a rank is signalled only when its process is on this host, alive, still this
run's (its environment names the run directory, so a reused pid is never hit) and catches
SIGUSR1 (``SigCgt`` in ``/proc/PID/status``); every other rank is reported with the reason.

The same request asks each rank's Flight Recorder thread to write its collectives now
(:mod:`runtime.flight`), and the report says what they show beside the stacks: the collective
a rank never entered, with that rank's stack (:mod:`~ezpz_tui.core.watching.collectives`).

UI-free: the CLI's ``stacks`` command and the TUI use the same calls.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.pids import environ_has
from ezpz_tui.core.runs.unreadable import unusable_statuses
from ezpz_tui.core.watching.collectives import (
    Missing,
    Verdict,
    lines_of,
    run_verdict,
    verdict_json,
)
from ezpz_tui.core.words import rank_ranges
from runtime import flight
from runtime.env import RUN_DIR_VAR
from runtime.procfs import proc_stat
from runtime.rundir import RANK_ENDED, RankStatus, RunDir, read_statuses

WAIT_S = 5.0  # for the dumps to appear: a rank stuck in C code still dumps at once
SETTLE_S = 0.25  # a dump counts as complete once its log stopped growing for this long
_POLL_S = 0.05
_MAX_DUMP_BYTES = 4 << 20

_HEADER = re.compile(
    r"^(?:(?P<current>Current thread)|Thread) (?P<id>0x[0-9a-fA-F]+)"
    r"(?: \[[^\]]*\])? \(most recent call first\):\s*$"
    r"|^(?P<stack>Stack) \(most recent call first\):\s*$"
)
_FRAME = re.compile(r'^  File (?:"(?P<file>.*)"|\?\?\?), line (?P<line>\d+|\?\?\?) in (?P<fn>.*)$')


# --- the dump and its parts --------------------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    """One line of a dump: ``File "x.py", line 88 in all_reduce``."""

    file: str
    line: int | None
    function: str

    def short(self) -> str:
        """``all_reduce at train.py:88``: the headline of a group."""
        return f"{self.function} at {os.path.basename(self.file)}:{self.line or '?'}"

    def full(self) -> str:
        return f"{self.function} at {self.file}:{self.line or '?'}"


@dataclass(frozen=True)
class ThreadStack:
    """One thread's frames, innermost first, as ``faulthandler`` lists them."""

    thread: str | None  # "0x00007f..."; None for a single-thread dump ("Stack ...")
    current: bool  # the thread that ran the signal handler
    frames: tuple[Frame, ...]
    truncated: bool = False  # faulthandler stops after 100 frames and writes "..."


@dataclass(frozen=True)
class RankStacks:
    """What one rank dumped."""

    rank: int
    threads: tuple[ThreadStack, ...]

    @property
    def main(self) -> ThreadStack:
        """The main thread: faulthandler lists threads newest first, so the oldest, the
        interpreter's first thread, comes last."""
        return self.threads[-1]


def parse_dump(text: str) -> tuple[ThreadStack, ...]:
    """The threads of the first ``faulthandler`` dump in ``text``; the rank's own output before
    it is skipped. faulthandler lists every thread, newest first and the main thread last,
    each after a blank line; the one that ran the handler is "Current thread" wherever it
    stands (the signal may land on any thread, e.g. the Flight Recorder's while it writes). So
    a dump ends at the first line after a thread's frames that is not another thread's
    header or a blank line, or where a thread it already listed comes again (a second dump
    right after it; a thread started between the two is not one of the first's)."""
    threads: list[ThreadStack] = []
    seen: set[str | None] = set()
    current: dict[str, Any] | None = None

    def close() -> None:
        if current is not None:
            threads.append(ThreadStack(**current))

    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            close()
            thread = header.group("id")
            if thread in seen:  # a second dump begins: keep the first whole
                return tuple(threads)
            seen.add(thread)
            current = dict(
                thread=thread, current=bool(header.group("current")), frames=(), truncated=False
            )
            continue
        if current is None:
            if threads and line.strip():  # the rank's own output again: the dump has ended
                return tuple(threads)
            continue
        frame = _FRAME.match(line)
        if frame:
            number = frame.group("line")
            found = Frame(frame.group("file") or "???", _int(number), frame.group("fn"))
            current["frames"] = (*current["frames"], found)
        elif line.strip() == "...":
            current["truncated"] = True
        elif not line.startswith("  "):  # a blank line or the rank's own output ends a block
            close()
            current = None
            if line.strip():  # the rank's own output: the dump has ended, whatever follows
                return tuple(threads)
    close()
    return tuple(threads)


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


# --- grouping and words ------------------------------------------------------------------------


@dataclass(frozen=True)
class StackGroup:
    """Ranks whose main threads stand at the very same frames."""

    ranks: tuple[int, ...]
    frames: tuple[Frame, ...]  # innermost first

    def headline(self) -> str:
        where = self.frames[0].short() if self.frames else "no Python frame"
        return f"{rank_words(self.ranks)}: {where}"


def group_stacks(stacks: Iterable[RankStacks]) -> list[StackGroup]:
    """Ranks with identical main-thread stacks folded together, by lowest rank.

    The main thread only: background threads (a telemetry sampler, a data-loader pin thread)
    stand somewhere else at every look and would split ranks that wait in the same place.
    """
    by_frames: dict[tuple[Frame, ...], list[int]] = {}
    for rank_stacks in stacks:
        if rank_stacks.threads:
            by_frames.setdefault(rank_stacks.main.frames, []).append(rank_stacks.rank)
    groups = [StackGroup(tuple(sorted(ranks)), frames) for frames, ranks in by_frames.items()]
    return sorted(groups, key=lambda g: g.ranks[0])


def rank_words(ranks: Sequence[int]) -> str:
    return f"{'rank' if len(ranks) == 1 else 'ranks'} {rank_ranges(ranks)}"


# --- asking the ranks --------------------------------------------------------------------------


@dataclass(frozen=True)
class Skipped:
    """A rank with no stacks, and why."""

    rank: int
    reason: str


@dataclass(frozen=True)
class StacksReport:
    """What :func:`request_stacks` found: the stacks collected and the ranks without."""

    run_dir: Path
    collected: tuple[RankStacks, ...] = ()
    skipped: tuple[Skipped, ...] = field(default_factory=tuple)
    collectives: Verdict | None = None  # what the ranks' Flight Recorder files say
    collective_notes: tuple[str, ...] = ()

    def groups(self) -> list[StackGroup]:
        return group_stacks(self.collected)


def catches(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a handler for ``sig`` (``SigCgt`` in its status); ``False``
    where that cannot be read."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _needles(run_dir: Path) -> set[bytes]:
    spellings = {os.fspath(run_dir), os.path.realpath(run_dir)}
    return {b"\0" + f"{RUN_DIR_VAR}={p}".encode() + b"\0" for p in spellings}


def _why_not(status: RankStatus, here: str, needles: set[bytes]) -> str | None:
    """Why this rank cannot be signalled, or ``None`` when it can."""
    if status.state in RANK_ENDED:
        return f"ended ({status.state})"
    if status.host and status.host != here:
        return f"on host {status.host}, not this one ({here}): run stacks there"
    pid = status.pid
    if pid is None:
        return "no process recorded yet"
    stat = proc_stat(pid)
    if stat is None or stat.gone:
        return f"process {pid} is gone"
    if not environ_has(pid, needles):
        return f"process {pid} is not this run's (or not readable by this user)"
    if not catches(pid, signal.SIGUSR1):
        return (
            f"process {pid} does not catch SIGUSR1, which would end it: not Python, or run "
            "without runtime.setup() and the capture wrapper's sitecustomize"
        )
    return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read(_MAX_DUMP_BYTES)
    except OSError:
        return b""


def request_stacks(
    run_dir: Path, wait_s: float = WAIT_S, settle_s: float = SETTLE_S
) -> StacksReport:
    """Send SIGUSR1 to every rank that can take it, wait up to ``wait_s`` for their dumps, and
    return the stacks each wrote to its log after the request, with every other rank's reason.
    """
    run = RunDir(run_dir)
    here, needles = socket.gethostname(), _needles(run_dir)
    skipped: list[Skipped] = []
    pending: dict[int, tuple[Path, int]] = {}  # rank -> (log, its size before the signal)
    statuses = read_statuses(run_dir)
    # A rank whose status says nothing has no pid to signal: said, not passed over.
    skipped += [Skipped(rank, why) for rank, why in unusable_statuses(run.path, statuses).items()]
    for status in statuses:
        reason, pid = _why_not(status, here, needles), status.pid
        if reason is None and pid is not None:
            log = run.log(status.rank)
            offset = _size(log)
            try:
                os.kill(pid, signal.SIGUSR1)
            except OSError as exc:
                reason = f"cannot signal process {pid}: {exc.strerror or exc}"
            else:
                pending[status.rank] = (log, offset)
                flight.ask(str(run.flight_request(status.rank)))  # its collectives, now
        if reason is not None:
            skipped.append(Skipped(status.rank, reason))
    collected: dict[int, RankStacks] = {}
    last_size = {rank: -1 for rank in pending}
    steady_since: dict[int, float] = {}
    deadline = time.monotonic() + wait_s
    while pending:
        now = time.monotonic()
        for rank, (log, offset) in list(pending.items()):
            size = _size(log)
            if size != last_size[rank]:
                last_size[rank], steady_since[rank] = size, now
                threads = parse_dump(_read_from(log, offset).decode("utf-8", "replace"))
                if threads:
                    collected[rank] = RankStacks(rank, threads)
            elif rank in collected and now - steady_since[rank] >= settle_s:
                del pending[rank]
        if now >= deadline:
            break
        time.sleep(_POLL_S)
    for rank in pending:
        if rank not in collected:
            skipped.append(Skipped(rank, f"no stack dump in its log within {wait_s:g} s"))
    found, notes = run_verdict(run_dir, live=True, now=time.time())
    return StacksReport(
        run_dir,
        tuple(collected[r] for r in sorted(collected)),
        tuple(sorted(skipped, key=lambda s: s.rank)),
        found,
        tuple(notes),
    )


# --- reporting ---------------------------------------------------------------------------------


def format_report(report: StacksReport) -> list[str]:
    """Each group's headline and its main-thread stack, innermost first, then the ranks
    without stacks, folded by reason."""
    lines: list[str] = []
    for group in report.groups():
        lines.append(group.headline())
        lines.extend(f"    {frame.full()}" for frame in group.frames)
    by_reason: dict[str, list[int]] = {}
    for item in report.skipped:
        by_reason.setdefault(item.reason, []).append(item.rank)
    for reason, ranks in sorted(by_reason.items(), key=lambda kv: min(kv[1])):
        lines.append(f"{rank_words(ranks)}: no stacks: {reason}")
    lines += lines_of(report.collectives, report.collective_notes)
    if isinstance(report.collectives, Missing):
        main = {r.rank: r.main for r in report.collected if r.threads}
        for rank in report.collectives.missing[:4]:
            if rank in main and main[rank].frames:
                lines.append(f"  rank {rank}'s stack: {main[rank].frames[0].short()}")
    return lines


def _frame_json(frame: Frame) -> dict[str, Any]:
    return {"file": frame.file, "line": frame.line, "function": frame.function}


def report_json(report: StacksReport) -> dict[str, Any]:
    """The report as JSON: groups, every thread of every rank, and the ranks without."""
    return {
        "run": str(report.run_dir),
        "groups": [
            {
                "ranks": list(g.ranks),
                "ranks_text": rank_ranges(g.ranks),
                "headline": g.headline(),
                "frames": [_frame_json(f) for f in g.frames],
            }
            for g in report.groups()
        ],
        "ranks": {
            str(r.rank): [
                {
                    "thread": t.thread,
                    "current": t.current,
                    "truncated": t.truncated,
                    "frames": [_frame_json(f) for f in t.frames],
                }
                for t in r.threads
            ]
            for r in report.collected
        },
        "skipped": [{"rank": s.rank, "reason": s.reason} for s in report.skipped],
        "collectives": verdict_json(report.collectives),
        "collective_notes": list(report.collective_notes),
    }
