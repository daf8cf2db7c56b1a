"""Why a run failed, on one screen: the first cause, not the thousand echoes of it.

When one rank of a large job dies, every other rank dies after it (killed by the launcher, timed
out in a collective), and each says so in its log: the person reading must find the one rank
that failed on its own, on which host, how it ended, what that usually means, what its log said
last, what the launcher said, and what to do next. :func:`explain` gathers exactly that from a
run directory into a :class:`Failure` that the CLI (``ezpz-tui why``) and the TUI show, and
:meth:`Failure.to_json` gives machines.

What a reader here can know, and how it decides:

* The first failing rank is the culprit (:mod:`ezpz_tui.core.runs.culprit`): the earliest rank
  whose own failure is not a symptom of a peer's, by the time of its raise as the rank recorded
  it, else its end; the run's state names it (``failed_rank``, written by the supervisor by the
  same rules), unless the ranks' records or logs show that rank a symptom of another's own
  failure (a run recorded before ranks recorded their raises). What it raised is its own
  record, else the last traceback of its log (``exception``: type, message, where); the ranks
  whose failures were symptoms of it are named as such (``symptoms``).
* Ranks killed as a consequence are those marked ``killed``; those that ended ``failed`` after
  the first failure by SIGTERM or SIGINT, or by a SIGKILL their wrapper was sent; and, in a
  run that has ended, those whose status still says ``running`` (the launcher killed their
  wrapper before it could write).
* A rank that aborted at interpreter exit after its work was done (the terminate message last
  in its log, SIGABRT, no peer further on) is said as such, with the fix, not as a native crash
  (:mod:`ezpz_tui.core.runs.exit_abort`).
* A node fault is a launcher or crash message that implicates a host (a shepherd killed, a GPU
  lost, a bus error, NCCL or CUDA failing, srun's "Killed" without an out-of-memory report), or
  Hydra reporting a process on a named host killed by SIGKILL/SIGBUS without one. Failover
  excludes that host; nothing else is blamed on a node, and nothing at all on a workstation.
* Its class, workload or infrastructure, the evidence and whether to retry
  (:mod:`~ezpz_tui.core.watching.failure_class`), judged against the failure of the run it
  retries (run.toml's ``parent``): a node fault at that run's step on another host is the job's.
"""

from __future__ import annotations

import signal as _signal
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.culprit import INTERRUPTED, RankFailure, Verdict, culprit_cause, verdict
from ezpz_tui.core.runs.digest import Statuses, rank_statuses
from ezpz_tui.core.runs.ending import cause_of, first_failure
from ezpz_tui.core.runs.exit_abort import (
    aborted_at_exit,
    exit_abort_advice,
    exit_abort_cause,
    last_recorded_step,
)
from ezpz_tui.core.runs.exit_meanings import describe_end, meaning
from ezpz_tui.core.runs.full_disk import ended_on_full_disk, what_to_do
from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.record import RunStoreError, read_run_toml
from ezpz_tui.core.runs.tail import read_tail
from ezpz_tui.core.runs.tracebacks import MAX_FRAMES, last_traceback, raised_in
from ezpz_tui.core.runs.unreadable import unreadable
from ezpz_tui.core.watching.failure_class import OOM_KINDS, FailureClass, classify
from ezpz_tui.core.watching.launcher_messages import MAX_READ, LauncherMessage, read_messages
from ezpz_tui.core.watching.tails import plain
from ezpz_tui.core.words import rank_ranges
from runtime.rundir import (
    LAUNCHER_LOG,
    LIVE,
    LOGS,
    STATUS,
    Raised,
    RankState,
    RankStatus,
    RunDir,
    RunState,
    State,
)

LAST_LINES = 10
_STOP_SIGNALS = frozenset({"SIGTERM", "SIGINT", "SIGKILL", "SIGHUP"})
_STOP_NUMBERS = frozenset(int(s) for s in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGKILL))
_KILL_SIGNALS = frozenset({int(_signal.SIGKILL), int(_signal.SIGBUS)})
_UNREADABLE = (" is cut short (", "unreadable checkpoint index", "checkpoint load failed")
AT_EXIT_MEANING = "aborted in the interpreter's teardown, after the script's own end"


@dataclass(frozen=True)
class Failure:
    """The first cause of a run's failure and what followed from it."""

    run_id: str
    run_dir: Path
    state: str  # the run's state as a reader should believe it
    rank: int | None  # the first failing rank, when one is known
    host: str | None
    exit_code: int | None
    signal: int | None
    signal_name: str | None
    meaning: str | None  # what that end usually means
    cause: str  # the failure in one line
    exception: Raised | None  # what the rank raised: its own record, else its log's
    traceback: tuple[str, ...]  # that exception's traceback, frames included
    last_lines: tuple[str, ...]  # the end of the rank's log when it has no traceback
    messages: tuple[LauncherMessage, ...]  # the launcher's word, then the rank log's
    killed: tuple[int, ...]  # ranks ended as a consequence
    node_fault_host: str | None  # a host the messages implicate, for failover
    advice: tuple[str, ...]
    notes: tuple[str, ...] = ()  # files of the run that could not be used, one line each
    # What the ranks' Flight Recorder says (``collectives.lines_of``), when a reader added it.
    collectives: tuple[str, ...] = ()
    # Ranks whose own failure was a symptom of this one's (a connection closed by it), by time.
    symptoms: tuple[Symptom, ...] = ()
    # Workload or infrastructure, with its evidence and whether to retry (failure_class.py).
    judged: FailureClass | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["judged"]
        if self.judged is not None:
            data |= self.judged.to_json()
        data["run_dir"] = str(self.run_dir)
        data["messages"] = [m.to_json() for m in self.messages]
        data["exception"] = _exception_json(self.exception)
        data["symptoms"] = [s.to_json() for s in self.symptoms]
        for key in ("traceback", "last_lines", "killed", "advice", "notes", "collectives"):
            data[key] = list(data[key])
        return data


@dataclass(frozen=True)
class Symptom:
    """A rank that failed because another had: what it said of the peer it lost."""

    rank: int
    host: str | None
    symptom: str  # in words: "connection closed by peer"
    exception: Raised | None  # what it raised saying so

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "host": self.host,
            "symptom": self.symptom,
            "exception": _exception_json(self.exception),
        }


def _exception_json(raised: Raised | None) -> dict[str, Any] | None:
    if raised is None:
        return None
    return {
        "type": raised.type,
        "message": raised.message,
        "where": raised.where,
        "thread": raised.thread,
    }


# --- a rank's log ------------------------------------------------------------------------------


def _log_lines(path: Path) -> list[str]:
    return [plain(line).rstrip() for line in read_tail(path, MAX_READ).splitlines()]


def _last_lines(lines: list[str], count: int = LAST_LINES) -> tuple[str, ...]:
    return tuple([line for line in lines if line.strip()][-count:])


# --- ranks -------------------------------------------------------------------------------------


def _ended_by_peer(status: RankStatus) -> bool:
    return (
        status.state == RankState.KILLED
        or bool(status.signals_received)
        or (status.cause or "").startswith("after rank")
    )


def first_failing(
    statuses: list[RankStatus], recorded: int | None, found: Verdict | None = None
) -> RankStatus | None:
    """The rank whose own failure started it all: as recorded, unless ``found`` (the ranks'
    own records: :func:`~ezpz_tui.core.runs.culprit.verdict`) shows the recorded rank's
    failure a symptom of another's (a run recorded before ranks recorded their raises);
    else the verdict's culprit; else the earliest to fail on its own, else the earliest
    failed at all."""
    by_rank = {s.rank: s for s in statuses}
    culprit = found.culprit if found is not None else None
    if recorded is not None and recorded in by_rank:
        blamed = found is not None and found.symptom(recorded) is not None
        if culprit is not None and culprit.own and culprit.rank != recorded and blamed:
            return culprit.status
        return by_rank[recorded]
    if culprit is not None and (recorded is None or culprit.rank == recorded):
        return culprit.status  # the recorded rank's status cannot be used: its raise can
    return first_failure(statuses)


def _stopped_by_signal(status: RankStatus) -> bool:
    if status.signal_name in _STOP_SIGNALS or status.signal in _STOP_NUMBERS:
        return True
    return status.exit_code is not None and status.exit_code - 128 in _STOP_NUMBERS


def killed_after(
    statuses: list[RankStatus], first: RankStatus | None, run_ended: bool
) -> tuple[int, ...]:
    """The ranks ended because ``first`` failed (see the module's rules)."""
    since = first.end if first is not None and first.end is not None else None
    killed = []
    for status in statuses:
        if first is not None and status.rank == first.rank:
            continue
        if status.state == RankState.KILLED:
            killed.append(status.rank)
        elif status.state == RankState.FAILED and _stopped_by_signal(status):
            late = since is None or status.end is None or status.end >= since
            # SIGKILL is also the OOM killer's: only a kill the wrapper was sent counts.
            sent = _ended_by_peer(status) or status.signal_name in ("SIGTERM", "SIGINT")
            if late and sent:
                killed.append(status.rank)
        elif status.state == RankState.RUNNING and status.end is None and run_ended:
            killed.append(status.rank)
    return tuple(killed)


# --- the launcher's word -----------------------------------------------------------------------


def _rank_messages(run: RunDir, status: RankStatus) -> list[LauncherMessage]:
    """Crash lines of the rank's own log, credited to that rank and its host."""
    source = f"{LOGS}/{run.log(status.rank).name}"
    return [
        replace(m, rank=status.rank if m.rank is None else m.rank, host=m.host or status.host)
        for m in read_messages(run.log(status.rank), source)
    ]


def node_fault_host(messages: tuple[LauncherMessage, ...]) -> str | None:
    """The host a node fault implicates, first named first; ``None`` when the failure looks
    like the program's (or memory's) rather than a node's."""
    oom = any(m.kind in OOM_KINDS for m in messages)
    for message in messages:
        if not (message.node_fault and message.host):
            continue
        if oom and message.kind == "srun_task_killed":
            continue  # killed by the OOM killer: the node is fine, the job is too big
        return message.host
    if oom:
        return None
    killed = any(
        m.kind in ("hydra_killed_by_signal", "hydra_exit_string", "hydra_exit_code")
        and (m.signal in _KILL_SIGNALS or m.exit_code in _KILL_SIGNALS)
        for m in messages
    )
    hosts = [m.host for m in messages if m.kind == "hydra_running_at" and m.host]
    return hosts[0] if killed and hosts else None


def on_scheduler_nodes(run_dir: Path) -> bool:
    """Whether the run ran on a scheduler's nodes (a run with no record is assumed to): on a
    workstation there is no other node to move to, so no host is blamed."""
    try:
        scheduler = read_run_toml(run_dir).get("scheduler")
    except RunStoreError:
        return True
    return scheduler != "none"


# --- advice ------------------------------------------------------------------------------------


def advise(
    messages: tuple[LauncherMessage, ...],
    signal: int | None,
    exit_code: int | None,
    exception: str | None,
    bad_host: str | None,
    full_disk: Path | None = None,
    at_exit: str | None = None,
    last_lines: tuple[str, ...] = (),
) -> tuple[str, ...]:
    """What to do next, most useful first, chosen by the cause; ``full_disk`` is the run
    directory when its disk filled up (recorded so, or said in the messages); ``at_exit`` is
    the advice for a rank that aborted at interpreter exit after its work, said instead of a
    native crash's; ``last_lines``, the failing rank's, may name a checkpoint it could not
    read."""
    kinds = {m.kind for m in messages}
    out: list[str] = []
    if full_disk is not None:
        out.append(f"The disk of {full_disk} is full: {what_to_do()}, then relaunch.")
    elif "no_space" in kinds:  # another filesystem may be the full one (/dev/shm, /tmp)
        out.append(
            "A write found no space (the line above says where): free space on that "
            "filesystem or quota, or write elsewhere, then relaunch."
        )
    if full_disk is not None or "no_space" in kinds:
        exception = None  # the program's error is the full disk's, not a bug to fix
    if bad_host:
        out.append(
            f"Exclude {bad_host} and relaunch: the next launch in this outputs directory skips "
            f"the hosts in bad_hosts.txt (or pass --exclude {bad_host})."
        )
    killed = signal == _signal.SIGKILL or exit_code == 128 + _signal.SIGKILL
    if kinds & OOM_KINDS or (killed and not bad_host):
        out.append(
            "Give each rank more memory: fewer ranks per node (--ppn), a smaller batch or "
            "sequence, activation checkpointing, or more nodes with FSDP."
        )
    if "slurm_time_limit" in kinds:
        out.append("Ask for more walltime, or checkpoint more often and resume.")
    if "collective_timeout" in kinds:
        out.append(
            "A collective timed out: a rank fell behind or died first. Look for the earliest "
            "error above; `ezpz-tui stacks` shows where every rank waits on a hang."
        )
    if at_exit:
        out.append(at_exit)
    elif signal in (_signal.SIGSEGV, _signal.SIGABRT) or exit_code in (134, 139):
        out.append(
            "A native crash: check the last lines for the library at fault, and that torch, "
            "the driver and the collective library match."
        )
    unreadable = _unreadable_checkpoint((exception, *reversed(last_lines)))
    if unreadable:
        out.append(unreadable)
    elif exception:
        out.append(f"Fix the exception in the program: {exception}")
    if exit_code == 127:
        out.append("The command was not found on the compute node: check it and its PATH.")
    if not out:
        out.append("Read the rank's last lines and the launcher's messages above.")
    return tuple(out)


def _unreadable_checkpoint(said: Iterable[str | None]) -> str | None:
    """The advice for a resume whose checkpoint could not be read: runtime.checkpoint's
    ``CheckpointError`` on a load names the file and, after ``; ``, the earlier complete
    checkpoint and the command that resumes from it, raised or (the demo) printed before an
    exit 2. No line of the program is at fault, so "fix the exception" or "a usage error" would
    send a person to the wrong place. ``said``: the exception's line, then the last lines."""
    for text in said:
        if not text or "checkpoint" not in text:
            continue
        error, _, earlier = text.partition("; ")
        if not any(words in error for words in _UNREADABLE):
            continue
        if not earlier:
            return (
                "The checkpoint the run resumed from cannot be read (the file is named above): "
                "resume from an earlier complete one with `ezpz-tui launch --resume-from "
                "STEP_DIR`."
            )
        return f"The checkpoint the run resumed from cannot be read; {earlier}."
    return None


# --- the whole story ---------------------------------------------------------------------------


def _has_failure(state: RunState, statuses: list[RankStatus]) -> bool:
    if state.state == State.FAILED:
        return True
    if state.state in (State.SUCCEEDED, State.STOPPED):
        return False
    return any(s.state == RankState.FAILED and not _ended_by_peer(s) for s in statuses)


def _cause(
    first: RankStatus | None, host: str | None, end: str, word: str | None, reason: str | None
) -> str:
    if first is not None:
        where = f" on {host}" if host else ""
        return f"rank {first.rank}{where}: {end}"
    if word:
        return f"the launcher: {word}"
    return f"the launcher ended with {end}" + (f": {reason}" if reason else "")


def explain(run_dir: Path, parent: bool = True, read: Statuses | None = None) -> Failure | None:
    """The failure of the run in ``run_dir``, or ``None`` when it has not failed (succeeded,
    stopped by the user, still running with no rank failed), classified against the failure
    of the run it retries (run.toml's ``parent``) unless ``parent`` is false; ``read``: its
    ranks' statuses where the caller read them (an ended run's from its digest). Never raises
    on bad input."""
    run = RunDir(Path(run_dir))
    state = run_state(run.path)
    read = read or rank_statuses(run.path, state)
    statuses = read.read
    if not _has_failure(state, statuses):
        return None
    unusable = read.unusable
    notes = [state.reason] if state.state == State.UNKNOWN and state.reason else []
    notes += unusable.values()
    found = verdict(run.path, statuses)
    first = first_failing(statuses, state.failed_rank, found)
    if first is None and state.failed_rank in unusable:  # its log still tells
        first = RankStatus(state.failed_rank)
    own = _failure_of(found, first)
    messages = read_messages(run.launcher_log, LAUNCHER_LOG)
    notes += filter(None, [unreadable(run.path, run.launcher_log)])
    exception, traceback, last = None, (), ()
    if first is not None:
        notes += filter(None, [unreadable(run.path, run.log(first.rank))])
        lines = _log_lines(run.log(first.rank))
        said, traceback = last_traceback(lines)
        exception = own.raised if own is not None and own.recorded else None
        if exception is None and said is not None:
            exception = raised_in(said, traceback)
        if own is not None and own.recorded and exception is not None:
            traceback = _trimmed(exception.traceback) or traceback  # as the rank raised it
        last = () if traceback else _last_lines(lines)
        messages += _rank_messages(run, first)
    said_by = tuple(messages)
    bad_host = node_fault_host(said_by) if on_scheduler_nodes(run.path) else None
    if first is not None:
        exit_code, signal, name = first.exit_code, first.signal, first.signal_name
        host = first.host
    else:  # no rank could say: the launcher's word and its own end are all there is
        exit_code, signal, name = state.exit_code, state.signal, state.signal_name
        host = bad_host
    end = describe_end(exit_code, signal, name)
    said = meaning(exit_code, signal)
    word = next((m.text for m in said_by if m.node_fault), None)
    at_exit = _aborted_at_exit(run.path, state, first, statuses)
    full_disk = run.path if ended_on_full_disk(state) else None
    symptoms = _symptoms(found, first)
    failure = Failure(
        run_id=run.path.name,
        run_dir=run.path,
        state=str(state.state),
        rank=None if first is None else first.rank,
        host=host,
        exit_code=exit_code,
        signal=signal,
        signal_name=name,
        meaning=AT_EXIT_MEANING if at_exit else said,
        cause=(
            exit_abort_cause(at_exit.rank)
            if at_exit
            else _run_cause(run.path, state, first, own, statuses)
            or _cause(first, host, end, word, state.reason)
        ),
        exception=exception,
        traceback=traceback,
        last_lines=last,
        messages=said_by,
        killed=killed_after(statuses, first, run_ended=state.state not in LIVE),
        node_fault_host=bad_host,
        advice=advise(
            said_by,
            signal,
            exit_code,
            exception.line if exception is not None else None,
            bad_host,
            full_disk,
            at_exit=exit_abort_advice(at_exit) if at_exit else None,
            last_lines=last,
        ),
        notes=(*notes, *read.notes),
        symptoms=symptoms,
    )
    step = last_recorded_step(run.metrics(failure.rank if failure.rank is not None else 0))
    before = _parent_failure(run.path) if parent else None
    return replace(failure, judged=classify(failure, step, before))


def _parent_failure(run_dir: Path) -> Failure | None:
    """The failure of the run ``run_dir``'s retries (its run.toml's ``parent``, a sibling),
    classified without its own parent: one step back is what a recurrence is judged by."""
    try:
        name = read_run_toml(run_dir).get("parent")
    except RunStoreError:
        return None
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        return None
    folder = run_dir.parent / name
    return explain(folder, parent=False) if folder.is_dir() else None


def _failure_of(found: Verdict, first: RankStatus | None) -> RankFailure | None:
    """The verdict's word on ``first``: the culprit's failure, or the symptom it showed."""
    if first is None:
        return None
    if found.culprit is not None and found.culprit.rank == first.rank:
        return found.culprit
    return found.symptom(first.rank)


def _symptoms(found: Verdict, first: RankStatus | None) -> tuple[Symptom, ...]:
    """The ranks that failed of ``first``'s failure, each with what it said; one interrupted by
    the stop that followed is only killed."""
    if first is None:
        return ()
    return tuple(
        Symptom(f.rank, f.status.host, f.symptom, f.raised)
        for f in found.symptoms
        if f.symptom is not None and f.symptom != INTERRUPTED and f.rank != first.rank
    )


def _run_cause(
    run_dir: Path,
    state: RunState,
    first: RankStatus | None,
    own: RankFailure | None,
    statuses: list[RankStatus],
) -> str | None:
    """The cause the run's state records, unless it names another rank than the culprit (a run
    recorded before ranks recorded their raises) or none yet (a live run): then the culprit's."""
    if state.cause and (first is None or state.failed_rank in (None, first.rank)):
        return state.cause
    return culprit_cause(run_dir, own, statuses) if own is not None else None


def _trimmed(block: tuple[str, ...]) -> tuple[str, ...]:
    if len(block) > MAX_FRAMES:
        return (block[0], "  ...", *block[-(MAX_FRAMES - 2) :])
    return block


def _aborted_at_exit(
    run_dir: Path, state: RunState, first: RankStatus | None, statuses: list[RankStatus]
) -> RankStatus | None:
    """``first`` when it aborted at interpreter exit after its work was done and the run's
    recorded cause says no more than that it failed (a cause the supervisor knew better, a full
    disk say, is kept); a run recorded before this was recognised is explained too."""
    if first is None:
        return None
    plain = (None, cause_of(first), exit_abort_cause(first.rank))
    if state.cause not in plain or not aborted_at_exit(run_dir, first, statuses):
        return None
    return first


def outcome(run_dir: Path) -> str:
    """One line for a run that did not fail: how it ended, or that it has not."""
    run = RunDir(Path(run_dir))
    state = run_state(run.path)
    name = run.path.name
    if state.state == State.SUCCEEDED:
        return f"run {name} succeeded"
    if state.state == State.STOPPED:  # by the user, or by what its record names
        if state.reason and not state.stopped_by_user:
            return f"run {name} was stopped: {state.reason}"
        return f"run {name} was stopped by the user"
    if state.state in LIVE:
        return f"run {name} is {state.state}; no rank has failed"
    reason = f": {state.reason}" if state.reason else ""
    return f"run {name} is {state.state}{reason}; no rank failed"


# --- in words ----------------------------------------------------------------------------------

MAX_SAID = 300  # characters of an exception's message said on its one line


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_SAID else line[: MAX_SAID - 1] + "…"


def _symptom_lines(symptoms: tuple[Symptom, ...], culprit: int | None) -> list[str]:
    """One line per symptom and exception type, its ranks as ranges (a 16,384-rank job's
    cascade is a line, not a page); a rank alone is named with its host."""
    groups: dict[tuple[str, str], list[Symptom]] = {}
    for symptom in symptoms:
        raised = symptom.exception
        kind = f" ({raised.type.rpartition('.')[2]})" if raised is not None else ""
        groups.setdefault((symptom.symptom, kind), []).append(symptom)
    lines = []
    for (words, kind), members in groups.items():
        if len(members) == 1:
            where = f" on {members[0].host}" if members[0].host else ""
            who = f"rank {members[0].rank}{where}"
        else:
            who = f"ranks {rank_ranges([m.rank for m in members])}"
        lines.append(f"{who}: {words}{kind} after rank {culprit} failed")
    return lines


def format_failure(failure: Failure, listed: bool | None = None) -> str:
    """The failure as a person reads it in a terminal; ``listed``: whether the host its node
    fault names is in bad_hosts.txt (None: not said)."""
    out = [f"run {failure.run_id} {failure.state}: {failure.cause}"]
    out += [f"note: {note}" for note in failure.notes]
    if failure.rank is not None:
        end = describe_end(failure.exit_code, failure.signal, failure.signal_name)
        status = f"{STATUS}/{RunDir(failure.run_dir).status(failure.rank).name} "
        if any(note.startswith(status) for note in failure.notes):
            end = "its end unknown (its status cannot be used)"
        where = f" on {failure.host}" if failure.host else ""
        out.append(f"first failing rank: {failure.rank}{where}, {end}")
        if failure.meaning:
            out.append(f"  usually: {failure.meaning}")
        raised = failure.exception
        if raised is not None and (raised.thread or not failure.traceback):
            at = f" at {raised.where}" if raised.where else ""
            thread = f" in thread {raised.thread}" if raised.thread else ""
            out.append(f"  raised: {_one_line(raised.line)}{at}{thread}")
        log = f"{LOGS}/{RunDir(failure.run_dir).log(failure.rank).name}"
        if failure.traceback:
            out.append(f"last traceback in {log}:")
            out.extend(f"    {line}" for line in failure.traceback)
        elif failure.last_lines:
            out.append(f"last lines of {log}:")
            out.extend(f"    {line}" for line in failure.last_lines)
        elif not any(note.startswith(f"{log} ") for note in failure.notes):
            out.append(f"{log} is empty")
    if failure.messages:
        out.append("the launcher and the logs said:")
        for message in failure.messages:
            out.append(f"    {message.source}:{message.line}: {message.text}")
            out.append(f"        ({message.meaning})")
    if failure.symptoms:
        out.append(f"failed after rank {failure.rank} (symptoms, not causes):")
        out.extend(f"    {line}" for line in _symptom_lines(failure.symptoms, failure.rank))
    out.extend(failure.collectives)
    if failure.judged is not None:
        out.extend(failure.judged.words())
    if failure.killed:
        count = len(failure.killed)
        noun = "rank" if count == 1 else "ranks"
        out.append(f"killed as a consequence: {noun} {rank_ranges(failure.killed)}")
    host = failure.node_fault_host
    if host is not None and listed is not None:
        where = f"bad_hosts.txt in {failure.run_dir.parent}"
        out.append(
            f"{host} is listed in {where}: later launches there skip it"
            if listed
            else f"{host} is not listed in {where}: later launches there use it"
        )
    out.append("what to do:")
    out.extend(f"  - {line}" for line in failure.advice)
    return "\n".join(out)
