"""A live run read from its node digests: one small file a node, not every rank's files.

Each node's writer (:mod:`runtime.node_digest`) keeps a digest of its ranks: the state History
said, the newest step (its time, loss and other metrics, step time), the newest telemetry
sample, whatever the Flight Recorder put there. Reading them costs O(nodes) short reads, so a
10,624-node run's rows come from 10,624 files rather than five times 127,488.

A digest is believed while its writer is seen to live: rewritten within
:data:`STALE_HEARTBEATS` of its heartbeats (the writer rewrites an unchanged digest every
heartbeat). One older than that while the run is live is stale: its writer died or stopped
with no rank of the node to take over yet, and its ranks are read from their own files, which
:meth:`NodeDigests.note` says in a sentence. A run that has ended is not judged by its digests
(the ranks' ends are in their own files and the run's summary).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.unreadable import named
from ezpz_tui.core.words import rank_ranges
from runtime.node_digest import DEFAULT_INTERVAL_S, HEARTBEAT_INTERVALS
from runtime.record_columns import RecordColumns
from runtime.rundir import RunDir
from runtime.telemetry.record import Sample

STALE_HEARTBEATS = 3  # a digest older than this many of its heartbeats has lost its writer
MAX_DIGEST_BYTES = 4 << 20  # a node's digest: a few KB a rank
RUNNING = "running"


@dataclass(frozen=True)
class RankDigest:
    """One rank as its node's digest has it."""

    rank: int
    host: str
    reported: float | None  # when it last reported anything
    state: str | None  # "running", "closed" (its History ended), "gone" (its process is)
    pid: int | None
    step: int | None = None
    step_time: float | None = None  # when that step was recorded
    dt: float | None = None  # the step time: the median of its last few, else the newest
    metrics: Mapping[str, float] = field(default_factory=dict)
    sample: Sample | None = None
    sections: Mapping[str, Any] = field(default_factory=dict)  # every section, as written

    @property
    def running(self) -> bool:
        return self.state in (None, RUNNING)

    def columns(self) -> RecordColumns | None:
        """Its newest step as a one-record column set (what the step-time readers take)."""
        if self.step is None:
            return None
        metrics = {name: [value] for name, value in self.metrics.items()}
        if self.dt is not None:
            metrics["dt"] = [self.dt]
        return RecordColumns(self.rank, [self.step], [self.step_time], metrics)


@dataclass(frozen=True)
class NodeDigest:
    """One node's digest file."""

    host: str
    path: Path
    written: float
    writer_rank: int | None
    writer_pid: int | None
    heartbeat_s: float
    ranks: Mapping[int, RankDigest]

    def stale(self, now: float) -> bool:
        return now - self.written > STALE_HEARTBEATS * self.heartbeat_s


@dataclass(frozen=True)
class NodeDigests:
    """Every node digest of a run, split into those believed and those whose writer is gone."""

    fresh: tuple[NodeDigest, ...] = ()
    stale: tuple[NodeDigest, ...] = ()
    notes: tuple[str, ...] = ()  # digests that could not be read, one line each

    @property
    def covered(self) -> dict[int, RankDigest]:
        """The ranks the fresh digests hold: read from there, not from their own files."""
        return {rank: d for node in self.fresh for rank, d in node.ranks.items()}

    @property
    def stale_ranks(self) -> list[int]:
        covered = self.covered
        return sorted({r for node in self.stale for r in node.ranks if r not in covered})

    def note(self) -> str | None:
        """The sentence a reader shows when some ranks are read from their own files because
        their node's writer is gone; None when none is."""
        if not self.stale:
            return None
        hosts = sorted(node.host for node in self.stale)
        shown = ", ".join(hosts[:4]) + (" …" if len(hosts) > 4 else "")
        ages = max(0.0, time.time() - min(node.written for node in self.stale))
        ranks = self.stale_ranks
        them = f"rank{'s' * (len(ranks) != 1)} {rank_ranges(ranks)}" if ranks else "its ranks"
        count = f"{len(hosts)} node{'s' * (len(hosts) != 1)}"
        return (
            f"node digest of {count} ({shown}) not rewritten for {ages:.0f}s: its writer is "
            f"gone, so {them} read from their own files"
        )


def read_node_digests(run_dir: Path, live: bool, now: float | None = None) -> NodeDigests:
    """Every node digest of ``run_dir``: one listing of ``nodes/`` and its shards, one read a
    node. ``live``: whether the run is, the only time a digest can be stale. Never raises."""
    now = time.time() if now is None else now
    fresh, stale, notes = [], [], []
    for path in RunDir(run_dir).node_digests():
        digest = read_node_digest(path)
        if digest is None:
            notes.append(f"{named(run_dir, path)} is not a node digest (torn or foreign)")
        elif live and digest.stale(now):
            stale.append(digest)
        else:
            fresh.append(digest)
    return NodeDigests(tuple(fresh), tuple(stale), tuple(notes))


def read_node_digest(path: Path) -> NodeDigest | None:
    """One digest file; None when it cannot be read or is not one."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_DIGEST_BYTES + 1)
    except OSError:
        return None
    return parse_node_digest(raw, path)


def parse_node_digest(raw: bytes, path: Path) -> NodeDigest | None:
    """A digest from the bytes of its file ``path`` (read by a caller that counts its calls);
    None when they are not one."""
    try:
        data = json.loads(raw) if len(raw) <= MAX_DIGEST_BYTES else None
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    written, ranks = _number(data.get("written")), data.get("ranks")
    if written is None or not isinstance(ranks, dict):
        return None
    host = data.get("host") if isinstance(data.get("host"), str) else path.stem[5:]
    writer = data.get("writer") if isinstance(data.get("writer"), dict) else {}
    heartbeat = _number(data.get("heartbeat_s")) or DEFAULT_INTERVAL_S * HEARTBEAT_INTERVALS
    found = {}
    for key, entry in ranks.items():
        rank = _rank(key)
        if rank is not None and isinstance(entry, dict):
            found[rank] = _rank_digest(rank, host, entry)
    return NodeDigest(
        host=host,
        path=path,
        written=written,
        writer_rank=_int(writer.get("rank")),
        writer_pid=_int(writer.get("pid")),
        heartbeat_s=heartbeat,
        ranks=found,
    )


def _rank_digest(rank: int, host: str, entry: Mapping[str, Any]) -> RankDigest:
    state = _section(entry, "state")
    step = _section(entry, "step")
    telemetry = _section(entry, "telemetry")
    metrics = step.get("metrics") if isinstance(step.get("metrics"), dict) else {}
    word = state.get("state")
    return RankDigest(
        rank=rank,
        host=host,
        reported=_number(entry.get("t")),
        state=word if isinstance(word, str) else None,
        pid=_int(entry.get("pid")),
        step=_int(step.get("step")),
        step_time=_number(step.get("time")),
        dt=_number(step.get("dt_median")) or _number(step.get("dt")),
        metrics={k: v for k, v in metrics.items() if _number(v) is not None},
        sample=Sample.from_json(telemetry) if telemetry else None,
        sections={k: v for k, v in entry.items() if isinstance(v, dict)},
    )


def uncovered(ranks: Iterable[int], digests: NodeDigests) -> list[int]:
    """Of ``ranks``, those no fresh digest holds: read from their own files."""
    covered = digests.covered
    return [rank for rank in ranks if rank not in covered]


def _section(entry: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = entry.get(name)
    return value if isinstance(value, dict) else {}


def _rank(key: Any) -> int | None:
    try:
        rank = int(key)
    except (TypeError, ValueError):
        return None
    return rank if rank >= 0 else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
