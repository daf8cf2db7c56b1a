"""``ezpz-tui top``: every rank's latest telemetry, recent step time, MFU and arrival lag at the
collectives, read once from the run directory. UI-free, and cheap at scale: each rank's files
are read from their last few KB only (the newest sample, the newest records), never whole, and
the arrival times at the collectives from the node digests' Flight Recorder progress (a rank's
own Flight Recorder file only where no digest covers it), so 1,024 ranks cost about 2,048 short
reads; rank
0's first record is read too, for the run's FLOPs per token: each rank's MFU is those at its
newest tokens/s, against the peak the last line names. An ended run's ranks are read from its
``digest.json`` instead (:mod:`~ezpz_tui.core.runs.digest`: what the finalizer read of these
same files at its end), one file whatever its ranks; without a readable one, from the files, and
a note says so.

A rank is ``slow`` by its own step time (:mod:`~ezpz_tui.core.watching.stragglers`) or, for any
script, with no metrics of its own, by arriving last at the collectives
(:func:`~ezpz_tui.core.watching.collectives.arrival_lags`): a running rank of a live run, or any
rank of an ended one, whose stragglers are those its summary recorded at its end
(:mod:`~ezpz_tui.core.watching.recorded`), else those its files show.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.digest import RunDigest, rank_statuses
from ezpz_tui.core.runs.ending import derived_state
from ezpz_tui.core.runs.record import positive_int, read_record
from ezpz_tui.core.runs.unreadable import named, unreadable, unusable_status, unusable_statuses
from ezpz_tui.core.watching.checkpoint_gauge import MAX_AGE_S, Gauge, gauge, read_on_disk
from ezpz_tui.core.watching.collectives import Lags, arrival_lags, lags_of, read_records
from ezpz_tui.core.watching.efficiency import Efficiency, PeakSettings, run_efficiency, suspect
from ezpz_tui.core.watching.finish import Finish, duration, expected_finish, total_steps
from ezpz_tui.core.watching.node_digests import NodeDigests, read_node_digests
from ezpz_tui.core.watching.recorded import recorded_verdicts
from ezpz_tui.core.watching.stragglers import SLOW_FACTOR, StepTimes
from ezpz_tui.core.watching.telemetry import human_bytes, percent, read_last, read_tail
from ezpz_tui.core.words import percent_of, rank_ranges
from runtime.efficiency.flops import FLOPS_PER_TOKEN
from runtime.metric_files import metric_files
from runtime.record_columns import RecordColumns, is_missing, parse_columns
from runtime.rundir import (
    RankState,
    RankStatus,
    RunDir,
    read_state,
    read_status,
    read_statuses,
)
from runtime.telemetry.record import Sample

RECORDS_TAIL = 2 << 10  # bytes of a metrics file read for its newest records (a dozen or more)
SAMPLE_TAIL = 2 << 10  # bytes of a telemetry file read for its newest sample


@dataclass(frozen=True)
class RankTop:
    """One rank's row."""

    rank: int
    host: str
    state: str
    sample: Sample | None
    step_time_s: float | None
    slow: bool
    mfu: float | None = None
    arrival_lag_s: float | None = None  # after the median rank, at the recent collectives
    slow_why: str | None = None

    def to_json(self, now: float) -> dict[str, Any]:
        row: dict[str, Any] = {"rank": self.rank, "host": self.host, "state": self.state}
        if self.sample is not None:
            row.update(json_fields(self.sample))
            row["sample_age_s"] = round(max(0.0, now - self.sample.time), 3)
        row["step_time_s"] = self.step_time_s
        lag = self.arrival_lag_s
        row["arrival_lag_s"] = None if lag is None else round(lag, 6)
        row["slow"] = self.slow
        row["mfu"] = self.mfu
        if self.slow_why:
            row["slow_why"] = self.slow_why
        return row


def json_fields(sample: Sample) -> dict[str, Any]:
    data = {k: v for k, v in vars(sample).items() if v is not None and k != "time"}
    if sample.mem_pct is not None:
        data["mem_pct"] = round(sample.mem_pct, 2)
    return data


@dataclass(frozen=True)
class Top:
    """The whole run's rows, with the median step time the slow flags compare against."""

    run: str
    rows: list[RankTop]
    median_step_s: float | None
    slow_factor: float
    notes: tuple[str, ...] = ()  # files that could not be used, one line each
    last_step: int | None = None  # the newest step any rank recorded
    total_steps: int | None = None  # the recorded command's --steps
    live: bool = False
    efficiency: Efficiency | None = None  # once the run said its FLOPs per token
    judged_at: float | None = None  # the end an ended run's summary judged its stragglers at
    checkpoint: Gauge | None = None  # its newest checkpoint, the crash's cost, the restore
    digests: NodeDigests | None = None  # a live run's node digests, when its rows came from them

    def finish(self, walltime_s: float | None) -> Finish | None:
        """When a live run will finish at the median step time, against ``walltime_s``."""
        if not self.live:
            return None
        return expected_finish(self.last_step, self.total_steps, self.median_step_s, walltime_s)

    def to_json(self, now: float, walltime_s: float | None = None) -> dict[str, Any]:
        finish = self.finish(walltime_s)
        return {
            "run": self.run,
            "time": now,
            "median_step_s": self.median_step_s,
            "last_step": self.last_step,
            "total_steps": self.total_steps,
            "walltime_left_s": walltime_s,
            "finish_in_s": finish.needs_s if finish else None,
            "walltime_reached_step": finish.reached if finish else None,
            "slow_factor": self.slow_factor,
            "slow": [row.rank for row in self.rows if row.slow],
            "slow_judged_at": self.judged_at,
            "ranks": [row.to_json(now) for row in self.rows],
            "notes": list(self.notes),
            "efficiency": None if self.efficiency is None else self.efficiency.as_dict(None),
            "checkpoint": None if self.checkpoint is None else self.checkpoint.to_json(),
            "node_digests": None if self.digests is None else _digests_json(self.digests),
        }


def _digests_json(digests: NodeDigests) -> dict[str, Any]:
    """Where a live run's rows came from: how many node digests, which ranks they held, the
    nodes whose writer is gone (their ranks read from their own files)."""
    return {
        "nodes": len(digests.fresh) + len(digests.stale),
        "ranks": rank_ranges(sorted(digests.covered)),
        "stale_hosts": sorted(node.host for node in digests.stale),
        "stale_ranks": rank_ranges(digests.stale_ranks),
    }


def read_top(
    run_dir: Path,
    slow_factor: float = SLOW_FACTOR,
    peaks: PeakSettings | None = None,
    max_age_s: float = MAX_AGE_S,
    read_mb_s: float | None = None,
) -> Top:
    """Every rank found in the run directory (by its status, telemetry or metrics file);
    ``peaks``: how the run's peak is found, for each rank's MFU; ``max_age_s``: the
    checkpoint gauge's ``[checkpoint] max_age``; ``read_mb_s``: the read rate an earlier
    look measured (a watch measures it once)."""
    run = RunDir(run_dir)
    state = read_state(run_dir)
    record, _ = read_record(run_dir)
    said = None if state.live else recorded_verdicts(run_dir)
    digests = read_node_digests(run.path, live=True) if state.live else None
    digest, found_notes = None, ()
    if digests is not None and (digests.fresh or digests.stale):  # live: O(nodes) reads
        statuses, unusable, samples, newest, notes = from_digests(run, digests, _world_size(record))
        steps, last = _from_newest(newest, slow_factor)
    else:
        # An ended run's figures from its digest, its verdicts from its summary; either
        # missing, from the ranks' files.
        digests = None
        found = rank_statuses(run.path, state, usable=said is not None)
        digest, found_notes = found.digest, found.notes
        statuses = {s.rank: s for s in found.read}
        unusable = found.unusable
        notes = list(unusable.values())
        if digest is not None:
            figures = _digested(digest)
            notes += figures.notes
            samples, steps, last = figures.samples, figures.steps, figures.last_step
        else:
            samples, newest = _file_figures(run, notes, not state.live)
            steps, last = _from_newest(newest, slow_factor)
    plan = record.get("plan")
    command = plan.get("command") if isinstance(plan, dict) else None
    total = None
    if isinstance(command, list) and all(isinstance(w, str) for w in command):
        total = total_steps(command)
    if said is None:
        flights = read_records(run_dir, state.live, time.time(), digests)
        notes += flights.notes
        lags = arrival_lags(flights.dumps, max(statuses, default=-1) + 1 or None)
        slow = slow_reasons(steps.times or StepTimes(slow_factor), lags)
    else:  # judged at its end, over the whole run
        lags = lags_of(said.get("arrival"))
        slow = recorded_reasons(said)
        notes += [str(note) for note in said.get("notes") or ()]
    notes += found_notes
    ranks = sorted(set(statuses) | set(unusable) | set(samples) | set(steps.ranks))
    efficiency = _efficiency(run, record, peaks or PeakSettings())
    rates = steps.tokens_per_s
    rows = []
    for rank in ranks:
        status = statuses.get(rank)
        if status is None:  # none yet, or one that says nothing: the notes say which
            word = RankState.UNKNOWN if rank in unusable else RankState.WAITING
        else:
            word = derived_state(rank, status.state, state)
        # A live run's running ranks; every rank of an ended run, as it was at the end.
        why = slow.get(rank) if word == RankState.RUNNING or not state.live else None
        rows.append(
            RankTop(
                rank=rank,
                host=(status.host or "") if status else "",
                state=str(word),
                sample=samples.get(rank),
                step_time_s=steps.recent.get(rank),
                slow=why is not None,
                mfu=None if efficiency is None else efficiency.mfu(rates.get(rank)),
                arrival_lag_s=lags.lag_s.get(rank),
                slow_why=why,
            )
        )
    as_of = time.time() if state.live or state.end is None else state.end
    checkpoint = gauge(
        read_on_disk(run_dir, read_mb_s),
        step=last,
        step_s=steps.median,
        as_of=as_of,
        max_age_s=max_age_s,
    )
    return Top(
        run_dir.name,
        rows,
        steps.median,
        slow_factor,
        tuple(notes),
        last_step=last,
        total_steps=total,
        live=state.live,
        efficiency=efficiency,
        judged_at=None if said is None else _number(said.get("judged_at")),
        checkpoint=checkpoint,
        digests=digests,
    )


# What a rank read gives top: statuses, unusable statuses' lines, samples, newest records, notes.
RankReads = tuple[
    dict[int, RankStatus],
    dict[int, str],
    dict[int, Sample | None],
    dict[int, RecordColumns],
    list[str],
]


def from_rank_files(run: RunDir, ended: bool) -> RankReads:
    """Every rank from its own files: a run without node digests (older, ended, or one whose
    every writer is gone)."""
    statuses: dict[int, RankStatus] = {s.rank: s for s in read_statuses(run.path)}
    unusable = unusable_statuses(run.path, statuses.values())
    notes = list(unusable.values())
    samples, newest = _file_figures(run, notes, ended)
    return statuses, unusable, samples, newest, notes


def _file_figures(
    run: RunDir, notes: list[str], ended: bool
) -> tuple[dict[int, Sample | None], dict[int, RecordColumns]]:
    """Each rank's newest telemetry sample and metric records from its own files (the tails
    only); a file that gives none is named in ``notes``."""
    samples = {}
    for path, rank in run.telemetries():
        samples[rank] = read_last(path, SAMPLE_TAIL)
        no = samples[rank] is None
        note = no_use(run.path, path, "sample", ended) if no else None
        notes += [note] if note else []
    return samples, newest_records(run, notes, ended)


def from_digests(run: RunDir, digests: NodeDigests, world: int | None) -> RankReads:
    """A live run's running ranks from their nodes' digests; from their own files, the ranks
    no fresh digest holds (a stale one's, said in the notes) and those whose History or process
    has ended (their status says how)."""
    covered = digests.covered
    everyone = range(world) if world else sorted({r for _, r in run.statuses()} | set(covered))
    own = [r for r in everyone if r not in covered or not covered[r].running]
    statuses: dict[int, RankStatus] = {}
    unusable: dict[int, str] = {}
    samples: dict[int, Sample | None] = {}
    newest: dict[int, RecordColumns] = {}
    notes = [*digests.notes, *([digests.note()] if digests.note() else [])]
    for rank, digest in covered.items():
        statuses[rank] = RankStatus(rank, host=digest.host, pid=digest.pid)
        samples[rank] = digest.sample
        columns = digest.columns()
        if columns is not None:
            newest[rank] = columns
    for rank in own:
        path = run.status(rank)
        status = read_status(path, rank)
        if status is not None:
            statuses[rank] = status
        elif (why := unusable_status(run.path, path)) is not None:
            unusable[rank] = why
            notes.append(why)
        if rank in covered:  # its end is in its status; its figures in the digest
            continue
        samples[rank] = read_last(run.telemetry(rank), SAMPLE_TAIL)
        data = read_tail(run.metrics(rank), RECORDS_TAIL)
        newest.update(parse_columns(data, rank).columns if data is not None else {})
    return statuses, unusable, samples, newest, notes


def _world_size(record: Mapping[str, Any]) -> int | None:
    sizes = record.get("sizes")
    return positive_int(sizes.get("world_size")) if isinstance(sizes, dict) else None


@dataclass(frozen=True)
class _Steps:
    """Each rank's recent step time and newest tokens/s, the ranks with records and their
    median: as :class:`StepTimes` judges them from the files, or as the digest recorded it."""

    ranks: list[int]
    recent: Mapping[int, float | None]
    tokens_per_s: Mapping[int, float]
    median: float | None
    times: StepTimes | None = None  # the files' judge, whose slow ranks a live run shows


def _from_newest(
    newest: Mapping[int, RecordColumns], slow_factor: float
) -> tuple[_Steps, int | None]:
    """The step times :class:`StepTimes` judges from each rank's newest records, and the
    highest step they hold."""
    steps = StepTimes(slow_factor)
    steps.update(newest)
    recorded = [w for c in newest.values() for w in c.steps if w is not None]
    recent = {rank: steps.recent(rank) for rank in steps.ranks}
    last = max(recorded) if recorded else None
    return _Steps(steps.ranks, recent, steps.tokens_per_s, steps.median, steps), last


@dataclass(frozen=True)
class _Digested:
    samples: dict[int, Sample | None]
    steps: _Steps
    last_step: int | None
    notes: list[str]


def _digested(digest: RunDigest) -> _Digested:
    """What ``top`` reads of each rank's telemetry and metrics files, as the finalizer read it
    at the run's end (:mod:`ezpz_tui.core.watching.digesting`)."""
    world = range(digest.world)
    samples = {rank: digest.sample(rank) for rank in world if digest.has_telemetry(rank)}
    ranks = [rank for rank in world if digest.has_records(rank)]
    rates = {rank: r for rank in ranks if (r := digest.tokens_per_s(rank)) is not None}
    recent = {rank: digest.step_time(rank) for rank in ranks}
    reads = digest.reads
    said = [*_lines(reads.get("telemetry_notes")), *_lines(reads.get("metrics_notes"))]
    median, last = _number(reads.get("median_step_s")), reads.get("last_step")
    last = last if isinstance(last, int) and not isinstance(last, bool) else None
    return _Digested(samples, _Steps(ranks, recent, rates, median), last, said)


def _lines(value: Any) -> list[str]:
    return [str(line) for line in value] if isinstance(value, list) else []


def slow_reasons(steps: StepTimes, lags: Lags) -> dict[int, str]:
    """Why each slow rank is: its own step time first, else its arrival at the collectives."""
    why = {rank: lags.why(rank) for rank in lags.slow}
    for rank in steps.slow:
        why[rank] = f"step time over {steps.slow_factor:g}× the median"
    return dict(sorted(why.items()))


def recorded_reasons(section: Mapping[str, Any]) -> dict[int, str]:
    """The stragglers an ended run's summary names, and why each."""
    out = {}
    for entry in section.get("stragglers") or ():
        rank = entry.get("rank") if isinstance(entry, dict) else None
        if isinstance(rank, int):
            out[rank] = str(entry.get("why") or "slow")
    return out


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None


def _efficiency(run: RunDir, record: dict[str, Any], peaks: PeakSettings) -> Efficiency | None:
    """The run's efficiency, from rank 0's first record's FLOPs per token; None without."""
    try:
        with open(run.metrics(0), "rb") as f:
            head = f.read(RECORDS_TAIL)
    except OSError:
        return None
    first = parse_columns(head[: head.find(b"\n") + 1], 0).columns.get(0)
    said = first.metrics.get(FLOPS_PER_TOKEN) if first is not None else None
    fpt = next((v for v in said or () if not is_missing(v)), None)
    if fpt is None:
        return None
    sizes = record.get("sizes")
    world = positive_int(sizes.get("world_size")) if isinstance(sizes, dict) else None
    return run_efficiency(run.path, record, fpt, world, peaks)


def no_use(run_dir: Path, path: Path, what: str, ended: bool) -> str | None:
    """Why a file gave nothing: it cannot be read, or (the run has ended: no line of it is
    still being written) its end holds no readable ``what``; None when it is empty (a rank
    that has not got that far is no fault)."""
    why = unreadable(run_dir, path)
    if why is not None or not ended:
        return why
    try:
        size = path.stat().st_size
    except OSError:
        return None
    return f"{named(run_dir, path)} holds no readable {what} at its end" if size else None


def newest_records(run: RunDir, notes: list[str], ended: bool) -> dict[int, RecordColumns]:
    """Each rank's newest records, from its metrics file's last few KB; a line in ``notes``
    for each file that gave none (:func:`no_use`)."""
    out: dict[int, RecordColumns] = {}
    for path, rank in metric_files(run.path):
        data = read_tail(path, RECORDS_TAIL)
        found = parse_columns(data, rank).columns if data is not None else {}
        note = None if found else no_use(run.path, path, "record", ended)
        notes += [note] if note else []
        for got, columns in found.items():
            out[got] = columns
    return out


HEAD = (
    ("RANK", ">5"),
    ("HOST", "<14"),
    ("STATE", "<9"),
    ("CPU", ">6"),
    ("RSS", ">6"),
    ("UTIL", ">5"),
    ("MEM", ">6"),
    ("MEM%", ">5"),
    ("POWER", ">6"),
    ("TEMP", ">5"),
    ("STEP", ">8"),
    ("MFU", ">6"),
    ("LAG", ">7"),
    ("AGE", ">5"),
)


def format_top(top: Top, now: float | None = None, walltime_s: float | None = None) -> list[str]:
    """The table as lines, then one line naming the slow ranks (or saying there are none),
    and for a live run one with its expected finish against the walltime left."""
    now = time.time() if now is None else now
    lines = [" ".join(f"{name:{width}}" for name, width in HEAD)]
    for row in top.rows:
        s = row.sample
        cells = (
            row.rank,
            row.host.split(".")[0][:14],
            "slow" if row.slow and row.state == RankState.RUNNING else row.state,
            percent(s.cpu_pct) if s else "-",
            human_bytes(s.rss_bytes) if s else "-",
            percent(s.util_pct) if s else "-",
            human_bytes(s.mem_used_bytes) if s else "-",
            percent(s.mem_pct) if s else "-",
            "-" if s is None or s.power_w is None else f"{s.power_w:.0f}W",
            "-" if s is None or s.temp_c is None else f"{s.temp_c:.0f}C",
            "-" if row.step_time_s is None else f"{row.step_time_s:.3f}s",
            percent_of(row.mfu),
            "-" if row.arrival_lag_s is None else f"{row.arrival_lag_s * 1000:+.0f}ms",
            "-" if s is None else f"{max(0.0, now - s.time):.0f}s",
        )
        lines.append(
            " ".join(f"{cell:{width}}" for cell, (_, width) in zip(cells, HEAD, strict=True))
        )
    lines.append(_slow_line(top))
    finish = top.finish(walltime_s)
    if finish is not None:
        left = "-" if walltime_s is None else duration(walltime_s)
        lines.append(
            f"step {top.last_step} of {top.total_steps}: {finish.words()}; walltime {left}"
        )
    eff = top.efficiency
    if eff is not None:
        lines.append(f"MFU {eff.why_not}" if eff.peak is None else f"MFU of {eff.peak.label}")
        lines += _suspect_lines(top)
    if top.checkpoint is not None:
        lines += top.checkpoint.lines()
    return lines + list(top.notes)


def _suspect_lines(top: Top) -> list[str]:
    """``MFU of ranks 0-3 suspect: below 0.5% of ...``: the ranks whose MFU is not to be
    believed as it stands, by reason."""
    peak = top.efficiency.peak if top.efficiency is not None else None
    by_reason: dict[str, list[int]] = {}
    for row in top.rows:
        why = suspect(row.mfu, peak)
        if why:
            by_reason.setdefault(why, []).append(row.rank)
    return [
        f"MFU of rank{'s' * (len(ranks) > 1)} {rank_ranges(ranks)} {why}"
        for why, ranks in by_reason.items()
    ]


def _slow_line(top: Top) -> str:
    slow = [row for row in top.rows if row.slow]
    hosts = len({row.host for row in top.rows if row.host})
    head = f"{len(top.rows)} ranks on {hosts} host{'s' * (hosts != 1)}"
    late = [row for row in slow if row.slow_why and row.slow_why.startswith("arrives")]
    if late:  # for any script: no step time needed
        said = "; ".join(f"rank {row.rank} {row.slow_why}" for row in late[:4])
        more = " …" if len(late) > 4 else ""
        head = f"{head}; slow at the collectives: {said}{more}"
        slow = [row for row in slow if row not in late]
    if top.median_step_s is None:
        return head if late else f"{head}; no step times yet"
    median = f"median step {top.median_step_s:.3f}s"
    if len(top.rows) < 2:
        return f"{head}; {median}"
    if not slow:
        return f"{head}; {median}; no rank slower than {top.slow_factor:g}× it"
    worst = max(slow, key=lambda row: row.step_time_s or 0.0)
    named = ", ".join(str(row.rank) for row in slow[:8]) + (" …" if len(slow) > 8 else "")
    ratio = (worst.step_time_s or 0.0) / top.median_step_s
    return f"{head}; {median}; slow: rank {named} (worst {ratio:.1f}× the median)"
