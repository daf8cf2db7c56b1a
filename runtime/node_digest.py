"""One small file per node saying where each of its ranks is: the node digest.

A reader of a live run at Aurora's size cannot open every rank's files (127,488 ranks, several
files each); it reads one digest a node instead (``nodes/<shard>/node-<host>.json``:
:meth:`runtime.rundir.RunDir.node_digest`, docs/run-directory.md). The ranks of a node report to
one writer on that node, which keeps the digest (each rank's sections and when it last reported)
and rewrites it whole, atomically, at most every :data:`INTERVAL_VAR` seconds and only when it
changed, and at least every :data:`HEARTBEAT_INTERVALS` intervals, so a reader can tell a quiet
node from a dead writer.

The writer is elected without coordination: a Linux abstract unix datagram socket named from the
run directory and the host. Whichever process of the node binds it first is the writer (a daemon
thread in that rank's own process); the others ``sendto`` it. When a send finds nobody there
(the writer's process ended or died: ``ECONNREFUSED``, ``ENOENT``), the sender binds the name
itself and becomes the writer, starting from the digest its predecessor left. Nothing starts at
import or at the interpreter's start: the first :func:`report` does (``runtime.History``'s
flusher, the telemetry sampler, the Flight Recorder thread), so a program that reports nothing
pays nothing.

It must never hurt the rank: sends are non-blocking and dropped when the writer's buffer is full,
a section is sent at most every :data:`REPORT_EVERY_S` per process (a time check otherwise), and
nothing here raises into the rank's program. Standard library only, and little of it at import:
every rank imports this.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers; nothing is imported at run time
    import socket
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

INTERVAL_VAR = "EZPZ_NODE_DIGEST_S"
"""Seconds between a digest's rewrites (when it changed); ``0`` turns node digests off."""
DEFAULT_INTERVAL_S = 2.0
HEARTBEAT_INTERVALS = 5  # an unchanged digest is still rewritten this often: the writer lives
REPORT_EVERY_S = 0.5  # the most often one process sends one section
MAX_DATAGRAM = 32 << 10  # a report larger than this is dropped (and said nowhere)
FORMAT = 1


def interval_s(env: Mapping[str, str] | None = None) -> float:
    """Seconds between rewrites from :data:`INTERVAL_VAR`; a value that is not a number of
    seconds gives the default, ``0`` (or less) turns the digests off."""
    raw = (os.environ if env is None else env).get(INTERVAL_VAR, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_INTERVAL_S
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if value == value and value != float("inf") else DEFAULT_INTERVAL_S


def address(run_dir: str | os.PathLike[str], host: str) -> bytes:
    """The node's abstract socket name: the run directory (resolved, so every rank of the run
    names it alike) and the host. Abstract: nothing on a filesystem to make or sweep."""
    import hashlib  # here: the capture wrapper imports this module, and starts light

    digest = hashlib.sha1(os.path.realpath(run_dir).encode()).hexdigest()[:16]
    return f"\0ezpz-{digest}-{host}".encode()[:107]


def report(
    section: str,
    value: Mapping[str, Any],
    *,
    now: bool = False,
    rank: int | None = None,
    may_write: bool = True,
    run_dir: str | os.PathLike[str] | None = None,
) -> None:
    """Put ``value`` (a JSON-able mapping) as this rank's ``section`` in its node's digest.

    From any thread; never raises. At most one send per section every :data:`REPORT_EVERY_S`
    per process, the rest dropped, unless ``now`` (a last word: a rank's end). ``rank``: for a
    process reporting on a rank's behalf (the capture wrapper's sampler), else this process's
    rank. ``may_write=False``: never become the node's writer (the capture wrapper, which is
    not a rank), so the report is dropped while no rank of the node has reported.
    ``run_dir``: the run's directory for a process without ``EZPZ_RUN_DIR`` (the wrapper);
    the first report of a process fixes it.
    """
    try:
        key = (section, rank)
        tick = time.monotonic()
        last = _last_sent.get(key)
        if not now and last is not None and tick - last < REPORT_EVERY_S:
            return
        _last_sent[key] = tick
        client = _clients[0] if _clients else _start(run_dir)
        if client is not None:
            client.send(section, value, rank, may_write)
    except Exception:  # a report must never hurt the rank
        return


def flush() -> None:
    """Rewrite the digest now, when this process is its node's writer: a rank's last word
    before its interpreter exits. Never raises."""
    with contextlib.suppress(Exception):
        client = _clients[0] if _clients else None
        if client is not None and client.writer is not None:
            client.writer.write(force=True)


_last_sent: dict[tuple[str, int | None], float] = {}
_clients: list[_Client | None] = []  # one per process once started; [None]: off here
_start_lock = threading.Lock()


def _start(run_dir: str | os.PathLike[str] | None) -> _Client | None:
    with _start_lock:
        if not _clients:
            _clients.append(_make_client(run_dir))
    return _clients[0]


def _make_client(run_dir: str | os.PathLike[str] | None) -> _Client | None:
    """The client of this process, or None when there is no run directory to write in or the
    digests are off."""
    from runtime.env import RUN_DIR_VAR, rank_info_or_single

    run_dir = os.environ.get(RUN_DIR_VAR) if run_dir is None else os.fspath(run_dir)
    every = interval_s()
    if not run_dir or every <= 0:
        return None
    return _Client(run_dir, rank_info_or_single().rank, os.uname().nodename, every)


class _Client:
    """This process's side: sends its reports to the node's writer, or is the writer."""

    def __init__(self, run_dir: str, rank: int, host: str, every: float) -> None:
        self.run_dir, self.rank, self.host, self.every = run_dir, rank, host, every
        import socket  # here, not at the top: the capture wrapper imports this module

        self.address = address(run_dir, host)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
        self.sock.setblocking(False)
        self.writer: _Writer | None = None
        self._elect_lock = threading.Lock()

    def send(
        self, section: str, value: Mapping[str, Any], rank: int | None, may_write: bool
    ) -> None:
        message = {"rank": self.rank if rank is None else rank, "section": section}
        message["value"], message["t"] = dict(value), time.time()
        if may_write:  # a rank's own process: its pid tells the writer whether it still lives
            message["pid"] = os.getpid()
        data = _encode(message)  # what cannot be encoded raises here, into report's except
        if len(data) > MAX_DATAGRAM:
            return
        writer = self.writer
        if writer is not None:
            writer.take(message)
            return
        try:
            self.sock.sendto(data, self.address)
        except (ConnectionRefusedError, FileNotFoundError):  # no writer: the node has none
            if may_write and self._elect():
                self.writer.take(message)  # type: ignore[union-attr]
                return
            with contextlib.suppress(OSError):  # another process won the election meanwhile
                self.sock.sendto(data, self.address)
        except OSError:  # a full buffer (EAGAIN), or anything else: this report is dropped
            return

    def _elect(self) -> bool:
        """Bind the node's name: True when this process is now its writer."""
        with self._elect_lock:
            if self.writer is not None:
                return True
            import socket

            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            try:
                sock.bind(self.address)
            except OSError:  # EADDRINUSE: someone else is the writer
                sock.close()
                return False
            from runtime.rundir import RunDir

            path = RunDir(self.run_dir).node_digest(self.host)
            writer = _Writer(sock, path, self.rank, self.host, self.every)
            writer.start()
            self.writer = writer
            return True


class _Writer:
    """The node's writer: a daemon thread that takes the node's reports from its socket (and
    from its own process directly) and rewrites the digest."""

    def __init__(self, sock: socket.socket, path: Path, rank: int, host: str, every: float):
        self.sock, self.path, self.rank, self.host, self.every = sock, path, rank, host, every
        self.ranks: dict[str, dict[str, Any]] = _seed(path)
        self._own: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # ranks, _own, _changed, _written
        self._changed = True  # a new writer says so at once
        self._written = 0.0
        self._gone: set[str] = set()
        self._stop = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="ezpz-node-digest", daemon=True).start()
        atexit.register(flush)  # the digest as this process leaves it, its own ranks' ends too

    def take(self, message: dict[str, Any]) -> None:
        """A report of this very process: no socket between a rank and itself."""
        with self._lock:
            self._own.append(message)

    def _run(self) -> None:
        self.sock.settimeout(min(self.every, 0.5))
        try:
            while not self._stop.is_set():
                try:
                    data = self.sock.recv(MAX_DATAGRAM + 1)
                except TimeoutError:
                    data = None
                if data is not None:
                    with contextlib.suppress(ValueError):
                        self._merge(json.loads(data))
                self._merge_own()
                with contextlib.suppress(Exception):  # a failed write is tried again next time
                    self.write()
        except Exception:  # the writer must never raise into anything; readers fall back
            return

    def _drain(self) -> None:
        """Take in what waits in the socket now: the last words of ranks that ended just before
        this process (a datagram sent after its last write is lost with it; readers then read
        that rank's own status, as for a rank the digest calls gone)."""
        import select

        with contextlib.suppress(OSError, ValueError):
            while select.select([self.sock], [], [], 0)[0]:
                self._merge(json.loads(self.sock.recv(MAX_DATAGRAM + 1)))

    def _merge_own(self) -> None:
        with self._lock:
            own, self._own = self._own, []
        for message in own:
            self._merge(message)

    def _merge(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        rank, section, value = message.get("rank"), message.get("section"), message.get("value")
        if not isinstance(rank, int) or not isinstance(section, str) or section in _KEYS:
            return
        with self._lock:
            entry = self.ranks.setdefault(str(rank), {})
            entry[section] = value
            when = message.get("t")
            entry["t"] = when if isinstance(when, (int, float)) else time.time()
            pid = message.get("pid")
            if isinstance(pid, int):
                entry["pid"] = pid
            self._changed = True

    def write(self, force: bool = False) -> None:
        """Rewrite the digest when it changed and an interval has passed since the last write,
        or a heartbeat's worth has; ``force``: now, changed or not."""
        if force:
            self._drain()
            self._merge_own()
        now = time.time()
        since = now - self._written
        if since < self.every and not force:  # the common case: a time check per report
            return
        with self._lock:
            self._mark_gone()
            if not (force or self._changed or since >= self.every * HEARTBEAT_INTERVALS):
                return
            digest = {
                "format": FORMAT,
                "host": self.host,
                "written": now,
                "writer": {"rank": self.rank, "pid": os.getpid()},
                "interval_s": self.every,
                "heartbeat_s": self.every * HEARTBEAT_INTERVALS,
                "ranks": self.ranks,
            }
            data = _encode(digest)
            self._changed, self._written = False, now
        from runtime.atomic import write_atomic

        try:
            write_atomic(self.path, data, durable=False)
        except FileNotFoundError:  # the shard's folder: made by its node's first writer
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, data, durable=False)

    def _mark_gone(self) -> None:
        """A rank of this node whose process is gone without saying it ended is ``gone``: the
        writer is on the rank's node, where its pid means that process."""
        for rank, entry in self.ranks.items():
            pid = entry.get("pid")
            if rank in self._gone or not isinstance(pid, int) or pid == os.getpid():
                continue
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                self._gone.add(rank)
                state = entry.get("state")
                if not isinstance(state, dict) or state.get("state") == "running":
                    entry["state"] = {"state": "gone", "pid": pid}
                    self._changed = True
            except OSError:  # another user's process with that pid: alive
                continue


_KEYS = frozenset({"t", "pid"})  # what the writer keeps beside a rank's sections


def _seed(path: Path) -> dict[str, dict[str, Any]]:
    """The ranks a predecessor's digest held: a new writer keeps what it knew (the dead
    writer's own rank among it)."""
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read(MAX_DATAGRAM * 64))
        ranks = data.get("ranks") if isinstance(data, dict) else None
    except (OSError, ValueError):
        return {}
    if not isinstance(ranks, dict):
        return {}
    return {k: v for k, v in ranks.items() if isinstance(v, dict)}


def _encode(data: Mapping[str, Any]) -> bytes:
    """JSON; a non-finite number becomes the string the metric records spell it with."""
    try:
        return json.dumps(data, separators=(",", ":"), allow_nan=False).encode()
    except ValueError:
        return json.dumps(_finite(data), separators=(",", ":"), allow_nan=False).encode()


def _finite(value: Any) -> Any:
    if isinstance(value, float) and value - value != 0.0:
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _abandon() -> None:
    """End this process's part as if it had died (for tests of a writer's death): the writer's
    socket closed, its thread stopped, and no report sent from here again."""
    client = _clients[0] if _clients else None
    _clients[:] = [None]
    if client is not None and client.writer is not None:
        client.writer._stop.set()
        client.writer.sock.close()
