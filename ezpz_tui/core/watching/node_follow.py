"""A live run followed through its node digests: every rank's row from one small file a node,
and only the shown ranks' own files beside them.

A :class:`~.followers.RunFollower` looks at every rank's files: five a rank, 640,000 at Aurora's
size, each a metadata call on a filesystem that every user of the machine shares. The node
digests (:mod:`~.node_digests`) hold what a rank's row, the summary bar and the plot's band
need (its state, newest step, loss and step time, newest telemetry sample), so here each is the
only file looked at for its node's ranks, within a budget of calls a second
(:class:`~.budget.PollSchedule`): one open a look, parsed when its bytes changed.

Beside them, the files of the ranks a person sees are followed: the log (and telemetry) of each
rank ``focus`` names (the rank on screen and the launcher's), and the metric series of rank 0
and of every rank shown (the plot's curves), from their start. A node whose digest is stale (its
writer died with no rank of the node to take over) has its ranks read from their own files
instead, which the batch says in a sentence (:meth:`~.node_digests.NodeDigests.note`); so has a
rank whose digest says it is no longer running, for the end its status file holds. The run's
``state.json`` is looked at every second: once it says the run ended, :attr:`LiveNodes.ended`
and the watch stops (what comes next is the run's ``digest.json``).
"""

from __future__ import annotations

import math
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from ezpz_tui.core.runs.unreadable import named, unusable_status
from ezpz_tui.core.watching import fscalls
from ezpz_tui.core.watching.budget import PollSchedule
from ezpz_tui.core.watching.followers import (
    LAUNCHER,
    SLOWER,
    TELEMETRY_BACKLOG,
    TELEMETRY_LINE,
    Batch,
    RankLines,
    read_json,
)
from ezpz_tui.core.watching.node_digests import (
    MAX_DIGEST_BYTES,
    NodeDigest,
    NodeDigests,
    RankDigest,
    parse_node_digest,
)
from ezpz_tui.core.watching.tails import DEFAULT_MAX_LINE, DEFAULT_READ, LineTail, RecordTail
from runtime.record_columns import merge_columns
from runtime.rundir import FINAL, NODE_FILE, RANK_ENDED, RankStatus, RunDir, RunState
from runtime.telemetry.record import parse_line

NODE_FASTEST_S = 1.0  # a digest is rewritten at most every 2 s: looking more often finds nothing
RESCAN_S = 30.0  # how often ``nodes/`` is listed for nodes whose first report came late
COVERED_RESCAN_S = 300.0  # ... once the digests hold every rank of the run
NODE_POLL_S = 1.0  # the digests are looked at this often: rows change at most once a second,
NODES_A_POLL = 500  # ... or as seldom as this many nodes a look take (each look re-sorts rows)
FIRST_NODES = 4096  # digests read for the first time in one poll, outside the budget: the rows
READ_CHUNK = 64 << 10  # a digest is read in pieces: an unbuffered read allocates what it asks
STATE_EVERY_S = 1.0  # how often ``state.json`` is looked at for the run's end
LOG, METRICS, TELEMETRY, STATUS = "log", "metrics", "telemetry", "status"


@dataclass
class NodeBatch(Batch):
    """A :class:`~.followers.Batch` whose rows came (partly) from node digests: ``activity``
    is when each rank last stepped as its digest says (the wall clock), which the monitor takes
    in place of the moment the batch was read; ``lead`` is the rank whose records move the
    summary bar (rank 0: its whole series is read from its file); ``notes`` the sentences to say
    once, at the moment they become true (a node's writer found gone)."""

    activity: dict[int, float] = field(default_factory=dict)
    lead: int = 0
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.activity or self.notes) or super().__bool__()

    def parts(self, ranks: int) -> Iterator[NodeBatch]:
        """This batch in parts of at most ``ranks`` ranks' rows, records and samples (the
        first with everything else): the UI applies each between two keys, not 131,072 rows
        at once."""
        held = sorted({*self.status, *self.records, *self.telemetry, *self.activity})
        if len(held) <= ranks:
            yield self
            return
        whole = (self.status, self.records, self.telemetry, self.activity)
        for start in range(0, len(held), ranks):
            chosen = held[start : start + ranks]
            part = self if start == 0 else NodeBatch(lead=self.lead)
            status, records, telemetry, activity = (
                {r: d[r] for r in chosen if r in d} for d in whole
            )
            part.status, part.records, part.telemetry = status, records, telemetry
            part.activity = activity
            yield part


class _File:
    """One rank file followed: what it holds, its rank, its tail (None for a status file, read
    whole when its ``stat`` changes) and how near its end its first read starts (None: at its
    start)."""

    __slots__ = ("backlog", "kind", "rank", "sig", "tail")

    def __init__(
        self, kind: str, rank: int, tail: LineTail | RecordTail | None, backlog: int | None
    ) -> None:
        self.kind, self.rank, self.tail, self.backlog = kind, rank, tail, backlog
        self.sig: tuple[int, int, int] | None = None


class _Node:
    """One node's digest as last read (``crc``: of its bytes, to parse only what changed), kept
    as little as judging it needs: its ranks' sections are handed on, not held."""

    __slots__ = ("crc", "digest", "stale")

    def __init__(self) -> None:
        self.crc: int | None = None
        self.digest: NodeDigest | None = None  # its ranks without their sections
        self.stale = False


class LiveNodes:
    """Follows ``run_dir`` while it is live: rows from its node digests, files only for the
    ranks ``focus`` names (from any thread), rank 0's series and the new records of each rank
    ``plotted`` names (what the plot read of it before is its own), and the ranks of stale
    nodes.
    ``stats_per_second``: the budget of metadata calls, half for the digests and half for the
    files (None: every one every poll); ``slowest``: every digest is looked at within it;
    ``world``: the run's ranks (``nodes/`` is listed seldom once the digests hold them all).
    :attr:`opened` lists every rank file this follower opened, in order (what a test asks)."""

    def __init__(
        self,
        run_dir: str | Path,
        focus: Callable[[], Iterable[int]],
        log_backlog: int,
        plotted: Callable[[], Iterable[int]] = tuple,
        read_bytes: int = DEFAULT_READ,
        stats_per_second: float | None = None,
        slowest: float = 30.0,
        max_line: int = DEFAULT_MAX_LINE,
        world: int | None = None,
    ) -> None:
        self.run = RunDir(Path(run_dir))
        self.world = world  # the run's ranks, when its record says
        self.focus = focus
        self.plotted = plotted
        self.log_backlog = log_backlog
        self.read_bytes = read_bytes
        self.max_line = max_line
        half = None if stats_per_second is None else stats_per_second / 2
        self.nodes: PollSchedule[Path] = PollSchedule(half, slowest, NODE_FASTEST_S)
        self.files: PollSchedule[Path] = PollSchedule(half, slowest)
        self.ended = False  # state.json says the run ended
        self.opened: list[Path] = []
        self._nodes: dict[Path, _Node] = {}
        self._unread: list[Path] = []  # digests listed and never read: read outside the budget
        self._new_files: list[Path] = []  # rank files newly followed: read at once, likewise
        self._files: dict[Path, _File] = {}
        self._wanted: dict[int, set[str]] = {}  # the kinds of each rank's files followed
        self._fallback: dict[str, set[int]] = {}  # stale node's host: its ranks read from files
        self._host_of: dict[int, str] = {}
        # what was handed on of each rank: its state, step, step's time, sample's time
        self._sent: dict[int, tuple[str | None, int | None, float | None, float | None]] = {}
        self._nodes_at = -math.inf
        self._shown: frozenset[int] | None = None
        self._rescan_at = -math.inf
        self._state_at = -math.inf
        self._state_sig: tuple[int, int, int] | None = None
        self._seq = 0

    def has_digests(self) -> bool:
        """Whether the run has any node digest yet (one listing of ``nodes/`` and its shards)."""
        self._rescan(time.monotonic())
        return bool(self._nodes)

    @property
    def node_count(self) -> int:
        """Node digests found so far."""
        return len(self._nodes)

    @property
    def covered(self) -> int:
        """Ranks the digests read so far hold."""
        return len(self._host_of)

    def _rescan(self, now: float) -> None:
        """Find the digests of nodes not seen before: a listing of ``nodes/`` and each shard,
        charged to the digests' budget; each new one is read at the next poll."""
        calls = 1
        for shard in fscalls.scandir(self.run.nodes_dir):
            if not shard.is_dir():
                continue
            calls += 1
            for entry in fscalls.scandir(shard.path):
                path = Path(entry.path)
                if path not in self._nodes and NODE_FILE.fullmatch(entry.name):
                    self._nodes[path] = _Node()
                    self._unread.append(path)
        self.nodes.spend(calls)
        whole = self.world is not None and self.covered >= self.world
        self._rescan_at = now + (COVERED_RESCAN_S if whole else RESCAN_S)

    def _read_state(self, now: float) -> None:
        if now < self._state_at:
            return
        self._state_at = now + STATE_EVERY_S
        path = self.run.state_json
        st = fscalls.stat(path)
        sig = (st.st_ino, st.st_size, st.st_mtime_ns) if st else None
        if sig is None or sig == self._state_sig:
            return
        data, _ = read_json(path)
        if data is not None:
            self._state_sig = sig
            self.ended = RunState.from_json(data).state in FINAL

    def poll(self) -> NodeBatch:
        """What is new since the last poll, within the budget."""
        batch = NodeBatch()
        now = time.monotonic()
        self._read_state(now)
        if now >= self._rescan_at:
            self._rescan(now)
        focus = frozenset(self.focus())
        if focus != self._shown:  # a rank newly shown has its files read at once
            self._shown = focus
            for rank in focus:
                self._want(rank, (LOG,) if rank == LAUNCHER else (LOG, TELEMETRY, METRICS))
            self._want(0, (METRICS,))
        for rank in self.plotted():
            self._want(rank, (METRICS,))
        wall = time.time()
        first, self._unread = self._unread[:FIRST_NODES], self._unread[FIRST_NODES:]
        for path in first:  # every row at once: O(nodes) reads, the budget's after
            self.nodes.add(path, now)
            self.nodes.checked(path, now, self._look(path, batch, wall))
        for path in self._new_files:  # a rank just shown: its files at once, in this batch
            followed = self._files.get(path)
            if followed is not None:
                self.files.add(path, now, SLOWER if followed.kind in (TELEMETRY, STATUS) else 1.0)
                self.files.checked(path, now, self._read(path, batch))
        self._new_files.clear()
        if now >= self._nodes_at:
            self._nodes_at = now + max(NODE_POLL_S, len(self._nodes) / NODES_A_POLL)
            before = fscalls.total()
            due = self.nodes.due(now)
            for path in due:
                self.nodes.checked(path, now, self._look(path, batch, wall))
            self.nodes.spend(fscalls.total() - before - len(due))
        before = fscalls.total()
        due = self.files.due(now)
        for path in due:
            self.files.checked(path, now, self._read(path, batch))
        self.files.spend(fscalls.total() - before - len(due))
        return batch

    def _want(self, rank: int, kinds: Iterable[str]) -> None:
        """Follow these of ``rank``'s files from now on (the first read of a log or telemetry
        file starts near its end; a metrics file from its start: the plot's whole series)."""
        held = self._wanted.setdefault(rank, set())
        for kind in kinds:
            if kind in held or (rank == LAUNCHER and kind != LOG):
                continue
            held.add(kind)
            path, backlog = self._path(rank, kind), None
            if kind == LOG:
                tail: LineTail | RecordTail | None = LineTail(path, self.max_line)
                backlog = self.log_backlog
            elif kind == TELEMETRY:
                tail, backlog = LineTail(path, TELEMETRY_LINE), TELEMETRY_BACKLOG
            elif kind == METRICS:  # another rank's: what the plot loaded from it is not read again
                tail, backlog = RecordTail(path, rank), (None if rank == 0 else 0)
            else:
                tail = None
            self._files[path] = _File(kind, rank, tail, backlog)
            self._new_files.append(path)

    def _unwant(self, rank: int, kinds: Iterable[str]) -> None:
        held = self._wanted.get(rank, set())
        for kind in kinds:
            if kind in held:
                held.discard(kind)
                path = self._path(rank, kind)
                self._files.pop(path, None)
                self.files.remove(path)

    def _path(self, rank: int, kind: str) -> Path:
        run = self.run
        if rank == LAUNCHER:
            return run.launcher_log
        if kind == LOG:
            return run.log(rank)
        if kind == METRICS:
            return run.metrics(rank)
        return run.telemetry(rank) if kind == TELEMETRY else run.status(rank)

    def _look(self, path: Path, batch: NodeBatch, wall: float) -> bool:
        """Look at one node's digest, one metadata call (its open: a live digest is rewritten
        every heartbeat, so a stat first would find it changed and cost a second call), and
        hand on what changed; whether anything did."""
        node = self._nodes[path]
        raw = _read_digest(path)
        if raw is None:
            return False
        crc = zlib.crc32(raw)
        changed = crc != node.crc
        if changed:
            digest = parse_node_digest(raw, path)
            if digest is None:  # torn or foreign: looked at again later
                return False
            slim = {r: RankDigest(r, digest.host, None, None, None) for r in digest.ranks}
            node.crc, node.digest = crc, replace(digest, ranks=slim)
        held = node.digest
        if held is None:
            return False
        stale = held.stale(wall)
        if stale != node.stale:
            node.stale = stale
            self._judged(held, batch)
        if not stale and changed:
            self._hand_on(digest, batch)
        return changed

    def _judged(self, digest: NodeDigest, batch: NodeBatch) -> None:
        """A node's digest turned stale (its ranks read from their own files, said) or fresh
        again (back to the digest, the sentence taken back)."""
        host, ranks = digest.host, sorted(digest.ranks)
        for rank in ranks:
            self._host_of[rank] = host
        name = named(self.run.path, digest.path)
        if self._nodes[digest.path].stale:
            note = NodeDigests(stale=(digest,)).note()
            self._fallback[host] = set(ranks)
            for rank in ranks:
                self._want(rank, (STATUS, LOG, TELEMETRY, METRICS))
                batch.problems.setdefault(rank, {})[name] = note
            if note:
                batch.notes.append(note)
        elif host in self._fallback:
            shown = self._shown or frozenset()
            for rank in self._fallback.pop(host):
                batch.problems.setdefault(rank, {})[name] = None
                self._unwant(rank, (STATUS,) if rank in shown else (STATUS, LOG, TELEMETRY))
                if rank not in shown and rank != 0:
                    self._unwant(rank, (METRICS,))
                self._sent.pop(rank, None)  # handed on afresh from the digest

    def _hand_on(self, digest: NodeDigest, batch: NodeBatch) -> None:
        """What changed of a fresh digest's ranks: a running rank's row, its newest step (a
        rank whose series is read from its file has its records from there), its newest
        telemetry sample; a rank that is no longer running has its status file read."""
        series = {rank for rank, kinds in self._wanted.items() if METRICS in kinds}
        for rank, entry in digest.ranks.items():
            self._host_of[rank] = digest.host
            sample_time = entry.sample.time if entry.sample is not None else None
            when = entry.step_time if entry.step_time is not None else entry.reported
            first = rank not in self._sent
            was = self._sent.get(rank, (None, None, None, None))
            self._sent[rank] = (entry.state, entry.step, when, sample_time)
            if entry.running and (first or was[0] != entry.state):
                batch.status[rank] = RankStatus(rank, host=digest.host, pid=entry.pid)
            elif not entry.running:
                self._want(rank, (STATUS,))
            if entry.step is not None and entry.step != was[1] and rank not in series:
                columns = entry.columns()
                if columns is not None:
                    batch.records[rank] = columns
            if when is not None and when != was[2]:
                batch.activity[rank] = when
            if entry.sample is not None and sample_time != was[3]:
                batch.telemetry.setdefault(rank, []).append(entry.sample)

    def _read(self, path: Path, batch: NodeBatch) -> bool:
        """Read what is new in one rank file into ``batch``; whether anything was."""
        followed = self._files.get(path)
        if followed is None:
            return False
        rank, tail = followed.rank, followed.tail
        if tail is None:
            return self._read_status(path, followed, batch)
        st = fscalls.stat(path)
        if st is None:
            return False
        if followed.backlog is not None:  # its first read: from near its end
            self.opened.append(path)
            if isinstance(tail, RecordTail):  # only the records written from now on
                tail.resume_at(st.st_ino, st.st_size)
            else:
                tail.skip_to_tail(followed.backlog)
            followed.backlog = None
            batch.launcher |= rank == LAUNCHER  # found: the launcher's row shows
        elif tail.resume_point() is None:
            self.opened.append(path)
        offset = tail.offset
        if isinstance(tail, RecordTail):
            new, garbage, restarted = tail.read(self.read_bytes, st)
            if restarted:
                batch.metric_restarts.add(rank)
            if garbage:
                batch.garbage[rank] = batch.garbage.get(rank, 0) + garbage
            merge_columns(batch.records, new)
        elif followed.kind == LOG:
            lines = tail.read(self.read_bytes, st)
            if lines.restarted:
                batch.log_restarts.add(rank)
            if lines:
                batch.logs.append(RankLines(rank, self._seq, lines))
                self._seq += len(lines)
        else:
            samples = [s for s in map(parse_line, tail.read(self.read_bytes, st).texts) if s]
            if samples:
                batch.telemetry.setdefault(rank, []).extend(samples)
        if tail.error is not None:
            name = named(self.run.path, path)
            batch.problems.setdefault(rank, {})[name] = f"{name} cannot be read: {tail.error}"
        return tail.offset != offset or tail.more

    def _read_status(self, path: Path, followed: _File, batch: NodeBatch) -> bool:
        st = fscalls.stat(path)
        sig = (st.st_ino, st.st_size, st.st_mtime_ns) if st else None
        if sig is None or sig == followed.sig:
            return False
        if path not in self.opened:
            self.opened.append(path)
        data, _ = read_json(path)
        rank = followed.rank
        name = named(self.run.path, path)
        if data is None:  # torn: read again at the next look
            batch.problems.setdefault(rank, {})[name] = unusable_status(self.run.path, path)
            return False
        followed.sig = sig
        status = RankStatus.from_json(data, rank)
        batch.problems.setdefault(rank, {})[name] = None
        batch.status[rank] = status
        if status.state in RANK_ENDED:
            held = self._sent.get(rank, (None, None, None, None))
            self._sent[rank] = (str(status.state), *held[1:])
        return True

    def watch(self, stop: threading.Event, interval_s: float) -> Iterator[NodeBatch]:
        """Non-empty batches until ``stop`` is set or the run has ended (:attr:`ended`)."""
        while not stop.is_set():
            batch = self.poll()
            if batch:
                yield batch
            if self.ended:
                return
            stop.wait(interval_s)


def _read_digest(path: Path) -> bytes | None:
    """A digest's bytes (a rewrite replaces the file whole: what is read is one version), None
    when it cannot be read or is implausibly large."""
    pieces, size = [], 0
    try:
        with fscalls.open_read(path) as fh:
            while piece := fh.read(READ_CHUNK):
                pieces.append(piece)
                size += len(piece)
                if size > MAX_DIGEST_BYTES:
                    return None
    except OSError:
        return None
    return b"".join(pieces)
