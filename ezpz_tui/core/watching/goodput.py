"""Where the wall time of a run, or of an allocation, went: the goodput ledger.

An allocation is node-hours, and "how much of my job trained?" is answered by cutting wall
time into pieces, each of one segment, that add up to the whole:

- ``staging``: copying the environment to the nodes before the launcher started
  (``stage.json``);
- ``startup``: from the run directory's making to its first step's start (imports, the
  rendezvous, a checkpoint's load); a run relaunched from another (its parent: a retry, a
  resume, a relaunch) calls the same time ``restart``;
- ``productive``: its steps, less the next two;
- ``checkpoint``: the time a save held a step (the ranks' ``ckpt_save_s``; the whole write,
  ``ckpt_write_s``, for a save the supervisor asked for, which the step waits on);
- ``redone``: steps of the training it continues that its ancestors had already run (a run
  continues its parent's when it resumed from a checkpoint, or follows the parent's failure:
  a retry from the checkpoint before a fault redoes the steps since it, one with no
  checkpoint every step; a relaunch from step 0 after a stop tries something new);
- ``hung``: from its last progress to its end (its stop), when that lasted ``stall_after`` or
  more in a run that did not succeed (while it is live: until now);
- ``after``: from its last step to its end (the last save's write, the teardown, a failure's
  detection and stop);
- in an allocation, ``restart`` also spans a parent's stop (its stop request, or its failing
  rank's end) to its child's first step, and ``idle`` is the time no run was in it.

Steps come from rank 0's records (the ranks step together, as :mod:`.numbers` says): record
*i* covers the time since record *i - 1*, the first its ``dt`` before it. A save's held time
is put at the end of the step that saved (``ckpt_step`` - 1). Which steps an ancestor ran is
the highest step any of its ranks recorded (the end of each rank's file; an ended run's
digest holds it, so an ancestor of any size costs one file), and a failed run's stop is its
failing rank's end (its one status file). Runs of an allocation that overlap share the time
they overlap, so its segments still add up to its wall time. Reads only; never raises on what
a run holds.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.digest import RunDigest, ended_digest
from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.record import read_record
from ezpz_tui.core.runs.staged import stage_seconds
from ezpz_tui.core.runs.store import RunStore
from ezpz_tui.core.runs.tail import read_tail
from ezpz_tui.core.watching.monitor import STALL_AFTER_S
from ezpz_tui.core.watching.tails import file_columns
from runtime.checkpoint_dirs import RESUME_VAR
from runtime.metric_files import first_metric_file, metric_files
from runtime.record_columns import RecordColumns, merge_columns, parse_columns
from runtime.rundir import FINAL, RunDir, State, read_status

SEGMENTS = (
    "productive",
    "startup",
    "staging",
    "checkpoint",
    "redone",
    "restart",
    "hung",
    "after",
    "idle",
)
# runtime.checkpoint's figures in a step's record
HELD, WRITTEN, SAVED_STEP, ASKED = "ckpt_save_s", "ckpt_write_s", "ckpt_step", "ckpt_requested"
STEP_TIME = "dt"
TAIL_BYTES = 1 << 13  # the end of a rank's file: its last records, for the highest step
THIS_MACHINE = "this machine"  # the allocation of runs made outside a scheduler's job
_MAX_CHAIN = 1000


@dataclass(frozen=True)
class Step:
    """One record of rank 0: ``step`` ended at ``end``, ``covers`` steps since the record
    before; ``took`` its ``dt``; ``stall`` the seconds a checkpoint save held it."""

    step: int
    end: float
    covers: int = 1
    took: float | None = None
    stall: float = 0.0


@dataclass(frozen=True)
class RunSpan:
    """What a run's files say about its time: made, launched, stopped, ended (None while it
    is live) and its steps."""

    run_id: str
    path: Path
    created: float
    start: float | None
    end: float | None
    stop: float | None = None  # the stop request, or the failing rank's end
    succeeded: bool = False
    staging_s: float = 0.0
    steps: tuple[Step, ...] = ()
    parent: str | None = None
    resumed: bool = False  # it began from a checkpoint (EZPZ_RESUME_FROM)


@dataclass(frozen=True)
class Piece:
    """``[start, end)`` spent in ``segment``; ``stopping``: from the run's stop to its end,
    which an allocation counts as restart when the run's child follows it."""

    start: float
    end: float
    segment: str
    stopping: bool = False

    @property
    def seconds(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class Ledger:
    """A run's or an allocation's wall time by segment (seconds), and the steps redone."""

    wall_s: float
    segments: Mapping[str, float]
    pieces: tuple[Piece, ...] = ()
    redone_steps: int = 0
    redone_span: tuple[int, int] | None = None  # the first and last step redone
    runs: tuple[str, ...] = ()

    @property
    def goodput(self) -> float | None:
        """The productive fraction of the wall time; None for no time at all."""
        return self.segments["productive"] / self.wall_s if self.wall_s > 0 else None

    def to_json(self) -> dict[str, Any]:
        """``goodput --json``'s object: ``wall_s``, ``goodput`` and ``segments`` (seconds by
        ``<segment>_s``), nothing else."""
        good = self.goodput
        return {
            "wall_s": round(self.wall_s, 3),
            "goodput": None if good is None else round(good, 4),
            "segments": {f"{name}_s": round(self.segments[name], 3) for name in SEGMENTS},
        }


# --- reading a run ----------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _rank0_columns(run_dir: Path) -> RecordColumns | None:
    first = first_metric_file(run_dir)
    if first is None:
        return None
    by_rank: dict[int, RecordColumns] = {}
    path, rank = first
    for result in file_columns(path, rank):
        merge_columns(by_rank, result.columns)
    return by_rank[min(by_rank)] if by_rank else None


def read_steps(run_dir: Path) -> tuple[Step, ...]:
    """Rank 0's records as steps, in time order; records of one step are one."""
    cols = _rank0_columns(run_dir)
    if cols is None:
        return ()
    n = len(cols.timestamps)
    none = [None] * n
    took, held, written, asked, saved = (
        cols.metrics.get(name, none) for name in (STEP_TIME, HELD, WRITTEN, ASKED, SAVED_STEP)
    )
    rows: dict[int, list[Any]] = {}  # step -> [end, took, stall]
    stalls: list[tuple[int | None, int, float]] = []  # (saved step - 1, own step, stall)
    for i, (stamp, step) in enumerate(zip(cols.timestamps, cols.steps, strict=True)):
        if stamp is None or not math.isfinite(stamp):
            continue
        step = i if step is None else step
        row = rows.get(step)
        if row is None:
            rows[step] = [stamp, _number(took[i]), 0.0]
        elif stamp > row[0]:
            row[0] = stamp
        stall = held[i]
        if stall is None or stall != stall:  # most steps save nothing: a missing value is NaN
            continue
        if _number(asked[i]) and _number(written[i]) is not None:
            stall = written[i]
        if stall > 0:
            at = _number(saved[i])
            stalls.append((None if at is None else int(at) - 1, step, stall))
    for at, own, stall in stalls:
        rows[at if at in rows else own][2] += stall
    steps: list[Step] = []
    for step, (end, took_s, stall) in sorted(rows.items(), key=lambda item: item[1][0]):
        covers = step - steps[-1].step if steps and step > steps[-1].step else 1
        steps.append(Step(step, end, covers, took_s, stall))
    return tuple(steps)


def highest_step(run_dir: Path, digest: RunDigest | None = None) -> int | None:
    """The highest step any rank of the run recorded, from the end of each rank's file; from
    ``digest`` (an ended run's: :func:`~ezpz_tui.core.runs.digest.ended_digest`) where it holds
    it, the finalizer having read those ends with this function."""
    held, step = digest.highest_step() if digest is not None else (False, None)
    if held:
        return step
    best: int | None = None
    for path, rank in metric_files(run_dir):
        result = parse_columns(read_tail(path, TAIL_BYTES).encode() + b"\n", rank)
        for cols in result.columns.values():
            known = [s for s in cols.steps if s is not None]
            if known:
                best = max(known) if best is None else max(best, *known)
    return best


def _stop(run_dir: Path, stop_requested: float | None, failed_rank: int | None) -> float | None:
    """When the run began to stop: the stop asked for, else the end of the rank whose failure
    stopped it."""
    if stop_requested is not None or failed_rank is None:
        return stop_requested
    status = read_status(RunDir(run_dir).status(failed_rank), failed_rank)
    return status.end if status is not None else None


def read_span(run_dir: Path, now: float | None = None) -> RunSpan:
    """What ``run_dir``'s files say about its time; never raises."""
    path = Path(run_dir)
    now = time.time() if now is None else now
    record, _ = read_record(path)
    state = run_state(path, now)
    steps = read_steps(path)
    last = steps[-1].end if steps else None
    epoch = _number(record.get("created_epoch"))
    created = next(
        (t for t in (epoch, state.created, state.start, steps[0].end if steps else None) if t),
        None,
    )
    if created is None:
        try:
            created = path.stat().st_mtime
        except OSError:
            created = now
    end: float | None
    if state.state in FINAL:
        end = state.end if state.end is not None else last
    elif state.live:
        end = None
    else:  # lost or unknown: its last sign of life
        end = max((t for t in (state.updated, state.end, last) if t is not None), default=created)
    return RunSpan(
        run_id=path.name,
        path=path,
        created=created,
        start=state.start,
        end=end,
        stop=_stop(path, state.stop_requested, state.failed_rank) if end is not None else None,
        succeeded=state.state == State.SUCCEEDED,
        staging_s=stage_seconds(path) or 0.0,
        steps=steps,
        parent=_parent(record),
        resumed=_resumed(record),
    )


def _parent(record: Mapping[str, Any]) -> str | None:
    """The run it was relaunched from (a sweep's id names no run: ``relatives`` reads it)."""
    parent = record.get("parent")
    return parent if isinstance(parent, str) and parent and "/" not in parent else None


def _resumed(record: Mapping[str, Any]) -> bool:
    plan = record.get("plan")
    env = plan.get("env") if isinstance(plan, Mapping) else None
    return isinstance(env, Mapping) and bool(env.get(RESUME_VAR))


# --- the arithmetic ---------------------------------------------------------------------------


class _Tiler:
    """Pieces laid end to end from ``begin``, none past ``end``: they tile the run's time.
    Pieces of one segment in a row are one (a run of 100,000 productive steps is one)."""

    def __init__(self, begin: float, end: float) -> None:
        self.at, self.end = begin, end
        self._laid: list[list[Any]] = []  # [start, end, segment, stopping]

    def to(self, until: float, segment: str, stopping: bool = False) -> None:
        until = min(max(until, self.at), self.end)
        if until > self.at:
            last = self._laid[-1] if self._laid else None
            if last is not None and last[2] == segment and last[3] == stopping:
                last[1] = until
            else:
                self._laid.append([self.at, until, segment, stopping])
        self.at = until

    @property
    def pieces(self) -> list[Piece]:
        return [Piece(*laid) for laid in self._laid]


def _first_took(steps: Sequence[Step]) -> float:
    """How long the first step took: its ``dt``, else the median gap of the next steps."""
    took = steps[0].took
    if took is not None and took > 0:
        return took
    gaps = sorted((b.end - a.end) / b.covers for a, b in pairwise(steps) if b.end > a.end)
    return gaps[len(gaps) // 2] if gaps else 0.0


def run_pieces(
    span: RunSpan,
    now: float,
    *,
    done_before: int | None = None,
    relaunched: bool = False,
    stall_after: float = STALL_AFTER_S,
) -> tuple[list[Piece], int, tuple[int, int] | None]:
    """``span``'s time as pieces from its making to its end (``now`` while live), the steps
    it redid (``done_before``: the highest step its ancestors ran) and the first and last of
    them. ``relaunched``: it has a parent, so its wait for the first step is a restart."""
    end = span.end if span.end is not None else now
    begin = min(span.created, end)
    start = min(max(span.start if span.start is not None else end, begin), end)
    wait = "restart" if relaunched else "startup"
    tiles = _Tiler(begin, end)
    tiles.to(start - min(span.staging_s, start - begin), wait)
    tiles.to(start, "staging")
    steps = [s for s in span.steps if s.end >= start]
    redone, first_redone, last_redone = 0, None, None
    if steps:
        tiles.to(steps[0].end - _first_took(steps), wait)
    for i, s in enumerate(steps):
        length = min(max(s.end, tiles.at), end) - tiles.at
        stall = min(s.stall, length)
        covers = 1 if i == 0 else s.covers
        low = s.step - covers + 1
        again = 0 if done_before is None else max(0, min(s.step, done_before) - low + 1)
        if again:
            redone += again
            first_redone = low if first_redone is None else first_redone
            last_redone = min(s.step, done_before) if done_before is not None else None
        tiles.to(tiles.at + (length - stall) * again / covers, "redone")
        tiles.to(tiles.at + (length - stall) * (covers - again) / covers, "productive")
        tiles.to(tiles.at + stall, "checkpoint")
    last = tiles.at
    if span.end is None:  # live: a step under way, or no sign of one for stall_after
        if steps and end - last >= stall_after:
            tiles.to(end, "hung")
        elif steps:
            redoing = done_before is not None and steps[-1].step + 1 <= done_before
            tiles.to(end, "redone" if redoing else "productive")
        else:
            tiles.to(end, wait)
    else:
        stop = min(max(span.stop if span.stop is not None else end, last), end)
        if not steps:
            tiles.to(stop, wait)
            tiles.to(end, wait, stopping=True)
        elif not span.succeeded and stop - last >= stall_after:
            tiles.to(end, "hung")
        else:
            tiles.to(stop, "after")
            tiles.to(end, "after", stopping=True)
    both = first_redone is not None and last_redone is not None
    return tiles.pieces, redone, (first_redone, last_redone) if both else None


def _totals(pieces: Iterable[Piece]) -> dict[str, float]:
    totals = dict.fromkeys(SEGMENTS, 0.0)
    for piece in pieces:
        totals[piece.segment] += piece.seconds
    return totals


# --- a run and its ancestors ------------------------------------------------------------------


@dataclass(frozen=True)
class Lineage:
    """What a run says of its place in a chain of relaunches."""

    parent: str | None
    highest: int | None  # the highest step any of its ranks recorded
    resumed: bool
    failed: bool


@dataclass
class Ancestry:
    """What is known of ended runs' lineage, kept between looks (the live summary asks every
    few seconds, and an ended ancestor's never changes)."""

    known: dict[Path, Lineage] = field(default_factory=dict)

    def of(self, run_dir: Path) -> Lineage:
        kept = self.known.get(run_dir)
        if kept is not None:
            return kept
        record, _ = read_record(run_dir)
        state = run_state(run_dir)
        highest = highest_step(run_dir, ended_digest(run_dir, state))
        found = Lineage(_parent(record), highest, _resumed(record), state.state == State.FAILED)
        if not state.live:
            self.known[run_dir] = found
        return found

    def chain(self, span: RunSpan) -> list[Path]:
        """The run's ancestors in its outputs directory, nearest first; the chain stops at a
        parent that is not there (a sweep, another outputs directory) or at a loop."""
        outputs, seen, chain = span.path.parent, {span.run_id}, []
        parent = span.parent
        for _ in range(_MAX_CHAIN):
            if parent is None or parent in seen or not RunDir(outputs / parent).looks_like_run():
                break
            chain.append(outputs / parent)
            seen.add(parent)
            parent = self.of(outputs / parent).parent
        return chain

    def done_before(self, span: RunSpan, chain: Sequence[Path]) -> int | None:
        """The highest step of the training ``span`` continues that its ancestors ran: up
        the chain while each run continues its parent's (it resumed, or its parent failed)."""
        best, resumed = None, span.resumed
        for path in chain:
            line = self.of(path)
            if not (resumed or line.failed):
                break
            if line.highest is not None:
                best = line.highest if best is None else max(best, line.highest)
            resumed = line.resumed
        return best


def _run_pieces(
    span: RunSpan, now: float, ancestry: Ancestry, stall_after: float
) -> tuple[list[Piece], int, tuple[int, int] | None]:
    chain = ancestry.chain(span)
    return run_pieces(
        span,
        now,
        done_before=ancestry.done_before(span, chain),
        relaunched=bool(chain),
        stall_after=stall_after,
    )


def run_ledger(
    run_dir: Path,
    now: float | None = None,
    stall_after: float = STALL_AFTER_S,
    ancestry: Ancestry | None = None,
) -> Ledger:
    """The ledger of the run in ``run_dir``, as of ``now`` while it is live."""
    now = time.time() if now is None else now
    span = read_span(Path(run_dir), now)
    pieces, redone, redone_span = _run_pieces(span, now, ancestry or Ancestry(), stall_after)
    end = span.end if span.end is not None else now
    return Ledger(
        wall_s=end - min(span.created, end),
        segments=_totals(pieces),
        pieces=tuple(pieces),
        redone_steps=redone,
        redone_span=redone_span,
        runs=(span.run_id,),
    )


# --- an allocation ----------------------------------------------------------------------------


def short_job(job: str | None) -> str | None:
    """A job id without its server: ``4242`` of ``4242.aurora-pbs-0001...``."""
    return job.split(".")[0] if job else None


def allocation_runs(outputs: Path, job: str | None) -> list[Path]:
    """The runs made in ``job`` (None: outside any job, on this machine), oldest first."""
    wanted = short_job(job)
    runs = RunStore(outputs).list_runs()
    return [r.path for r in reversed(runs) if not r.queued and short_job(r.job_id) == wanted]


def jobs_named(outputs: Path, name: str) -> str | None:
    """The job id of the runs in ``outputs`` whose job ``name`` names (whole, or its number)."""
    for run in RunStore(outputs).list_runs():
        if run.job_id and name in (run.job_id, short_job(run.job_id)):
            return run.job_id
    return None


def _sliced(lanes: Sequence[tuple[float, float, Sequence[Piece]]]) -> dict[str, float]:
    """Seconds by segment over lanes that may overlap: time ``k`` lanes share counts 1/k to
    each, time none covers is idle; the whole is the span from the first lane to the last."""
    cuts = sorted({t for begin, end, _ in lanes for t in (begin, end)})
    starts = cuts[:-1]
    sharing = [
        sum(1 for begin, end, _ in lanes if begin <= a and b <= end) for a, b in pairwise(cuts)
    ]
    totals = dict.fromkeys(SEGMENTS, 0.0)
    for (a, b), k in zip(pairwise(cuts), sharing, strict=True):
        if k == 0:
            totals["idle"] += b - a
    for _, _, pieces in lanes:
        for piece in pieces:
            i = max(0, bisect.bisect_right(starts, piece.start) - 1)
            while i < len(starts) and cuts[i] < piece.end:
                overlap = min(cuts[i + 1], piece.end) - max(cuts[i], piece.start)
                if overlap > 0 and sharing[i]:
                    totals[piece.segment] += overlap / sharing[i]
                i += 1
    return totals


def allocation_ledger(
    run_dirs: Sequence[Path],
    now: float | None = None,
    stall_after: float = STALL_AFTER_S,
) -> Ledger:
    """The ledger of an allocation's runs: each run's pieces, a parent's stop to its child's
    first step as restart, the time between runs idle."""
    now = time.time() if now is None else now
    ancestry = Ancestry()
    spans = [read_span(Path(p), now) for p in run_dirs]
    by_id = {span.run_id: span for span in spans}
    lanes: list[tuple[float, float, Sequence[Piece]]] = []
    redone = 0
    followed = {span.parent for span in spans if span.parent in by_id}
    for span in spans:
        pieces, again, _ = _run_pieces(span, now, ancestry, stall_after)
        redone += again
        if span.run_id in followed:  # its stop to its end is its child's restart
            pieces = [replace(p, segment="restart") if p.stopping else p for p in pieces]
        end = span.end if span.end is not None else now
        lanes.append((min(span.created, end), end, pieces))
        parent = by_id.get(span.parent or "")
        if parent is not None and parent.end is not None and parent.end < span.created:
            gap = Piece(parent.end, span.created, "restart")
            lanes.append((gap.start, gap.end, [gap]))
    if not lanes:
        return Ledger(0.0, dict.fromkeys(SEGMENTS, 0.0))
    wall = max(end for _, end, _ in lanes) - min(begin for begin, _, _ in lanes)
    return Ledger(
        wall_s=wall,
        segments=_sliced(lanes),
        pieces=tuple(sorted((p for _, _, ps in lanes for p in ps), key=lambda p: p.start)),
        redone_steps=redone,
        runs=tuple(span.run_id for span in spans),
    )


# --- in words ---------------------------------------------------------------------------------


def _clock(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


def percent(fraction: float | None) -> str:
    """``91%``: the summary bar's and Compare's goodput."""
    return "-" if fraction is None else f"{fraction * 100:.0f}%"


def ledger_lines(ledger: Ledger) -> list[str]:
    """The ledger for a person: the goodput of the wall time, then a line per segment that
    took any time, longest first."""
    good = ledger.goodput
    said = "n/a" if good is None else f"{good * 100:.1f}%"
    lines = [f"goodput {said} of {_clock(ledger.wall_s)} ({ledger.wall_s:.1f} s)"]
    for name in sorted(SEGMENTS, key=lambda n: -ledger.segments[n]):
        seconds = ledger.segments[name]
        if seconds <= 0:
            continue
        share = seconds / ledger.wall_s * 100 if ledger.wall_s > 0 else 0.0
        line = f"  {name:<11}{seconds:>11.1f} s {share:>6.1f}%"
        if name == "redone" and ledger.redone_steps:
            span = ledger.redone_span
            steps = f" steps {span[0]}-{span[1]}," if span else ""
            line += f"  ({steps} {ledger.redone_steps} steps)".replace("( ", "(")
        lines.append(line)
    return lines


def as_summary(ledger: Ledger) -> Mapping[str, Any]:
    """The ledger as ``summary.json`` keeps it: ``goodput --json``'s object and the steps
    redone."""
    return {**ledger.to_json(), "redone_steps": ledger.redone_steps}
