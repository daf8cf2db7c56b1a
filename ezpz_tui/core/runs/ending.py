"""How a run and each of its ranks really ended, decided once by whoever supervised the run.

A rank's wrapper records how its own command ended, but it cannot know why: a rank that died of
SIGTERM may have been stopped by the user or torn down by the launcher after a peer crashed, and
a wrapper the launcher SIGKILLed records nothing at all. The supervisor knows the rest of the
story (whether the user asked for a stop, which rank failed first), so when the launcher has
exited it rewrites every rank's end in those terms (:func:`final_statuses`) and records the
run's first cause (:func:`first_failure`, in words by :func:`cause_in`). Readers that find an
end-less rank in a run nobody supervises any more derive the same words without writing
(:func:`derived_state`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path

from ezpz_tui.core.runs.exit_abort import aborted_at_exit, exit_abort_cause
from ezpz_tui.core.runs.exit_meanings import describe_end
from ezpz_tui.core.runs.full_disk import NO_SPACE, ended_on_full_disk
from runtime.flight import remove_requests
from runtime.rundir import (
    RankState,
    RankStatus,
    RunDir,
    RunState,
    State,
    read_statuses,
    write_status,
)

# Signals a launcher or a stop uses to end the ranks it tears down.
_TEARDOWN = frozenset({"SIGINT", "SIGTERM", "SIGKILL", "SIGHUP"})
SUPERVISOR = "supervisor"


def how(status: RankStatus) -> str:
    """A rank's end in a few words: ``exit 3``, ``SIGSEGV (signal 11)``."""
    if status.signal is None and status.exit_code is None:
        return str(status.state)
    return describe_end(status.exit_code, status.signal, status.signal_name)


def _own_failure(status: RankStatus) -> bool:
    """Failed by itself: its wrapper forwarded no stop signal to it."""
    return status.state == RankState.FAILED and not status.signals_received


def first_failure(statuses: Iterable[RankStatus]) -> RankStatus | None:
    """The rank whose failure ended the run: the earliest to fail on its own account, else the
    earliest to fail at all; ties go to the lowest rank."""
    failed = [s for s in statuses if s.state == RankState.FAILED]
    own = [s for s in failed if _own_failure(s)]
    pool = own or failed
    if not pool:
        return None
    return min(pool, key=lambda s: (s.end is None, s.end or 0.0, s.rank))


def cause_of(status: RankStatus) -> str:
    """The run's cause when ``status`` failed first: ``rank 1 on x1: exit 3``."""
    where = f" on {status.host}" if status.host else ""
    return f"rank {status.rank}{where}: {how(status)}"


def cause_in(run_dir: Path, status: RankStatus, statuses: Iterable[RankStatus]) -> str:
    """:func:`cause_of`, unless the rank's run directory shows it aborted at interpreter exit
    after its work was done (:mod:`ezpz_tui.core.runs.exit_abort`): then that, with the fix."""
    if aborted_at_exit(run_dir, status, statuses):
        return exit_abort_cause(status.rank)
    return cause_of(status)


def _ended_by_peer(status: RankStatus, first: RankStatus) -> bool:
    """A rank torn down after ``first`` failed: it got a stop forwarded, or died of a teardown
    signal no earlier than ``first``."""
    if status.rank == first.rank or status.state != RankState.FAILED:
        return False
    if status.signals_received:
        return True
    late = status.end is None or first.end is None or status.end >= first.end
    return status.signal_name in _TEARDOWN and late


def final_statuses(
    statuses: Sequence[RankStatus], run: RunState, world_size: int | None, now: float
) -> list[RankStatus]:
    """The statuses to rewrite now that the launcher of ``run`` (already final) has exited.

    * The user's stop: ranks still running, or failed by the stop signal forwarded to them,
      are ``stopped``.
    * A failure: ranks still running, or torn down after the first failure, are ``killed``
      with ``after rank N failed`` as their cause; the first (``run.failed_rank`` when the
      supervisor named it) is ``failed``, with the run's cause when the stop ended it.
    * A run that ended on a full disk: ranks still running, or that never wrote a status, are
      ``failed`` with that cause: their wrappers found no room to record their ends.
    * Anything else still running (a launcher that exited on its own, a wrapper killed before
      it could write) is ``lost``, as is a rank of the world that never wrote a status (one the
      user's stop came before is ``stopped``).
    """
    stopped = run.state == State.STOPPED
    full = run.state == State.FAILED and ended_on_full_disk(run)
    named = [s for s in statuses if s.rank == run.failed_rank]
    first = named[0] if named else first_failure(statuses)
    if run.state != State.FAILED:
        first = None  # a failed rank in a run that did not fail ended nothing else
    changed = []
    for status in statuses:
        end = status.end if status.end is not None else now
        if first is not None and status.rank == first.rank:
            if status.state != RankState.FAILED or status.signals_received:
                # It raised and lived on, and the failure's stop ended it: still the cause.
                changed.append(_end(status, RankState.FAILED, run.cause or "failed first", end))
        elif stopped and (status.state == RankState.RUNNING or status.signals_received):
            if status.state in (RankState.RUNNING, RankState.FAILED):
                word = run.reason or "stopped by the user"
                changed.append(_end(status, RankState.STOPPED, word, end))
        elif first is not None and (
            status.state == RankState.RUNNING or _ended_by_peer(status, first)
        ):
            changed.append(_end(status, RankState.KILLED, f"after rank {first.rank} failed", end))
        elif status.state == RankState.RUNNING and full:
            changed.append(_end(status, RankState.FAILED, f"no end recorded: {NO_SPACE}", end))
        elif status.state == RankState.RUNNING:
            code = run.exit_code if run.exit_code is not None else run.signal_name
            word = f"no end recorded; the launcher ended ({code})"
            changed.append(_end(status, RankState.LOST, word, end))
    seen = {s.rank for s in statuses}
    for rank in range(world_size or 0):
        if rank in seen:
            continue
        if stopped:
            changed.append(
                _end(RankStatus(rank), RankState.STOPPED, "stopped before it started", now)
            )
        elif full:
            word = f"no status: {NO_SPACE}"
            changed.append(_end(RankStatus(rank), RankState.FAILED, word, now))
        else:
            word = "no status: the rank never started, or its wrapper could not write"
            changed.append(_end(RankStatus(rank), RankState.LOST, word, now))
    return changed


def _end(status: RankStatus, state: RankState, cause: str, end: float) -> RankStatus:
    return replace(status, state=state, cause=cause, ended_by=SUPERVISOR, end=end)


def finalise(
    run_dir: Path,
    run: RunState,
    world_size: int | None,
    now: float,
    statuses: Sequence[RankStatus] | None = None,
) -> list[RankStatus]:
    """Rewrite the end of every rank :func:`final_statuses` names, from ``statuses`` as the
    caller just read them (read here when not given); ``world_size`` None: as the ranks say.
    A disk that refuses one stops nothing (readers derive the same words). The FIFOs of ranks
    whose wrapper was killed with them go too (:func:`runtime.flight.remove_requests`): the
    ended run holds only regular files and folders: one listing of ``flight/`` and one of each
    of its blocks."""
    run_files = RunDir(run_dir)
    for folder in run_files.rank_folders(run_files.flight_dir):
        remove_requests(folder)
    statuses = read_statuses(run_dir) if statuses is None else statuses
    world = world_size or world_size_of(statuses)
    changed = final_statuses(statuses, run, world, now)
    for status in changed:
        try:
            write_status(run_dir, status)
        except OSError:
            continue
    return changed


def derived_state(rank: int, recorded: RankState, run: RunState) -> RankState:
    """What a reader should show for a rank whose record says ``running`` when the run itself
    has ended or been lost: the word its supervisor would have written."""
    if recorded != RankState.RUNNING or run.live:
        return recorded
    if run.state == State.STOPPED:
        return RankState.STOPPED
    if run.state == State.FAILED and run.failed_rank not in (None, rank):
        return RankState.KILLED
    if run.state == State.FAILED and ended_on_full_disk(run):
        return RankState.FAILED  # its wrapper found no room to record the end
    return RankState.LOST


def world_size_of(statuses: Iterable[RankStatus]) -> int | None:
    """The world size the ranks agree on, if they say."""
    sizes = {s.world_size for s in statuses if s.world_size}
    return sizes.pop() if len(sizes) == 1 else None


def status_dir_stamp(status_dir: Path, blocks: Sequence[Path] = ()) -> tuple[int, ...] | None:
    """The modification times of the status folder and of ``blocks`` (its blocks of ranks):
    each status write renames a file into one of them, so a ``stat`` of each says whether any
    rank's status changed."""
    try:
        return tuple(os.stat(folder).st_mtime_ns for folder in (status_dir, *blocks))
    except OSError:
        return None
