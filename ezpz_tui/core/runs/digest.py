"""A finished run's ``digest.json``: everything opening it shows, in one file.

A run of 131,072 ranks leaves over half a million per-rank files (status, log, metrics,
telemetry, Flight Recorder); reading each of them to open the run costs minutes on a parallel
filesystem. The finalizer (:mod:`ezpz_tui.core.launching.finalize`) reads them once at the run's
end and writes what the readers show (``why``, ``top``, ``runs``, the TUI) here, columnar (one
list per field, indexed by rank) so the whole file parses in a fraction of a second. A rank's own
files are read only when a person opens that rank or a verdict names it.

Reading never raises: a missing, torn, older-version or wrong-shaped file is ``None``, and its
reader falls back to the per-rank files (saying so where it shows a verdict). Non-finite numbers
are written as the JSONL spells them (``"NaN"``, ``"Infinity"``), so strict readers parse it.
UI-free and numpy-free for its callers.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.unreadable import unusable_statuses
from runtime.atomic import write_atomic
from runtime.rundir import DIGEST_JSON, FINAL, RankStatus, RunDir, RunState, read_statuses
from runtime.telemetry.record import Sample

DIGEST = DIGEST_JSON
VERSION = 1
MAX_LINE = 200  # characters of a log's last line kept
MAX_BYTES = 1 << 31  # a digest larger than this is not one (a 131,072-rank one is ~100 MB)

# The status fields kept as a column each, under their own names (``host`` and ``command`` are
# kept as an index into ``hosts`` and ``commands``: a few distinct values over every rank).
STATUS_COLUMNS = tuple(
    f.name for f in fields(RankStatus) if f.name not in ("rank", "host", "command", "extra")
)
SAMPLE_COLUMNS = tuple(f.name for f in fields(Sample))
RANK_COLUMNS = (
    *STATUS_COLUMNS,
    "host",
    "command",
    "raised",
    "log_bytes",
    "last_line",
    "last_step",
    "last_time",
    "step_time_s",
    "tokens_per_s",
    "records",
    "telemetry_file",
    "arrival_lag_s",
    "slow",
)
"""Every list under ``ranks`` (besides ``last`` and ``telemetry``, dicts of lists): a digest
missing one of them is not one this version reads."""
BAND_COLUMNS = ("step", "time", "mean", "lo", "hi", "lo_rank", "hi_rank", "count")
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def plain(x: float | None) -> float | str | None:
    """A number for strict JSON: non-finite ones as the JSONL's strings."""
    if x is None or math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def number(value: Any) -> float | None:
    """A number read back: the JSONL's strings as the non-finite floats they spell; anything
    else not a number is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return value
    return _NON_FINITE.get(value) if isinstance(value, str) else None


def write_digest(run_dir: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` (as the finalizer builds it) atomically: a reader sees the old file
    or the new, never half of one. Raises ``ValueError`` for a non-finite float (give it as
    :func:`plain` spells it) and what writing raises."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    write_atomic(RunDir(run_dir).digest_json, text.encode("utf-8"), durable=False)


def read_digest(run_dir: Path) -> RunDigest | None:
    """The run's digest, or None when there is none this version can read (missing, torn,
    another version, a wrong shape). Never raises."""
    try:
        with open(RunDir(run_dir).digest_json, "rb") as fh:
            raw = fh.read(MAX_BYTES + 1)
        data = json.loads(raw) if len(raw) <= MAX_BYTES else None
    except (OSError, ValueError, RecursionError):
        return None
    return RunDigest(data) if _well_formed(data) else None


def _well_formed(data: Any) -> bool:
    """Whether ``data`` has the shape :class:`RunDigest` reads without checking again: every
    rank column a list of ``world`` entries, every band's columns as long as its steps."""
    if not isinstance(data, dict) or data.get("version") != VERSION:
        return False
    world, ranks, bands = data.get("world"), data.get("ranks"), data.get("bands")
    if not isinstance(world, int) or isinstance(world, bool) or world < 0:
        return False
    if not isinstance(ranks, dict) or not isinstance(bands, dict):
        return False
    if not isinstance(ranks.get("hosts"), list) or not isinstance(ranks.get("commands"), list):
        return False
    columns = [ranks.get(name) for name in RANK_COLUMNS]
    for group in ("last", "telemetry"):
        held = ranks.get(group)
        if not isinstance(held, dict):
            return False
        columns += held.values()
    if not all(isinstance(c, list) and len(c) == world for c in columns):
        return False
    for band in bands.values():
        if not isinstance(band, dict):
            return False
        lists = [band.get(name) for name in BAND_COLUMNS]
        if not all(isinstance(c, list) and len(c) == len(lists[0]) for c in lists):
            return False
    return isinstance(data.get("reads", {}), dict)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class RunDigest:
    """A read digest: each rank's figures by rank, decoded when asked for."""

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data
        self._ranks: dict[str, Any] = data["ranks"]
        self.world: int = data["world"]
        self.written: float | None = number(data.get("written"))
        self.run_id: str | None = _str(data.get("run_id"))
        self.reads: dict[str, Any] = data.get("reads", {})

    def _at(self, column: str, rank: int) -> Any:
        return self._ranks[column][rank] if 0 <= rank < self.world else None

    def status(self, rank: int) -> RankStatus | None:
        """The rank's status as its file said at the end; None: it had no readable one."""
        if self._at("state", rank) is None:
            return None
        values: dict[str, Any] = {name: self._at(name, rank) for name in STATUS_COLUMNS}
        values = {k: v for k, v in values.items() if v is not None}
        values["host"] = self.host(rank) or None
        command = _int(self._at("command", rank))
        commands = self._ranks["commands"]
        if command is not None and 0 <= command < len(commands):
            values["command"] = commands[command]
        return RankStatus.from_json(values, rank)

    def statuses(self) -> list[RankStatus]:
        """Every rank's status that was readable, by rank (as ``read_statuses`` gives them)."""
        found = (self.status(rank) for rank in range(self.world))
        return [status for status in found if status is not None]

    def host(self, rank: int) -> str:
        """The host the rank's status names; "" where none did."""
        hosts, i = self._ranks["hosts"], _int(self._at("host", rank))
        return hosts[i] if i is not None and 0 <= i < len(hosts) else ""

    def raised(self, rank: int) -> str | None:
        """The rank's recorded exception, as the traceback's last line says it."""
        return _str(self._at("raised", rank))

    def log_bytes(self, rank: int) -> int | None:
        return _int(self._at("log_bytes", rank))

    def last_line(self, rank: int) -> str | None:
        """The last line of the rank's log (at most :data:`MAX_LINE` characters)."""
        return _str(self._at("last_line", rank))

    def last_step(self, rank: int) -> int | None:
        """The step of the rank's newest metric record."""
        return _int(self._at("last_step", rank))

    def last_time(self, rank: int) -> float | None:
        return number(self._at("last_time", rank))

    def step_time(self, rank: int) -> float | None:
        """The rank's recent step time as ``top`` and the monitor judge it."""
        return number(self._at("step_time_s", rank))

    def tokens_per_s(self, rank: int) -> float | None:
        """The rank's newest tokens/s, as ``top`` divides it for the rank's MFU."""
        return number(self._at("tokens_per_s", rank))

    def has_telemetry(self, rank: int) -> bool:
        """Whether the rank had a telemetry file (one with no readable sample included)."""
        return self._at("telemetry_file", rank) is True

    def has_records(self, rank: int) -> bool:
        """Whether the rank's metrics file held records at its end (``top`` shows its row)."""
        return self._at("records", rank) is True

    def arrival_lag(self, rank: int) -> float | None:
        return number(self._at("arrival_lag_s", rank))

    def slow(self, rank: int) -> bool:
        return self._at("slow", rank) is True

    def last(self, rank: int) -> dict[str, float]:
        """Each metric's last finite value on the rank."""
        out = {}
        for name, column in self._ranks["last"].items():
            value = number(column[rank]) if 0 <= rank < self.world else None
            if value is not None and math.isfinite(value):
                out[name] = value
        return out

    def sample(self, rank: int) -> Sample | None:
        """The rank's last telemetry sample; None: it had none."""
        if not 0 <= rank < self.world:
            return None
        held = self._ranks["telemetry"]
        values = {name: column[rank] for name, column in held.items()}
        return Sample.from_json({k: v for k, v in values.items() if v is not None})

    def metrics(self) -> list[str]:
        """The metrics a band was kept for."""
        return list(self._data["bands"])

    def band(self, metric: str) -> dict[str, list[Any]] | None:
        """Metric ``metric`` across ranks by step (:data:`BAND_COLUMNS`; numbers as written:
        non-finite ones spelled, read them with :func:`number`); None: no such band."""
        return self._data["bands"].get(metric)

    def column(self, name: str) -> list[Any]:
        """One rank column as written, for a reader that takes every rank at once."""
        return self._ranks[name]

    def peaks(self) -> dict[str, list[Any]] | None:
        """Each memory metric's largest finite value on each rank (numbers as written: read
        them with :func:`number`), as ``compare`` takes a run's peak memory from every rank;
        None: the digest holds none (its run's first metrics file recorded no memory metric,
        so no reader asks, or it was written before digests held them)."""
        held = self._ranks.get("peak")
        if not isinstance(held, dict):
            return None
        if not all(isinstance(c, list) and len(c) == self.world for c in held.values()):
            return None
        return held

    def others_garbage(self) -> int | None:
        """The lines of the metrics files after the first (rank 0's) that were not records,
        held with :meth:`peaks` (a reader of every rank's peak counts them); None where not."""
        return _int(self.reads.get("others_garbage"))

    def highest_step(self) -> tuple[bool, int | None]:
        """Whether the digest holds the highest step any rank recorded (the ends of their
        metrics files, as :func:`ezpz_tui.core.watching.goodput.highest_step` reads them), and
        that step (None: no rank recorded one)."""
        if "highest_step" not in self.reads:
            return False, None
        step = self.reads["highest_step"]
        return (True, step) if step is None or _int(step) is not None else (False, None)


FROM_FILES = (
    f"no readable {DIGEST} (an older run, or its finalizer has not run yet): "
    "read from every rank's files"
)
"""The note of a verdict on an ended run read from the ranks' files rather than its digest."""


@dataclass(frozen=True)
class Statuses:
    """A run's rank statuses, from its digest or its files: the readable ones by rank, the
    ranks whose file gave none with the line saying why, and the digest they came from (None:
    the files) with ``notes`` saying so for an ended run."""

    read: list[RankStatus]
    unusable: dict[int, str]
    digest: RunDigest | None
    notes: tuple[str, ...] = ()


def ended_digest(run_dir: Path, state: RunState) -> RunDigest | None:
    """The digest of a run that has ended (``state``), written once it had, so it holds every
    rank's end; None: a live run, no readable digest, or one written before the run ended (a
    finalize asked of the live run). Its reader then reads the ranks' files."""
    digest = read_digest(run_dir) if state.state in FINAL else None
    return digest if digest is not None and _after_end(digest, state) else None


def rank_statuses(run_dir: Path, state: RunState, usable: bool = True) -> Statuses:
    """The ranks' statuses: an ended run's from its digest, one file; a live run's (or an ended
    one without a readable digest, or whose reader cannot use it: ``usable`` false; said in
    ``notes``) from every rank's status file."""
    digest = ended_digest(run_dir, state) if usable else None
    if digest is not None:
        unusable = digest.reads.get("unusable")
        said = unusable if isinstance(unusable, dict) else {}
        lines = {int(r): str(line) for r, line in said.items() if str(r).isdigit()}
        return Statuses(digest.statuses(), lines, digest)
    read = read_statuses(run_dir)
    notes = (FROM_FILES,) if state.state in FINAL else ()
    return Statuses(read, unusable_statuses(run_dir, read), None, notes)


def _after_end(digest: RunDigest, state: RunState) -> bool:
    """Whether the digest was written once the run had ended, so it holds every rank's end."""
    return digest.written is not None and (state.end is None or digest.written >= state.end)
