"""Which rank never entered which collective, and which rank everyone waits for: the ranks'
Flight Recorder entries (``flight/rank-NNNNN.json``, :mod:`runtime.flight`) matched per group.

A process group's collectives carry the same sequence number on every member, so matching
them needs no clock:

* **missing**: the first sequence number some members entered and others did not, while those
  that entered have waited in it for a while. The ranks that entered wait; those that did not
  are named with the last collective they did enter. A rank's file is rewritten within one of
  its intervals of a new entry, so a member whose file still lacks the collective after two
  intervals of the others' wait has not entered it.
* **mismatch**: at one sequence number the members called different ops, dtypes or sizes (for
  the ops whose sizes must agree), which hangs or corrupts a job in ways its stacks do not show.
* **arrival lag**: in a data-parallel job every rank's step takes the slowest rank's time, so
  step times cannot tell the straggler apart; the time each rank called the same collective
  can. A rank that is the last to arrive at most of the recent collectives (at least
  :data:`LAG_MIN_CALLS` of them), by more than :data:`LAG_MIN_S` after their median, is
  ``slow``. The times are the hosts' wall clocks:
  skew between hosts shows up as lag (docs/pitfalls.md).

torch's own analyzer (``tools/flight_recorder``) does the first two after the fact over full
dumps; this reads the newest entries while the run is live. Once it has ended, the verdicts are
those as of its end: recorded in its summary by the finalizer
(:mod:`~ezpz_tui.core.watching.recorded`), else judged from the files at its end time. UI-free,
and never raises on a bad file: it is named in ``notes``.
"""

from __future__ import annotations

import contextlib
import json
import statistics
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.record import positive_int, read_record
from ezpz_tui.core.runs.unreadable import named
from ezpz_tui.core.watching.flight_progress import progress_of, read_progress
from ezpz_tui.core.watching.node_digests import NodeDigests
from ezpz_tui.core.watching.recorded import Recorded, rank_figures, recorded_verdicts
from ezpz_tui.core.words import rank_ranges
from runtime.rundir import RunDir, read_state

DEFAULT_INTERVAL_S = 5.0  # runtime.flight's, for a file that does not say its own
LAG_MIN_S = 0.010  # under this a rank's lag is noise (scheduling, clocks), not a straggler
LAG_MIN_CALLS = 8  # fewer collectives in common (a job's set-up, say) are no straggler's sign
RECENT = 32  # collectives the lag is the median over
DEFAULT_GROUP = "default_pg"
UNKNOWN_OP = "?"  # a collective whose entry a record no longer holds: only its number is known
# Ops whose members legitimately pass different sizes.
_SIZES_MAY_DIFFER = ("all_to_all", "alltoall", "gather", "scatter", "send", "recv")
_DTYPE_WORDS = {"Float": "float", "Double": "double", "Half": "half", "BFloat16": "bfloat16"}


@dataclass(frozen=True)
class Call:
    """One rank's entry for one collective."""

    rank: int
    seq: int
    group: str  # the process group's name, the same on every member
    pg_id: int | None  # its index in the process, the key of the recorder's status
    desc: str  # its description: "default_pg", or what the program named it
    op: str  # "all_reduce" (torch's "gloo:all_reduce" without the backend)
    sizes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...]
    created_ns: int | None

    def signature(
        self,
    ) -> tuple[str, tuple[str, ...] | None, tuple[tuple[int, ...], ...] | None]:
        """What all members must agree on: the op, and the dtypes and sizes where they must.
        Where sizes may differ, so may the tensors' presence: a scatter's or a gather's members
        other than its root hold none (torch.distributed.checkpoint's plans go through them)."""
        free = any(word in self.op for word in _SIZES_MAY_DIFFER) and self.op != "all_gather"
        return (self.op, None, None) if free else (self.op, self.dtypes, self.sizes)

    def what(self) -> str:
        """``4 floats``, ``2x3 longs``: the tensors it was called with."""
        if not self.sizes:
            return "no tensors"
        parts = []
        for shape, dtype in zip(self.sizes, self.dtypes or ("",) * len(self.sizes), strict=False):
            count = 1
            for n in shape:
                count *= n
            word = _DTYPE_WORDS.get(dtype, dtype.lower() or "element")
            plural = "" if count == 1 else "s"
            dims = "x".join(map(str, shape)) if len(shape) > 1 else str(count)
            parts.append(f"{dims} {word}{plural}")
        return ", ".join(parts)

    def name(self) -> str:
        return f"{self.op} #{self.seq}" if self.op != UNKNOWN_OP else f"collective #{self.seq}"

    def described(self) -> str:
        """``all_reduce #6 (default group, 4 floats)``; without the tensors where the entry
        is no longer known (a waiting rank's progress has gone past it)."""
        what = f", {self.what()}" if self.op != UNKNOWN_OP else ""
        return f"{self.name()} ({_group_words(self)}{what})"


@dataclass(frozen=True)
class Dump:
    """One rank's record: its file (``flight/rank-N.json``) or the progress its node's digest
    holds (:func:`parse_progress`): its entries by group and sequence number, how far each
    group got, when it entered the newest collectives, and when it was looked at."""

    rank: int
    time: float
    interval_s: float
    calls: Mapping[tuple[str, int], Call]  # what it called, where the record says
    members: Mapping[str, tuple[int, ...]]  # a group's ranks, where the recorder knows them
    newest: Mapping[str, int] = field(default_factory=dict)  # by group: the newest seq entered
    completed: Mapping[str, int] = field(default_factory=dict)  # by group: the newest completed
    arrived: Mapping[str, Mapping[int, int]] = field(default_factory=dict)  # group, seq: ns
    descs: Mapping[str, str] = field(default_factory=dict)  # by group: its description
    # Whether ``time`` is when the rank's state was looked at (its progress, or a file written
    # when asked or at its end); not for a file of older runs, rewritten only when it changed.
    looked: bool = False
    # By pg_id, the newest seq entered of groups none of its entries names (other ranks' may).
    unnamed: Mapping[int, int] = field(default_factory=dict)
    at_end: bool = False  # a file the rank wrote at its end: every entry it had

    def last_in(self, group: str) -> Call | None:
        seqs = [seq for g, seq in self.calls if g == group]
        return self.calls[(group, max(seqs))] if seqs else None


def _group_words(call: Call) -> str:
    if call.desc == DEFAULT_GROUP:
        return "default group"
    return f"group {call.group}" + (f" ({call.desc})" if call.desc not in ("", "undefined") else "")


def parse_dump(data: Mapping[str, Any], rank: int) -> Dump:
    """A rank's file as written by :mod:`runtime.flight`; entries without a collective
    sequence number (point-to-point) are left out."""
    calls: dict[tuple[str, int], Call] = {}
    for entry in data.get("entries") or ():
        seq, pg = entry.get("collective_seq_id"), entry.get("process_group") or ["", ""]
        if not isinstance(seq, int) or seq <= 0 or entry.get("is_p2p"):
            continue
        op = str(entry.get("profiling_name") or "?").rpartition(":")[2]
        call = Call(
            rank=rank,
            seq=seq,
            group=str(pg[0]),
            pg_id=entry.get("pg_id") if isinstance(entry.get("pg_id"), int) else None,
            desc=str(pg[1]) if len(pg) > 1 else "",
            op=op,
            sizes=tuple(tuple(int(n) for n in s) for s in entry.get("input_sizes") or ()),
            dtypes=tuple(str(d) for d in entry.get("input_dtypes") or ()),
            created_ns=entry.get("time_created_ns") or None,
        )
        calls[(call.group, seq)] = call
    members: dict[str, tuple[int, ...]] = {}
    for name, config in (data.get("pg_config") or {}).items():
        ranks = config.get("ranks") if isinstance(config, dict) else None
        if isinstance(ranks, str):
            try:
                ranks = json.loads(ranks)
            except ValueError:
                ranks = None
        if name and isinstance(ranks, list) and ranks:
            members[str(name)] = tuple(int(r) for r in ranks)
    enqueued: dict[int, int] = {}
    done: dict[int, int] = {}
    for pg_id, status in (data.get("pg_status") or {}).items():
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            enqueued[int(pg_id)] = int(status.get("last_enqueued_collective"))
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            done[int(pg_id)] = int(status.get("last_completed_collective"))
    # The status is by the group's index in the process: its entries say which group that is.
    names = {c.pg_id: c.group for c in calls.values() if c.pg_id is not None}
    newest: dict[str, int] = {}
    for call in calls.values():
        newest[call.group] = max(newest.get(call.group, 0), call.seq)
    for pg_id, seq in enqueued.items():
        if pg_id in names and seq > newest[names[pg_id]]:
            newest[names[pg_id]] = seq
    unnamed = {pg_id: seq for pg_id, seq in enqueued.items() if pg_id not in names and seq > 0}
    arrived: dict[str, dict[int, int]] = {}
    for (group, seq), call in calls.items():
        if call.created_ns:
            arrived.setdefault(group, {})[seq] = call.created_ns
    interval = data.get("interval_s")
    return Dump(
        rank=rank,
        time=float(data.get("time") or 0.0),
        interval_s=float(interval) if isinstance(interval, (int, float)) else DEFAULT_INTERVAL_S,
        calls=calls,
        members=members,
        newest=newest,
        completed={names[i]: seq for i, seq in done.items() if i in names},
        arrived=arrived,
        descs={c.group: c.desc for c in calls.values()},
        looked=isinstance(data.get("written"), str),  # asked for, or at its end
        unnamed=unnamed,
        at_end=data.get("written") == "end",
    )


def parse_progress(data: Mapping[str, Any], rank: int, written: float = 0.0) -> Dump:
    """A rank's progress as :func:`runtime.flight.progress` reports it into its node's digest:
    per group the newest collective entered (with its op, sizes and dtypes) and completed, and
    when it entered the newest few. As of when it was looked at, or when the digest holding it
    was ``written`` less the rank's interval (a rank reports its progress only when it changed),
    whichever is later. Raises ValueError, TypeError, KeyError or AttributeError on what is
    not that."""
    calls: dict[tuple[str, int], Call] = {}
    newest: dict[str, int] = {}
    completed: dict[str, int] = {}
    arrived: dict[str, dict[int, int]] = {}
    descs: dict[str, str] = {}
    for group, said in data["groups"].items():
        group, desc = str(group), str(said.get("desc") or "")
        first, t0 = int(said["seq"]), int(said["t_ns"])
        after = said.get("dt_us") or ()
        times = {first + 1 + i: t0 + us * 1000 for i, us in enumerate(after)}
        times[first] = t0
        arrived[group] = times
        last = first + len(after)
        calls[(group, last)] = Call(
            rank=rank,
            seq=last,
            group=group,
            pg_id=None,
            desc=desc,
            op=str(said.get("op") or UNKNOWN_OP),
            sizes=tuple(tuple(size) for size in said.get("sizes") or ()),
            dtypes=tuple(said.get("dtypes") or ()),
            created_ns=times[last] or None,
        )
        newest[group] = max(last, int(said.get("entered") or 0))
        done = said.get("completed")
        if isinstance(done, int):
            completed[group] = done
        descs[group] = desc
    every = data.get("every")
    every = float(every) if isinstance(every, (int, float)) else DEFAULT_INTERVAL_S
    return Dump(
        rank=rank,
        time=max(float(data["at"]), written - every),
        interval_s=every,
        calls=calls,
        members={},
        newest=newest,
        completed=completed,
        arrived=arrived,
        descs=descs,
        looked=True,
    )


@dataclass
class Flights:
    """Every rank's dump that could be read, and a line for each that could not."""

    dumps: dict[int, Dump] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    world: int | None = None  # the run's ranks, where :func:`read_records` found them


def read_flights(run_dir: Path, skip: Collection[int] = ()) -> Flights:
    """The ranks' Flight Recorder files of ``run_dir``, but ``skip``'s; none when the recorder
    was off or nobody asked a rank for its entries yet."""
    run = RunDir(run_dir)
    found = Flights()
    for path, rank in run.flights():
        if rank in skip:
            continue
        try:
            data = json.loads(path.read_bytes())
            found.dumps[rank] = parse_dump(data, rank)
        except (OSError, ValueError, TypeError, AttributeError, IndexError) as exc:
            why = "not readable" if isinstance(exc, OSError) else "not a Flight Recorder record"
            found.notes.append(f"{named(run.path, path)}: {why}")
    return found


NO_DIGEST = (
    "no node digest holds the ranks' Flight Recorder progress: judged from their files as "
    "last written (`ezpz-tui stacks` asks the ranks for new ones)"
)


def read_records(
    run_dir: Path, live: bool, now: float, digests: NodeDigests | None = None
) -> Flights:
    """Every rank's Flight Recorder record: while the run is live, the progress its node's
    digest holds (:mod:`~ezpz_tui.core.watching.flight_progress`: O(nodes) small reads), its
    file only for a rank no digest covers or whose digest is stale, where that file is newer
    (asked for since); ``flight/`` is not even listed where the digests cover every rank. Once
    the run has ended, each rank's file, written at its end with every entry, and the progress
    for a rank that left none or an older one (killed). A live run without digests (an older
    run, or node digests turned off) is read from its files, and says so. ``digests``: the
    run's, where the caller read them already (and says their notes)."""
    world = run_world(run_dir)
    held = read_progress(run_dir, live, now) if digests is None else progress_of(digests, False)
    found = Flights(notes=list(held.notes), world=world)
    for rank, value in held.progress.items():
        try:
            found.dumps[rank] = parse_progress(value, rank, held.written.get(rank, 0.0))
        except (ValueError, TypeError, KeyError, AttributeError):
            found.notes.append(
                f"rank {rank}: its node digest's Flight Recorder progress is not one"
            )
    covered = set(found.dumps) - held.stale
    if live and world is not None and covered >= set(range(world)):
        return found
    if live and found.dumps:
        files = read_flights(run_dir, skip=covered)
    else:
        files = read_flights(run_dir)
        if live and files.dumps:
            found.notes.append(NO_DIGEST)
    found.notes += files.notes
    for rank, dump in files.dumps.items():
        held = found.dumps.get(rank)
        if held is None or dump.time >= held.time or (dump.at_end and not live):
            found.dumps[rank] = dump
    return found


def run_world(run_dir: Path) -> int | None:
    """The run's ranks: its ``run.toml``'s world size, else the highest rank with a status
    file (one listing of ``status/``), plus one; None for neither."""
    record, _ = read_record(run_dir)
    sizes = record.get("sizes")
    world = positive_int(sizes.get("world_size")) if isinstance(sizes, dict) else None
    if world is None:
        world = max((r for _, r in RunDir(run_dir).statuses()), default=-1) + 1 or None
    return world


def _named(dumps: Mapping[int, Dump]) -> Mapping[int, Dump]:
    """``dumps`` with the groups a rank's status counts but its entries no longer name (its
    newest entries all in other groups) named by the pg_id other ranks' entries give them."""
    odd = [d for d in dumps.values() if d.unnamed]
    if not odd:
        return dumps
    names = {
        c.pg_id: c.group for d in dumps.values() for c in d.calls.values() if c.pg_id is not None
    }
    out = dict(dumps)
    for dump in odd:
        newest = dict(dump.newest)
        for pg_id, seq in dump.unnamed.items():
            if pg_id in names and seq > newest.get(names[pg_id], 0):
                newest[names[pg_id]] = seq
        out[dump.rank] = replace(dump, newest=newest, unnamed={})
    return out


def _groups(dumps: Mapping[int, Dump], world: int | None) -> dict[str, tuple[int, ...]]:
    """Each group's members: the recorder's list where it has one (NCCL), every rank for the
    default group, else the ranks whose records name the group (gloo keeps no list)."""
    everyone = tuple(range(world)) if world else tuple(sorted(dumps))
    seen: dict[str, set[int]] = {}
    defaults: set[str] = set()
    for dump in dumps.values():
        for group in dump.newest:
            seen.setdefault(group, set()).add(dump.rank)
        defaults.update(g for g, desc in dump.descs.items() if desc == DEFAULT_GROUP)
    out: dict[str, tuple[int, ...]] = {}
    for group, ranks in seen.items():
        listed = next((d.members[group] for d in dumps.values() if group in d.members), None)
        out[group] = listed or (everyone if group in defaults else tuple(sorted(ranks)))
    return out


# --- the verdicts -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Missing:
    """A collective some members entered and others never did."""

    collective: Call  # as a waiting rank called it
    waiting: tuple[int, ...]
    missing: tuple[int, ...]
    waiting_s: float
    last: Mapping[int, Call | None]  # each missing rank's last collective in the group
    last_seq: Mapping[int, int | None] = field(default_factory=dict)  # where its entry is gone
    no_record: tuple[int, ...] = ()  # missing ranks with no Flight Recorder file at all

    def headline(self) -> str:
        return (
            f"{self.collective.described()}: {_ranks(self.waiting)} waiting for "
            f"{self.waiting_s:.0f} s; {_ranks(self.missing)} never entered it"
        )

    def lines(self) -> list[str]:
        """The headline, then each missing rank's last collective (the first few)."""
        out = [self.headline()]
        by_last: dict[str, list[int]] = {}
        for rank in self.missing:
            call = self.last.get(rank)
            seq = self.last_seq.get(rank)
            if rank in self.no_record:
                said = "no Flight Recorder record"
            elif call is not None:
                said = f"last collective {call.name()}"
            else:
                said = f"last collective #{seq}" if seq else "no collective in the group"
            by_last.setdefault(said, []).append(rank)
        out += [f"  {_ranks(ranks)}: {said}" for said, ranks in by_last.items()]
        return out

    def to_json(self) -> dict[str, Any]:
        c = self.collective
        return {
            "kind": "missing",
            "collective": c.op if c.op != UNKNOWN_OP else None,
            "seq": c.seq,
            "group": c.group,
            "group_desc": c.desc,
            "sizes": [list(s) for s in c.sizes],
            "dtypes": list(c.dtypes),
            "waiting": list(self.waiting),
            "missing": list(self.missing),
            "waiting_s": round(self.waiting_s, 3),
            "last_collective": {
                str(r): (
                    {"collective": call.op, "seq": call.seq}
                    if call is not None
                    else {"collective": None, "seq": self.last_seq.get(r)}
                    if self.last_seq.get(r)
                    else None
                )
                for r, call in self.last.items()
            },
            "headline": self.headline(),
        }


@dataclass(frozen=True)
class Mismatch:
    """Members that called different things at the same sequence number."""

    seq: int
    group: str
    desc: str
    calls: tuple[tuple[tuple[int, ...], Call], ...]  # (ranks, what they called), most first

    def headline(self) -> str:
        (_, first), *_ = self.calls
        said = "; ".join(f"{_ranks(r)} {c.op} with {c.what()}" for r, c in self.calls)
        return f"mismatch at collective #{self.seq} ({_group_words(first)}): {said}"

    def lines(self) -> list[str]:
        return [self.headline()]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "mismatch",
            "seq": self.seq,
            "group": self.group,
            "group_desc": self.desc,
            "calls": [
                {
                    "ranks": list(ranks),
                    "collective": c.op,
                    "sizes": [list(s) for s in c.sizes],
                    "dtypes": list(c.dtypes),
                }
                for ranks, c in self.calls
            ],
            "headline": self.headline(),
        }


def _ranks(ranks: Sequence[int]) -> str:
    return f"{'rank' if len(ranks) == 1 else 'ranks'} {rank_ranges(ranks)}"


def find_mismatch(dumps: Mapping[int, Dump]) -> Mismatch | None:
    """The lowest-numbered collective whose members disagree, over every group."""
    by_key: dict[tuple[str, int], dict[Any, list[Call]]] = {}
    for dump in dumps.values():
        for key, call in dump.calls.items():
            by_key.setdefault(key, {}).setdefault(call.signature(), []).append(call)
    bad = [key for key, kinds in by_key.items() if len(kinds) > 1]
    if not bad:
        return None
    group, seq = min(bad, key=lambda k: (k[1], k[0]))
    kinds = sorted(by_key[(group, seq)].values(), key=lambda calls: (-len(calls), calls[0].rank))
    calls = tuple((tuple(sorted(c.rank for c in calls)), calls[0]) for calls in kinds)
    return Mismatch(seq, group, calls[0][1].desc, calls)


def find_missing(dumps: Mapping[int, Dump], now: float, world: int | None = None) -> Missing | None:
    """The first collective, over every group, that some members entered and waited in for
    two of their intervals while the others' records, looked at since, still lack it; None
    when there is none."""
    found: list[Missing] = []
    dumps = _named(dumps)
    for group, members in _groups(dumps, world).items():
        newest = {r: dumps[r].newest.get(group) if r in dumps else None for r in members}
        if not any(newest.values()):
            continue
        seq = min(n or 0 for n in newest.values()) + 1
        waiting = tuple(r for r, n in newest.items() if n is not None and n >= seq)
        missing = tuple(r for r, n in newest.items() if n is None or n < seq)
        if not waiting or not missing:
            continue
        if any(dumps[r].completed.get(group, -1) >= seq for r in waiting):
            continue  # it completed, so every member entered it: a record is behind
        since = _entered(dumps, waiting, group, seq)
        if since is None:  # the waiting ranks' records no longer reach back to it
            continue
        waited = now - since
        interval = max((dumps[r].interval_s for r in members if r in dumps), default=0.0)
        if waited < 2 * interval:
            continue
        if any(r in dumps and dumps[r].looked and dumps[r].time < since for r in missing):
            continue  # a rank's record is older than the wait: not judged until it is looked at
        first = next(
            (c for r in waiting if (c := dumps[r].calls.get((group, seq))) is not None), None
        )
        if first is None:
            desc = next((d for r in waiting if (d := dumps[r].descs.get(group)) is not None), "")
            first = Call(waiting[0], seq, group, None, desc, UNKNOWN_OP, (), (), None)
        found.append(
            Missing(
                collective=first,
                waiting=waiting,
                missing=missing,
                waiting_s=waited,
                last={r: _last_call(dumps.get(r), group, newest[r]) for r in missing},
                last_seq={r: newest[r] for r in missing},
                no_record=tuple(r for r in missing if r not in dumps),
            )
        )
    return min(found, key=lambda m: (-m.waiting_s, m.collective.seq), default=None)


def _entered(
    dumps: Mapping[int, Dump], waiting: Sequence[int], group: str, seq: int
) -> float | None:
    """When the first of ``waiting`` entered collective ``seq``: its record's time of it, else
    (its record's newest arrivals all came later) no later than the oldest of those."""
    at = [t for r in waiting if (t := dumps[r].arrived.get(group, {}).get(seq))]
    if not at:
        for r in waiting:
            later = [t for s, t in dumps[r].arrived.get(group, {}).items() if s > seq]
            at += [min(later)] if later else []
    return min(at) / 1e9 if at else None


def _last_call(dump: Dump | None, group: str, seq: int | None) -> Call | None:
    return None if dump is None or seq is None else dump.calls.get((group, seq))


def verdict(flights: Flights, now: float, world: int | None = None) -> Verdict | None:
    """A mismatch first (it is the cause when both show), else a missing rank."""
    return find_mismatch(flights.dumps) or find_missing(flights.dumps, now, world)


# --- arrival lag --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lags:
    """Each rank's median arrival lag over the recent collectives all members called."""

    lag_s: Mapping[int, float]
    last_share: Mapping[int, float]  # of those collectives, the share it arrived last at
    op: str | None  # the collective most of them were
    slow: frozenset[int]

    def why(self, rank: int) -> str:
        return f"arrives {self.lag_s[rank] * 1000:.0f} ms after the median at {self.op}"

    def to_json(self) -> dict[str, Any]:
        return {
            "collective": self.op,
            "lag_s": {str(r): round(lag, 6) for r, lag in sorted(self.lag_s.items())},
            "last_share": {str(r): round(s, 3) for r, s in sorted(self.last_share.items())},
            "slow": sorted(self.slow),
        }


def lags_of(data: Any) -> Lags:
    """:meth:`Lags.to_json` read back; no lags from what is not that."""
    if not isinstance(data, Mapping):
        return Lags({}, {}, None, frozenset())
    slow = data.get("slow") if isinstance(data.get("slow"), list) else []
    op = data.get("collective")
    return Lags(
        rank_figures(data.get("lag_s")),
        rank_figures(data.get("last_share")),
        op if isinstance(op, str) else None,
        frozenset(r for r in slow if isinstance(r, int)),
    )


@dataclass(frozen=True)
class Late:
    """The ranks that arrived last at the collectives: an ended run's stragglers, for ``why``."""

    lags: Lags
    shown: int = 8  # ranks named one a line before "…"

    def headline(self) -> str:
        slow = sorted(self.lags.slow)
        return f"{_ranks(slow)} arrived last at the collectives ({self.lags.op})"

    def lines(self) -> list[str]:
        slow = sorted(self.lags.slow)
        out = [f"rank {r} {self.lags.why(r)}" for r in slow[: self.shown]]
        return out + ([f"… and {len(slow) - self.shown} more"] if len(slow) > self.shown else [])

    def to_json(self) -> dict[str, Any]:
        slow = sorted(self.lags.slow)
        return {
            "kind": "late",
            "collective": self.lags.op,
            "ranks": slow,
            "arrival_lag_s": {str(r): round(self.lags.lag_s[r], 6) for r in slow},
            "headline": self.headline(),
        }


Verdict = Missing | Mismatch | Late | Recorded


def together(found: Verdict | None, late: Late | None) -> Verdict | None:
    """A hang or mismatch and the stragglers as one verdict (``why`` shows one); either alone
    as it is."""
    if found is None or late is None:
        return found or late
    data = {**found.to_json(), "late": late.to_json(), "lines": found.lines() + late.lines()}
    return Recorded(data)


def arrival_lags(dumps: Mapping[int, Dump], world: int | None = None, recent: int = RECENT) -> Lags:
    """Lags from the newest ``recent`` collectives of each group that every member's record
    holds the arrival of; slow: last at over half of them (:data:`LAG_MIN_CALLS` or more) and
    a median lag of :data:`LAG_MIN_S` or more."""
    lags: dict[int, list[float]] = {}
    lasts: Counter[int] = Counter()
    ops: Counter[str] = Counter()
    for group, members in _groups(dumps, world).items():
        if len(members) < 2 or any(r not in dumps for r in members):
            continue
        held = [dumps[r].arrived.get(group, {}) for r in members]
        seqs = set(held[0]).intersection(*held[1:])
        named: Counter[str] = Counter()
        for seq in sorted(seqs)[-recent:]:
            times = [at[seq] for at in held]
            middle = statistics.median(times)
            for rank, t in zip(members, times, strict=True):
                lags.setdefault(rank, []).append((t - middle) / 1e9)
            lasts[members[times.index(max(times))]] += 1
            call = dumps[members[0]].calls.get((group, seq))
            if call is not None and call.op != UNKNOWN_OP:
                named[call.op] += 1
        last = dumps[members[0]].last_in(group)  # a progress names the newest op alone
        if not named and seqs and last is not None and last.op != UNKNOWN_OP:
            named[last.op] += 1
        ops.update(named)
    lag_s = {rank: statistics.median(values) for rank, values in lags.items()}
    share = {rank: lasts[rank] / len(values) for rank, values in lags.items()}
    slow = frozenset(
        r
        for r, lag in lag_s.items()
        if lag >= LAG_MIN_S and share[r] > 0.5 and len(lags[r]) >= LAG_MIN_CALLS
    )
    return Lags(lag_s, share, ops.most_common(1)[0][0] if ops else None, slow)


def verdict_json(found: Verdict | None) -> dict[str, Any] | None:
    return None if found is None else found.to_json()


def lines_of(found: Verdict | None, notes: Iterable[str] = ()) -> list[str]:
    """The verdict as lines under "Collectives:", or nothing."""
    if found is None:
        return list(notes)
    return ["Collectives (Flight Recorder):", *(f"  {line}" for line in found.lines()), *notes]


@dataclass(frozen=True)
class Reading:
    """What a run's Flight Recorder files say at one look: the verdict, the lags, bad files."""

    verdict: Verdict | None
    lags: Lags
    notes: tuple[str, ...] = ()

    @property
    def missing(self) -> frozenset[int]:
        """The ranks that never entered the collective the others wait in."""
        found = self.verdict
        return frozenset(found.missing) if isinstance(found, (Missing, Recorded)) else frozenset()

    @property
    def late(self) -> Late | None:
        """The ranks that arrive last, as a verdict; None when no rank does."""
        return Late(self.lags) if self.lags.slow else None


def read_collectives(run_dir: Path, live: bool, now: float) -> Reading:
    """What the run's collectives say, and the files that could not be used. While the run is
    live, judged at ``now``; once it has ended, as of its end: what its summary recorded, else
    its files judged at its end time (a rank missing from a collective the others had waited in
    for two intervals when the run ended; the files stop wherever each rank last wrote, which
    the two intervals allow for)."""
    if not live:
        recorded = recorded_verdicts(run_dir)
        if recorded is not None:
            return recorded_reading(recorded)
        now = ended_at(run_dir, now)
    return judge(run_dir, now, live)


def judge(run_dir: Path, now: float, live: bool = False) -> Reading:
    """The ranks' records judged at ``now``: a live run's present, or an ended run's end
    (:func:`read_records`)."""
    flights = read_records(run_dir, live, now)
    found = verdict(flights, now, flights.world)
    return Reading(found, arrival_lags(flights.dumps, flights.world), tuple(flights.notes))


def ended_at(run_dir: Path, now: float) -> float:
    """When the run ended (its state's last word where the end was never written); ``now``
    when its state says neither."""
    state = read_state(run_dir)
    return state.end or state.updated or now


def recorded_reading(section: Mapping[str, Any]) -> Reading:
    """A :class:`Reading` of what a finished run's summary recorded."""
    said = section.get("collective")
    notes = section.get("notes") if isinstance(section.get("notes"), list) else []
    found = Recorded(said) if isinstance(said, dict) and said.get("headline") else None
    return Reading(found, lags_of(section.get("arrival")), tuple(str(n) for n in notes))


def run_verdict(run_dir: Path, live: bool, now: float) -> tuple[Verdict | None, list[str]]:
    """:func:`read_collectives`' verdict and notes, for ``why`` and ``stacks``; an ended run's
    with the ranks that arrived last at its collectives (a live run's are ``top``'s)."""
    reading = read_collectives(run_dir, live, now)
    found = reading.verdict if live else together(reading.verdict, reading.late)
    return found, list(reading.notes)
