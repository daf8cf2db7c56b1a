"""A rank that aborted at interpreter exit after its work was done: not a crash of its work.

A script that leaves its process group alive can abort in the interpreter's teardown, after
everything it had to do is done: torch prints ``terminate called without an active exception``
and the rank dies of SIGABRT (docs/pitfalls.md). Reported as a native crash, that sends people
looking for a broken library in a run whose figures are all there. So whoever names a run's
cause (the supervisor, ``ezpz-tui why``, the failure panel) asks :func:`aborted_at_exit` first;
the run is still ``failed`` (a rank did fail), but its cause says what happened and the fix.

A rank aborted at exit when all of these hold, and else the usual words apply:

* it died of SIGABRT (signal 6, or exit 134 as a shell reports it);
* the last line of its log, our own ``ezpz`` lines aside, is the terminate message, and no
  Python traceback comes before it in the log's tail (an exception is its own cause);
* where the ranks write History records, no peer recorded a later step than it did (a rank that
  aborts mid-run is behind the peers that waited for it, or no further than them).
"""

from __future__ import annotations

import signal as _signal
from collections.abc import Iterable
from pathlib import Path

from ezpz_tui.core.runs.tail import read_tail
from runtime.records import decode
from runtime.rundir import RankStatus, RunDir

TERMINATE = "terminate called without an active exception"
_TRACEBACK = "Traceback (most recent call last):"
_OURS = "ezpz"  # the lines the wrapper and the exit hook add to a rank's log
_LOG_TAIL = 16 << 10
_RECORD_TAIL = 8 << 10
_ABORT = int(_signal.SIGABRT)


def exit_abort_cause(rank: int) -> str:
    """The run's cause when ``rank`` aborted at exit."""
    return (
        f"rank {rank} aborted at exit after its work finished (a process group still alive at "
        "interpreter exit: call dist.destroy_process_group(), or let ezpz-tui's exit hook do it)"
    )


def exit_abort_advice(status: RankStatus) -> str:
    """What to do about it: the fix, or, where the exit hook already destroyed the group, what
    is left to release."""
    if status.destroyed_at_exit:
        return (
            "The exit hook destroyed the process group and the rank still aborted: release the "
            "model, optimizer and tensors (del them, gc.collect()) before the script ends. Its "
            "work was finished: the run's figures are complete."
        )
    return (
        "End the script with dist.barrier() and dist.destroy_process_group(), or leave ezpz-tui's "
        "exit hook on (EZPZ_DESTROY_AT_EXIT unset) so it destroys the group at exit. Its work "
        "was finished: the run's figures are complete."
    )


def aborted_at_exit(run_dir: Path, status: RankStatus, peers: Iterable[RankStatus]) -> bool:
    """Whether ``status``'s rank aborted at interpreter exit after finishing its work (see the
    module's rules); ``peers`` are the run's other ranks. Never raises."""
    if status.signal != _ABORT and not (status.signal is None and status.exit_code == 134):
        return False
    run = RunDir(Path(run_dir))
    lines = [line.strip() for line in read_tail(run.log(status.rank), _LOG_TAIL).splitlines()]
    said = [line for line in lines if line and not line.startswith(_OURS)]
    if not said or said[-1] != TERMINATE or any(line.startswith(_TRACEBACK) for line in said):
        return False
    own = last_recorded_step(run.metrics(status.rank))
    if own is None:
        return True  # no History records: the log is all there is to go by
    steps = (last_recorded_step(run.metrics(p.rank)) for p in peers if p.rank != status.rank)
    return all(step is None or step <= own for step in steps)


def last_recorded_step(path: Path) -> int | None:
    """The step of the last complete History record in ``path``; None when there is none."""
    for line in reversed(read_tail(path, _RECORD_TAIL).split("\n")):
        record = decode(line) if line.strip() else None
        if record is not None and record.step is not None:
            return record.step
    return None
