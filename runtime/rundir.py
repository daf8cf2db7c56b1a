"""The run directory (docs/run-directory.md) as code: every name in it and its two records.

A run directory is the contract between the ranks, the supervisor, the run store, the followers
and the CLI, and it is read by other versions of this program and by ezpz's own tools. Its names
are spelled here once so they cannot drift apart; ranks import this module, so it needs only the
standard library and does nothing at import.

The two records keep the JSON shape earlier versions wrote, so old runs still open:

* ``state.json`` (:class:`RunState`) has one writer, the run's supervisor, which rewrites it
  whole through a temporary file (:func:`runtime.atomic.write_atomic`): a reader on any node sees
  the old state or the new, never half of one. Only the five :data:`WRITTEN` states are written;
  ``lost`` and ``unknown`` exist for readers, which may be wrong about a run and so never write.
  ``updated`` is the supervisor's heartbeat, refreshed every :data:`HEARTBEAT_S` while the run is
  live; a reader on another node calls the run lost once it is :data:`STALE_AFTER_S` old.
* ``status/rank-NNNNN.json`` (:class:`RankStatus`) is written by the rank's capture wrapper when
  the command starts and again when it ends.

On a full disk (or quota) neither record can be replaced through a temporary file; it is then
written over the old one, in the room that one holds (:func:`runtime.atomic.overwrite`), so a
rank that dies of the full disk still records its end.

Readers never raise on bad input: a state that cannot be read is ``unknown`` with the reason, a
status file that cannot be read yet (torn, foreign) is skipped, a field of the wrong type is
taken as not recorded.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from pathlib import Path

from runtime.atomic import overwrite, write_atomic

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers: every rank's wrapper imports this, typing it need not
    from typing import Any

RUN_TOML, STATE_JSON, LAUNCHER_LOG = "run.toml", "state.json", "launcher.log"
SUMMARY_JSON, METRICS_NC = "summary.json", "metrics.nc"  # written when a run ends
DIGEST_JSON = "digest.json"  # written when a run ends: what opening it shows (core/runs/digest)
REPORT_MD, METRICS_PARQUET = "report.md", "metrics.parquet"  # at the end; on request
# What the trackers runtime.History feeds write, each only when asked for (runtime.trackers).
METRICS_CSV, TENSORBOARD, MLRUNS, WANDB = "metrics.csv", "tensorboard", "mlruns", "wandb"
HOSTFILE, BAD_HOSTS = "hostfile", "bad_hosts.txt"  # the second in outputs/, for all its runs
SWEEPS = "sweeps"  # in the outputs directory: one record per sweep, naming its runs
STAGE_JSON = "stage.json"  # with ``--stage``: where the environment was staged, how long it took
RESERVE = ".reserve"  # room kept so a run on a disk that fills can still record its end
LOGS, STATUS, METRICS, TELEMETRY = "logs", "status", "metrics", "telemetry"
FLIGHT = "flight"  # each rank's Flight Recorder entries (runtime.flight)
PROFILES = "profiles"  # on request: each rank's trace of a few steps (runtime.profiling)
NODES = "nodes"  # one digest per node, by its writer (runtime.node_digest), in NODE_SHARDS folders
NODE_SHARDS = 64  # at 10,624 nodes about 170 digests a folder
NODE_FILE = re.compile(r"node-(.+)\.json")
RANK_FOLDERS = (LOGS, STATUS, METRICS, TELEMETRY, FLIGHT)  # made before any rank starts

# How readers find ranks by file name. ezpz writes ``metrics-<rank>.jsonl``, or one
# ``metrics.jsonl`` whose records name their rank, in the run directory or below it; its
# default ``History()``, ``history/<run-id>/<run-id>.jsonl`` (the id a ``%Y%m%d-%H%M%S`` time).
LOG_FILE, STATUS_FILE = re.compile(r"rank-(\d+)\.log"), re.compile(r"rank-(\d+)\.json")
JSONL_FILE = re.compile(r"rank-(\d+)\.jsonl")
FIFO_FILE, RAISED_FILE = re.compile(r"rank-(\d+)\.fifo"), re.compile(r"rank-(\d+)\.raised")
EZPZ_METRICS_FILE, EZPZ_SHARED_METRICS = re.compile(r"metrics-(\d+)\.jsonl"), "metrics.jsonl"
EZPZ_HISTORY_FILE = re.compile(r"\d{8}-\d{6}\.jsonl")
SWEEP_PREFIX = "sweep-"  # a sweep id: sweep-YYYYmmdd-HHMMSS-mmm[-N]
SWEEP_FILE = re.compile(rf"({SWEEP_PREFIX}[0-9-]+)\.json")

HEARTBEAT_S = 10.0
# Generous, because node clocks drift and a TUI can be suspended for a while.
STALE_AFTER_S = 120.0
_MAX_RECORD_BYTES = 1 << 20


RAISED_SUFFIX = ".raised"  # status/rank-NNNNN.raised (JSON; no .json: rank-*.json are statuses)

# Each rank folder holds a level of blocks of BLOCK consecutive ranks (logs/b0124/rank-127487.log),
# so no directory holds more than a few thousand names at 127,488 ranks (docs/run-directory.md,
# "The filesystem's share"). Runs made before hold their rank files in the folder itself.
BLOCK = 1024
BLOCK_DIR = re.compile(r"b(\d{4,})")


def block_name(rank: int) -> str:
    """The block folder of ``rank``: ``b`` and ``rank // BLOCK`` in 4 digits (``b0124``)."""
    return f"b{rank // BLOCK:04d}"


def block_span(name: str) -> tuple[int, int]:
    """The ranks a block holds, from its first to one past its last: ``b0001``: (1024, 2048)."""
    first = int(name[1:]) * BLOCK
    return first, first + BLOCK


def blocks_of(world_size: int) -> list[str]:
    """The block folders a run of ``world_size`` ranks writes into, in order."""
    return [block_name(rank) for rank in range(0, max(world_size, 0), BLOCK)]


def _shard(number: int) -> str:
    return f"s{number:02d}"


def _rank_file(rank: int, suffix: str) -> str:
    return f"rank-{rank:05d}{suffix}"


class _InRun:
    """A path in the run directory, read as an attribute of :class:`RunDir`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, run: RunDir, owner: object = None) -> Path:
        return run.path / self.name


@dataclass(frozen=True)
class RunDir:
    """The paths of one run: ``RunDir(path).log(3)`` instead of a path spelled out.

    A rank's file lies in its block (``logs/b0000/rank-00003.log``). A reader of a run made
    before the blocks finds it in the folder itself: the first path asked of a folder looks
    whether the rank's block is there (one ``stat``) and, when it is not, whether the old flat
    file is; either answer holds for the folder from then on. A folder that is there without
    the rank's block is taken as one made before the blocks. ``fresh`` (the ranks' writers,
    which make their block when it is missing) skips the look: every path is the block's."""

    path: Path
    fresh: bool = False
    _flat: dict[str, bool] = field(default_factory=dict, compare=False, repr=False)

    run_toml = _InRun(RUN_TOML)
    state_json = _InRun(STATE_JSON)
    launcher_log = _InRun(LAUNCHER_LOG)
    summary_json = _InRun(SUMMARY_JSON)
    digest_json = _InRun(DIGEST_JSON)
    metrics_nc = _InRun(METRICS_NC)
    report_md = _InRun(REPORT_MD)
    metrics_csv = _InRun(METRICS_CSV)
    tensorboard_dir = _InRun(TENSORBOARD)
    mlruns_dir = _InRun(MLRUNS)
    wandb_dir = _InRun(WANDB)
    hostfile = _InRun(HOSTFILE)
    stage_json = _InRun(STAGE_JSON)
    reserve = _InRun(RESERVE)
    logs_dir = _InRun(LOGS)
    status_dir = _InRun(STATUS)
    metrics_dir = _InRun(METRICS)
    telemetry_dir = _InRun(TELEMETRY)
    flight_dir = _InRun(FLIGHT)
    profiles_dir = _InRun(PROFILES)
    nodes_dir = _InRun(NODES)

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    def _rank_path(self, folder: str, rank: int, suffix: str) -> Path:
        """``folder/bNNNN/rank-NNNNN<suffix>``, or ``folder/rank-NNNNN<suffix>`` in a folder
        written before the blocks (see the class)."""
        name = _rank_file(rank, suffix)
        where = self.path / folder
        flat = self._flat.get(folder)
        if flat is None and not self.fresh:
            if (where / block_name(rank)).is_dir():
                flat = self._flat[folder] = False
            elif (where / name).exists():
                flat = self._flat[folder] = True
            elif (where / block_name(0)).is_dir():  # a rank past the run's last block
                flat = self._flat[folder] = False
            else:  # a folder without the rank's block is one made before the blocks
                flat = where.is_dir()
        return where / name if flat else where / block_name(rank) / name

    def log(self, rank: int) -> Path:
        return self._rank_path(LOGS, rank, ".log")

    def status(self, rank: int) -> Path:
        return self._rank_path(STATUS, rank, ".json")

    def metrics(self, rank: int) -> Path:
        return self._rank_path(METRICS, rank, ".jsonl")

    def telemetry(self, rank: int) -> Path:
        return self._rank_path(TELEMETRY, rank, ".jsonl")

    def flight(self, rank: int) -> Path:
        """The rank's newest Flight Recorder entries, rewritten whole (``runtime.flight``)."""
        return self._rank_path(FLIGHT, rank, ".json")

    def flight_request(self, rank: int) -> Path:
        """The FIFO through which a reader asks the rank to write its entries now."""
        return self._rank_path(FLIGHT, rank, ".fifo")

    def profile_trace(self, rank: int) -> Path:
        """The rank's ``torch.profiler`` trace of the steps asked for (Chrome trace format)."""
        return self._rank_path(PROFILES, rank, ".json")

    def profile_summary(self, rank: int) -> Path:
        """What that trace says: compute, communication, idle and the top operators."""
        return self._rank_path(PROFILES, rank, ".summary.json")

    def nccl_dump_prefix(self, rank: int) -> str:
        """Where NCCL's own dump on a watchdog timeout goes (the rank's block); NCCL appends
        the rank."""
        return str(self.flight(rank).parent / "nccl-rank-")

    def destroyed_mark(self, rank: int) -> Path:
        """Made by the rank's exit hook when it destroyed the process group (``runtime.exit_hook``);
        its wrapper records that in the rank's status and removes it."""
        return self._rank_path(STATUS, rank, ".destroyed")

    def raised(self, rank: int) -> Path:
        """The rank's uncaught exceptions, recorded as they were raised (``runtime.raise_hook``;
        read by :func:`read_raised`)."""
        return self._rank_path(STATUS, rank, RAISED_SUFFIX)

    def node_digest(self, host: str) -> Path:
        """The digest of the node ``host`` (``runtime.node_digest``): in one of
        :data:`NODE_SHARDS` folders, picked from the host name alone, so whichever rank of the
        node writes it names the same file and no folder grows past a few hundred digests."""
        name = host.replace("/", "_") or "_"
        shard = zlib.crc32(name.encode()) % NODE_SHARDS
        return self.nodes_dir / _shard(shard) / f"node-{name}.json"

    def node_digests(self) -> list[Path]:
        """Every node digest of the run: one listing of ``nodes/`` and one of each shard."""
        try:
            shards = [entry.path for entry in os.scandir(self.nodes_dir) if entry.is_dir()]
        except OSError:
            return []
        found = []
        for shard in shards:
            try:
                entries = list(os.scandir(shard))
            except OSError:
                continue
            found += [Path(e.path) for e in entries if NODE_FILE.fullmatch(e.name)]
        return sorted(found)

    def make_folders(self, world_size: int | None = None) -> None:
        """The rank folders, in each the blocks of ``world_size`` ranks (None: the first
        block), and the node digests' shards: made once by the supervisor before any rank
        starts, so no rank (nor a node's digest writer) runs ``mkdir`` on the metadata server.
        Called again (the run maker makes the first block, the supervisor the rest), it asks
        the server once for each block and once for the shards, not again for each folder."""
        for name in RANK_FOLDERS:
            for block in blocks_of(world_size or 1):
                try:
                    os.mkdir(self.path / name / block)
                except FileExistsError:
                    pass
                except FileNotFoundError:  # the folder itself first
                    (self.path / name / block).mkdir(parents=True, exist_ok=True)
        if (self.nodes_dir / _shard(NODE_SHARDS - 1)).is_dir():  # made in order: all there
            return
        for shard in range(NODE_SHARDS):
            (self.nodes_dir / _shard(shard)).mkdir(parents=True, exist_ok=True)

    def make_rank_folders(self, rank: int) -> None:
        """``rank``'s block in every rank folder: what a rank makes itself when nobody made
        them (a run directory of an older version, a wrapper run by hand)."""
        for name in RANK_FOLDERS:
            (self.path / name / block_name(rank)).mkdir(parents=True, exist_ok=True)

    def rank_folders(self, folder: Path) -> list[Path]:
        """``folder`` and its blocks: where its ranks' files lie, in both layouts. One listing
        of ``folder``; [] when it cannot be listed."""
        try:
            with os.scandir(folder) as entries:
                blocks = [Path(e.path) for e in entries if is_block(e)]
        except OSError:
            return []
        return [folder, *sorted(blocks)]

    def logs(self) -> list[tuple[Path, int]]:
        """Every rank log with its rank, by rank."""
        return _numbered(self.logs_dir, LOG_FILE)

    def statuses(self) -> list[tuple[Path, int]]:
        """Every rank status file with its rank, by rank."""
        return _numbered(self.status_dir, STATUS_FILE)

    def telemetries(self) -> list[tuple[Path, int]]:
        """Every rank telemetry file with its rank, by rank."""
        return _numbered(self.telemetry_dir, JSONL_FILE)

    def flights(self) -> list[tuple[Path, int]]:
        """Every rank's Flight Recorder file with its rank, by rank."""
        return _numbered(self.flight_dir, STATUS_FILE)

    def flight_requests(self) -> list[tuple[Path, int]]:
        """Every rank's FIFO there is, with its rank, by rank (the ranks a reader can ask)."""
        return _numbered(self.flight_dir, FIFO_FILE)

    def raised_files(self) -> list[tuple[Path, int]]:
        """Every rank's ``.raised`` record, with its rank, by rank."""
        return _numbered(self.status_dir, RAISED_FILE)

    def looks_like_run(self) -> bool:
        """Whether anything here was written by a run (ours or ezpz's); never raises."""
        if self.run_toml.is_file() or self.state_json.is_file():
            return True
        if any((self.path / name).is_dir() for name in RANK_FOLDERS):
            return True
        try:
            return any(p.suffix == ".jsonl" for p in self.path.iterdir())
        except OSError:
            return False


def sweep_record(outputs: str | os.PathLike[str], sweep_id: str) -> Path:
    """Where a sweep's record lies: ``<outputs>/sweeps/<sweep-id>.json``. A sweep is not a run
    directory (it runs nothing itself); its runs name it as their ``parent``."""
    return Path(outputs) / SWEEPS / f"{sweep_id}.json"


def is_block(entry: os.DirEntry[str]) -> bool:
    """Whether a folder's entry is a block of ranks (``b0124``); never raises."""
    try:
        return BLOCK_DIR.fullmatch(entry.name) is not None and entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _numbered(folder: Path, pattern: re.Pattern[str]) -> list[tuple[Path, int]]:
    """The files of ``folder`` whose name ``pattern`` matches, with their rank, by rank: in
    its blocks (a listing each) and in itself (a run made before the blocks). A rank found in
    both is its block's."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    found: dict[int, Path] = {}
    blocks = []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match:
            found[int(match.group(1))] = Path(entry.path)
        elif is_block(entry):
            blocks.append(entry.path)
    for block in blocks:
        try:
            inside = list(os.scandir(block))
        except OSError:
            continue
        for entry in inside:
            match = pattern.fullmatch(entry.name)
            if match:
                found[int(match.group(1))] = Path(entry.path)
    return sorted(((path, rank) for rank, path in found.items()), key=lambda item: item[1])


# --- the vocabulary ---------------------------------------------------------------------------


class _Word(str, Enum):
    """A state word that compares, hashes, prints and serialises as its plain value, so JSON,
    TOML, format strings and the UI's style tables take it as the string it is."""

    __str__ = str.__str__
    __format__ = str.__format__


class State(_Word):
    """A run's state: five are written, ``lost``, ``unknown`` and ``queued`` only ever derived
    by readers."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"
    LOST = "lost"  # pending/running, but nobody is left to record its end
    UNKNOWN = "unknown"  # no readable state.json
    QUEUED = "queued"  # a submitted batch job that has not made its run directory yet


WRITTEN = (State.PENDING, State.RUNNING, State.SUCCEEDED, State.FAILED, State.STOPPED)
LIVE = frozenset({State.PENDING, State.RUNNING})
FINAL = frozenset({State.SUCCEEDED, State.FAILED, State.STOPPED})


class RankState(_Word):
    """A rank's state. Its wrapper writes running, succeeded or failed; the run's supervisor
    rewrites the end of a rank it or a peer's failure ended (killed, stopped) and gives one to a
    rank whose wrapper could not write its own; the rest are derived by readers."""

    WAITING = "waiting"  # no status file yet
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # ended by its own exit code or a signal nobody here sent
    KILLED = "killed"  # ended by the launcher or the supervisor after another rank failed
    STOPPED = "stopped"  # ended by the user's stop
    LOST = "lost"  # no end recorded and nobody left to record one
    RAISED = "raised"  # its log ends in an uncaught traceback while its process lives on
    STALLED = "stalled"  # silent while its peers are not
    SLOW = "slow"  # running, its recent steps much slower than the median rank's
    IDLE = "idle"  # silent, with no status file to say it runs (a run ezpz made)
    UNKNOWN = "unknown"  # a status file with a state this version does not know


RANK_WRITTEN = (
    RankState.RUNNING,
    RankState.SUCCEEDED,
    RankState.FAILED,
    RankState.KILLED,
    RankState.STOPPED,
    RankState.LOST,
)
RANK_ENDED = frozenset(
    {RankState.SUCCEEDED, RankState.FAILED, RankState.KILLED, RankState.STOPPED, RankState.LOST}
)


# --- the records ------------------------------------------------------------------------------


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _strs(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _ints(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(_int(v) is not None for v in value):
        return tuple(value)
    return None


def _flag(value: Any) -> bool:
    return value is True


# How a field is read back, by its declared type; a value of another type is not recorded.
_READ_AS: dict[str, Callable[[Any], Any]] = {
    "int | None": _int,
    "float | None": _number,
    "str | None": _str,
    "tuple[str, ...] | None": _strs,
    "tuple[int, ...] | None": _ints,
    "bool": _flag,
}


@functools.cache
def _readers(cls: type) -> tuple[tuple[str, Callable[[Any], Any]], ...]:
    """Each field of ``cls`` with how it is read: looked up once, not per record (a 16,384-rank
    run's statuses are read at once when it is opened)."""
    return tuple((f.name, _READ_AS[str(f.type)]) for f in fields(cls) if str(f.type) in _READ_AS)


def _read_fields(cls: type, data: Mapping[str, Any], skip: set[str]) -> dict[str, Any]:
    """The fields of ``cls`` that ``data`` holds, each read as its declared type."""
    return {
        name: read(data[name]) for name, read in _readers(cls) if name in data and name not in skip
    }


_OWNER = ("host", "boot_id", "pid_ns", "supervisor_pid", "supervisor_start_ticks")


def _to_json(record: RunState | RankStatus, kept_null: Callable[[str], bool]) -> dict[str, Any]:
    """A record's JSON object: unset fields left out unless ``kept_null`` says otherwise, then
    the keys it was read with that this version does not know."""
    out: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if f.name in ("recorded_state", "extra") or value is False:
            continue
        if value is None and not kept_null(f.name):
            continue
        out[f.name] = value.value if isinstance(value, Enum) else value
        if isinstance(value, tuple):
            out[f.name] = list(value)
    return out | {k: v for k, v in record.extra.items() if k not in out}


def _encode(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, indent=1, allow_nan=False).encode("utf-8") + b"\n"


@dataclass(frozen=True)
class RunState:
    """What ``state.json`` says about a run, plus what a reader derived (``lost``, a reason).

    Unset fields are left out of the file, except that the supervisor's identity is written
    whole and so is a launcher's outcome (``exit_code``, ``signal``), with null where there is
    none: the shape earlier versions wrote. Keys this version does not know stay in ``extra``
    and are written back unchanged.
    """

    state: State
    run_id: str | None = None
    created: float | None = None
    # Who supervises the run: its pids mean something only where host, boot and pid namespace
    # are this machine's.
    host: str | None = None
    boot_id: str | None = None
    pid_ns: int | None = None
    supervisor_pid: int | None = None
    supervisor_start_ticks: int | None = None
    updated: float | None = None
    launcher_pid: int | None = None
    launcher_start_ticks: int | None = None
    start: float | None = None
    stop_requested: float | None = None
    end: float | None = None
    exit_code: int | None = None
    signal: int | None = None
    signal_name: str | None = None
    stopped_by_user: bool = False
    reason: str | None = None  # why it failed to start, or why a reader sees it as it does
    failed_rank: int | None = None  # the first rank to fail, whose failure ended the run
    cause: str | None = None  # that failure in words, e.g. "rank 1 on x1: exit 3"
    stop_signals: tuple[str, ...] | None = None
    stop_remaining: tuple[int, ...] | None = None
    stop_elapsed_s: float | None = None
    recorded_state: State | None = None  # derived, never written: what the file said
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        return self.state in LIVE

    def _kept_null(self, name: str) -> bool:
        if name in _OWNER:
            return self.supervisor_pid is not None
        if name == "launcher_start_ticks":
            return self.launcher_pid is not None
        if name in ("exit_code", "signal"):
            return self.end is not None and self.launcher_pid is not None
        return False

    def to_json(self) -> dict[str, Any]:
        """The ``state.json`` object for this state."""
        return _to_json(self, self._kept_null)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunState:
        """Read a ``state.json`` object; an unknown state word is ``unknown`` with a reason."""
        values = _read_fields(cls, data, {"state", "recorded_state", "extra"})
        extra = {k: v for k, v in data.items() if k not in values and k != "state"}
        word = data.get("state")
        if word in WRITTEN:
            return cls(State(word), **values, extra=extra)
        reason = f"{STATE_JSON} has an unrecognised state {word!r}"
        return cls(State.UNKNOWN, **{**values, "reason": reason}, extra=extra)


def _unknown(reason: str) -> RunState:
    return RunState(State.UNKNOWN, reason=reason)


def read_state(run_dir: str | os.PathLike[str]) -> RunState:
    """The state as ``state.json`` records it, or ``unknown`` with the reason; never raises.

    Whether a live state is still true (its supervisor may be gone) is for the reader to judge:
    :func:`ezpz_tui.core.runs.liveness.run_state` does on the machines where it can.
    """
    path = RunDir(Path(run_dir)).state_json
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_RECORD_BYTES + 1)
    except FileNotFoundError:
        return _unknown(f"no {STATE_JSON} (not started by ezpz-tui?)")
    except OSError as exc:
        return _unknown(f"cannot read {STATE_JSON}: {exc.strerror or exc}")
    if len(raw) > _MAX_RECORD_BYTES:
        return _unknown(f"{STATE_JSON} is implausibly large")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        return _unknown(f"{STATE_JSON} is not valid JSON ({exc})")
    if not isinstance(data, dict):
        return _unknown(f"{STATE_JSON} does not hold a JSON object")
    return RunState.from_json(data)


def write_state(run_dir: str | os.PathLike[str], state: RunState, durable: bool = True) -> RunState:
    """Rewrite ``state.json`` as ``state`` with a fresh heartbeat; returns what was written.
    ``durable``: as :func:`runtime.atomic.write_atomic` has it.

    ``ValueError`` for a state readers derive (``lost``, ``unknown``): writing one would
    replace what the run's supervisor knows with a guess.
    """
    if state.state not in WRITTEN:
        words = ", ".join(WRITTEN)
        raise ValueError(f"state must be one of {words}, not {str(state.state)!r}")
    written = replace(state, updated=time.time(), recorded_state=None)
    _replace(RunDir(Path(run_dir)).state_json, _encode(written.to_json()), durable)
    return written


@dataclass(frozen=True)
class RankStatus:
    """What ``status/rank-NNNNN.json`` says about one rank, as its capture wrapper wrote it.

    The wrapper writes every field up to ``state``, ``exit_code`` and ``signal`` from the start
    (null until known); the rest appear only when they apply.
    """

    rank: int
    local_rank: int | None = None
    world_size: int | None = None
    host: str | None = None
    wrapper_pid: int | None = None
    pid: int | None = None
    command: tuple[str, ...] | None = None
    start: float | None = None
    end: float | None = None
    state: RankState = RankState.RUNNING
    exit_code: int | None = None
    signal: int | None = None
    error: str | None = None  # why the command could not be started
    signal_name: str | None = None
    signals_received: tuple[str, ...] | None = None  # what the wrapper forwarded
    cause: str | None = None  # why the supervisor gave it this end, e.g. "after rank 1 failed"
    ended_by: str | None = None  # who wrote the end when the wrapper did not: "supervisor"
    leftovers: tuple[str, ...] | None = None  # processes the rank left, ended by its wrapper
    destroyed_at_exit: bool = False  # its exit hook destroyed the group the script left alive
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The status file's object."""
        return _to_json(self, lambda name: name not in _SOMETIMES)

    @classmethod
    def from_json(cls, data: Mapping[str, Any], rank: int) -> RankStatus:
        """Read a status object; ``rank`` (from the file name) when it names none. A missing
        state is ``running`` (the wrapper writes one; a rank is running until it says not)."""
        values = _read_fields(cls, data, {"rank", "state", "extra"})
        extra = {k: v for k, v in data.items() if k not in values and k not in ("rank", "state")}
        word = data.get("state") or RankState.RUNNING
        state = RankState(word) if word in RANK_WRITTEN else RankState.UNKNOWN
        own = _int(data.get("rank"))
        return cls(rank if own is None else own, **values, state=state, extra=extra)


_SOMETIMES = frozenset(
    {"error", "signal_name", "signals_received", "cause", "ended_by", "leftovers"}
)


def read_status(path: Path, rank: int) -> RankStatus | None:
    """One rank's status; ``None`` while it cannot be read (not there, torn, not an object)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_RECORD_BYTES + 1)
        data = json.loads(raw) if len(raw) <= _MAX_RECORD_BYTES else None
    except (OSError, ValueError, RecursionError):
        return None
    return RankStatus.from_json(data, rank) if isinstance(data, dict) else None


def read_statuses(run_dir: str | os.PathLike[str]) -> list[RankStatus]:
    """Every rank status that can be read, by rank."""
    found = (read_status(path, rank) for path, rank in RunDir(Path(run_dir)).statuses())
    return [status for status in found if status is not None]


def write_status(run_dir: str | os.PathLike[str], status: RankStatus) -> None:
    """Rewrite the rank's status file whole, so a follower never reads half of it (in its
    block, made when nobody made it: a run directory of an older version)."""
    data = _encode(status.to_json())
    try:  # no look at the disk first: the rank's block is there in a run of this version
        _replace(RunDir(Path(run_dir), fresh=True).status(status.rank), data)
    except FileNotFoundError:
        path = RunDir(Path(run_dir)).status(status.rank)  # the flat file of a run made before
        path.parent.mkdir(parents=True, exist_ok=True)
        _replace(path, data)


_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})


def _replace(path: Path, data: bytes, durable: bool = True) -> None:
    """Replace a record atomically; on a full disk (or quota), over the old record in the room
    it holds (:func:`runtime.atomic.overwrite`), then touch its folder, whose modification
    time is how readers learn that a record in it changed. Raises the first error when that
    cannot be done either (no old record, or one too small)."""
    try:
        write_atomic(path, data, durable)
    except OSError as exc:
        if exc.errno not in _FULL:
            raise
        try:
            overwrite(path, data)
            os.utime(path.parent)
        except OSError:
            raise exc from None


# --- what a rank raised ----------------------------------------------------------------------


@dataclass(frozen=True)
class Raised:
    """One uncaught exception of a rank, as its own interpreter recorded it when it was raised
    (``status/rank-NNNNN.raised``, written by :mod:`runtime.raise_hook`): what the rank did
    wrong, and when, whatever happened to it after (a slow exit, a stop's signal)."""

    type: str  # its class, with the module unless a builtin: torch.distributed.DistError
    message: str
    where: str | None = None  # the innermost frame: file:line
    function: str | None = None
    time: float | None = None  # when it was raised (this node's clock)
    thread: str | None = None  # the thread's name; None: the main thread
    traceback: tuple[str, ...] = ()  # as Python prints it, cut to its first line and its end

    @property
    def line(self) -> str:
        """The exception as the traceback's last line says it: ``ValueError: bad batch``."""
        return f"{self.type}: {self.message}" if self.message else self.type


def read_raised(path: Path) -> tuple[Raised, ...]:
    """Every raise a ``.raised`` file records, in the order raised; ``()`` when there is
    none or it cannot be read (torn, foreign). Never raises."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_RECORD_BYTES + 1)
        data = json.loads(raw) if len(raw) <= _MAX_RECORD_BYTES else None
    except (OSError, ValueError, RecursionError):
        return ()
    entries = data.get("raises") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return ()
    found = []
    for entry in entries:
        kind = _str(entry.get("type")) if isinstance(entry, dict) else None
        if kind is None:
            continue
        found.append(
            Raised(
                type=kind,
                message=_str(entry.get("message")) or "",
                where=_str(entry.get("where")),
                function=_str(entry.get("function")),
                time=_number(entry.get("time")),
                thread=_str(entry.get("thread")),
                traceback=_strs(entry.get("traceback")) or (),
            )
        )
    return tuple(found)
