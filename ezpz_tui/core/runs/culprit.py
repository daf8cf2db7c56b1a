"""Which rank failed first: the one whose own failure started it all, not the first to exit.

When one rank raises, its peers lose it ("Connection closed by peer", a collective that times out
or is aborted) and fail after it; yet a peer may *exit* first, while the raising rank's
interpreter still destroys its process group at exit. So ends are not the order of failures.
What is:

* each rank's own record of what it raised and when (``status/rank-NNNNN.raised``, written
  by :mod:`runtime.raise_hook` the moment the exception left a thread); a run whose ranks wrote
  none (an earlier version) falls back on the traceback at the end of the rank's log, timed by
  the rank's end;
* whether that failure is the rank's own or a symptom of a peer's (:func:`symptom_of`: a closed
  connection, a collective's timeout or abort, the stop's interrupt).

The culprit (:func:`verdict`) is the earliest rank whose failure is its own, ahead of any
symptom even when the symptom's rank ended first; only when every failure is a symptom is it
the earliest symptom. A rank's main-thread raise always counts (its interpreter was going
down); one raised in another thread counts only when the rank then failed on its own account
(a thread may raise and the program go on). The supervisor (its fail-fast and the run's end),
its tether and ``ezpz-tui why`` all decide by it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ezpz_tui.core.runs.ending import cause_in
from ezpz_tui.core.runs.tail import read_tail
from ezpz_tui.core.runs.tracebacks import last_traceback, raised_in
from runtime.rundir import Raised, RankState, RankStatus, RunDir, read_raised

LOG_TAIL = 64 << 10  # bytes of a log read for its traceback: a failure is told at its end
MAX_LOG_READS = 16  # logs read per verdict: a 16,384-rank cascade must not read them all
LAST_LINES = 30  # lines of a log with no traceback looked through for a symptom
MAX_CAUSE_MESSAGE = 160  # characters of an exception's message in a run's one-line cause
INTERRUPTED = "interrupted (a stop's SIGINT)"

# A peer's failure as the rank that lost it says it; the words name the symptom in reports.
SYMPTOMS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"Connection (?:closed|reset) by peer", re.I), "connection closed by peer"),
    (re.compile(r"Broken pipe", re.I), "broken pipe to a peer"),
    (
        re.compile(r"Connection was likely closed|remote server shutdown or crash", re.I),
        "connection to the store closed",
    ),
    (
        re.compile(
            r"Timed out waiting \d+\s*ms for (?:send|recv)|\[[^\]]*gloo[^\]]*\] Timed out"
            r"|collective operation timeout|NCCL operations have failed or timed out",
            re.I,
        ),
        "a collective timed out",
    ),
    (
        re.compile(r"ncclRemoteError|remote process exited", re.I),
        "a peer's process exited or the network failed",
    ),
    (re.compile(r"communicator (?:was )?abort", re.I), "a collective was aborted"),
)


def symptom_of(text: str) -> str | None:
    """The peer's failure ``text`` (an exception's message, a log line) shows, in words;
    ``None`` when it says nothing of a peer."""
    return next((words for pattern, words in SYMPTOMS if pattern.search(text)), None)


def symptom_of_raise(raised: Raised) -> str | None:
    if raised.type.rpartition(".")[2] == "KeyboardInterrupt":
        return INTERRUPTED
    return symptom_of(raised.message) or symptom_of(raised.type)


@dataclass(frozen=True)
class RankFailure:
    """How one rank failed, as far as its own records and log say."""

    status: RankStatus
    at: float | None  # when: its raise, else its end
    raised: Raised | None  # what it raised (its own record, else its log's last traceback)
    symptom: str | None  # the peer's failure it shows, in words; None: its own failure
    recorded: bool = False  # ``raised`` is the rank's own record, not read from its log
    unread: bool = False  # its log has not been looked at yet

    @property
    def rank(self) -> int:
        return self.status.rank

    @property
    def own(self) -> bool:
        return self.symptom is None


@dataclass(frozen=True)
class Verdict:
    """The culprit and the ranks whose failures were symptoms of a peer's, by time."""

    culprit: RankFailure | None
    symptoms: tuple[RankFailure, ...] = ()

    def symptom(self, rank: int) -> RankFailure | None:
        return next((f for f in self.symptoms if f.rank == rank), None)


def raises_in(run_dir: Path) -> dict[int, tuple[Raised, ...]]:
    """Every rank's recorded raises: one listing of the status folder and of each of its
    blocks, one read per rank that raised (most never did)."""
    found = {}
    for path, rank in RunDir(run_dir).raised_files():
        raises = read_raised(path)
        if raises:
            found[rank] = raises
    return found


def failed_on_its_own(status: RankStatus) -> bool:
    """Ended ``failed`` with no stop forwarded to it and no peer's failure named as its end."""
    return (
        status.state == RankState.FAILED
        and not status.signals_received
        and not (status.cause or "").startswith("after rank")
    )


def _stopped(status: RankStatus) -> bool:
    return bool(status.signals_received) or status.state in (RankState.KILLED, RankState.STOPPED)


def failure_of(status: RankStatus, raises: Sequence[Raised]) -> RankFailure | None:
    """The rank's failure from its status and recorded raises; ``None`` when it did not fail
    (a log still to read is marked ``unread``)."""
    main = next((r for r in raises if r.thread is None), None)
    if main is not None and symptom_of_raise(main) == INTERRUPTED and _stopped(status):
        main = None  # the stop's SIGINT, forwarded to it: a consequence, not a failure
    own_end = failed_on_its_own(status)
    in_thread = next((r for r in raises if r.thread is not None), None) if own_end else None
    raised = main or in_thread
    if raised is not None:
        at = raised.time if raised.time is not None else status.end
        return RankFailure(status, at, raised, symptom_of_raise(raised), recorded=True)
    if own_end:
        return RankFailure(status, status.end, None, None, unread=True)
    return None


def read_log(run_dir: Path, failure: RankFailure) -> RankFailure:
    """``failure`` with what the rank's log says: its last traceback, and whether that (or,
    with none, its last lines: an NCCL watchdog's abort) shows a peer's failure."""
    lines = read_tail(RunDir(run_dir).log(failure.rank), LOG_TAIL).splitlines()
    exception, block = last_traceback(lines)
    if exception is not None:
        raised = raised_in(exception, block)
        return replace(failure, raised=raised, symptom=symptom_of_raise(raised), unread=False)
    last = [line for line in lines if line.strip()][-LAST_LINES:]
    said = next(filter(None, map(symptom_of, reversed(last))), None)
    return replace(failure, symptom=said, unread=False)


def verdict(
    run_dir: Path, statuses: Iterable[RankStatus], max_log_reads: int = MAX_LOG_READS
) -> Verdict:
    """The culprit among ``statuses`` and the symptom ranks (see the module's rules). Reads the
    recorded raises, and the logs of failed ranks that recorded none, earliest first, at most
    ``max_log_reads`` of them (past that, a failure with no record is taken as its own, as the
    order of ends said before ranks recorded their raises). Never raises on bad input."""
    raised = raises_in(run_dir)
    by_rank = {s.rank: s for s in statuses}
    # A rank whose status cannot be read still raised what it recorded.
    by_rank |= {rank: RankStatus(rank) for rank in raised if rank not in by_rank}
    found = (failure_of(s, raised.get(s.rank, ())) for s in by_rank.values())
    failures = [f for f in found if f is not None]
    failures.sort(key=lambda f: (f.at is None, f.at or 0.0, f.rank))
    culprit: RankFailure | None = None
    symptoms: list[RankFailure] = []
    reads = 0
    for failure in failures:
        if failure.unread:
            if reads >= max_log_reads:
                culprit = culprit or failure
                continue
            failure = read_log(run_dir, failure)
            reads += 1
        if failure.own:
            culprit = culprit or failure
        else:
            symptoms.append(failure)
    if culprit is None and symptoms:
        culprit, symptoms = symptoms[0], symptoms[1:]
    return Verdict(culprit, tuple(symptoms))


def culprit_cause(run_dir: Path, failure: RankFailure, statuses: Iterable[RankStatus]) -> str:
    """The run's one-line cause when ``failure`` is the culprit: what it raised, when its own
    record says (its end may be a stop's, or not yet come), else how it ended
    (:func:`~ezpz_tui.core.runs.ending.cause_in`)."""
    status, raised = failure.status, failure.raised
    if raised is None or not failure.recorded:
        return cause_in(run_dir, status, statuses)
    where = f" on {status.host}" if status.host else ""
    line = " ".join(raised.line.split())
    if len(line) > MAX_CAUSE_MESSAGE:
        line = line[: MAX_CAUSE_MESSAGE - 1] + "…"
    return f"rank {status.rank}{where}: raised {line}"
