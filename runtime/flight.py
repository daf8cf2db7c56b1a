"""Keep torch's Flight Recorder on in every rank, report where each group got, and put the
entries in the run directory when asked.

The Flight Recorder keeps, per rank, a ring of the newest collectives the process groups ran
(sequence number, op, group, sizes, dtypes, the time it was called), for gloo as for NCCL, once
``TORCH_FR_BUFFER_SIZE`` is set before the group is made. Matched across ranks it says which
rank never entered which collective of a hung job, and which rank everyone waits for
(:mod:`ezpz_tui.core.watching.collectives`). So the capture wrapper turns it on (:func:`add_env`;
``EZPZ_FLIGHT_RECORDER=0``, set from ``[collectives] flight_recorder = false``, turns it off,
torch's own ring too) and every rank gets a daemon thread that:

* every :data:`INTERVAL_VAR` seconds (on the wall clock's multiples of it, so every rank looks
  at about the same moment) looks at the rank's **progress**: per group the last sequence
  number it entered and completed, that collective's op, sizes and dtypes, and when it entered
  each of the newest :data:`ARRIVALS` (:func:`progress`); from torch's status alone
  (microseconds) while nothing was entered or completed since. It reports it into its node's
  digest (:mod:`runtime.node_digest`, section ``"flight"``; a few hundred bytes) when it
  changed, which the digest's writer rewrites within its own interval. Readers judge a live
  run from these: no file per rank is rewritten while it runs (at 127,488 ranks that was
  ~25,500 creates and renames a second in one folder);
* writes the newest entries whole to its file in ``flight/`` at once when asked through the
  rank's FIFO beside that file: ``ezpz-tui stacks``, ``profile`` and the TUI (``S``, and a run
  that turned ``hung``) write a byte into it, as they send SIGUSR1 for the stacks. A thread,
  because the main thread may be blocked inside the very collective;
* writes them once more at the interpreter's exit, so a finished run keeps its entries (a rank
  that raised too); and just before ``runtime.cleanup()`` destroys the group, after which
  torch has none to give.

The same FIFO carries a request to profile the next N steps (``p<N>``), which this thread keeps
in :data:`profile_requests` for the step hook (:mod:`runtime.profiling`). It lives only while its
rank does: the wrapper removes it when the rank ends (:func:`remove_request`), and whoever records
the run's end sweeps those a killed wrapper left (:func:`remove_requests`), so a finished run holds
only regular files and folders. A FIFO on a shared filesystem is a pipe in the kernel of the node
that opens it, so only a reader on the rank's node can reach the rank through it.

The thread starts when ``torch.distributed`` is first imported (a script that never imports it
pays nothing) and never raises: a rank must not fail because of it. Registered once per process
by whichever comes first, the capture wrapper's ``sitecustomize`` (which loads this file by its
path under :data:`SHARED_NAME`, so it needs only the standard library) or ``runtime.setup()``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import stat
import sys
import time

# Loaded at every rank's start: what only the thread needs (json, select, threading) is imported
# when it starts, and typing never.
TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers; nothing is imported at run time
    from collections.abc import Callable, Mapping, MutableMapping, Sequence
    from typing import Any

ENABLE_VAR = "EZPZ_FLIGHT_RECORDER"
INTERVAL_VAR = "EZPZ_FLIGHT_INTERVAL_S"
FILE_VAR = "EZPZ_FLIGHT_FILE"  # set by the capture wrapper: where this rank's entries go
FIFO_VAR = "EZPZ_FLIGHT_FIFO"  # set by the capture wrapper: where a dump is asked for
BUFFER_VAR = "TORCH_FR_BUFFER_SIZE"
FIFO_SUFFIX = ".fifo"  # a rank's request pipe in flight/: rank-NNNNN.fifo (runtime.rundir)
SHARED_NAME = "_ezpz_flight"
DEFAULT_BUFFER = 512  # a larger ring only costs each dump more: a few hundred are written
DEFAULT_INTERVAL_S = 5.0
KEEP = 128  # newest entries written; the groups' status says how far each got beyond them
ARRIVALS = 32  # arrival times a group's progress keeps: the lag is a median over as many
SECTION = "flight"  # the node digest's section the progress goes in (runtime.node_digest)
RESEND = 6  # an unchanged progress is sent again after this many intervals (one may be dropped)
# torch's own names, kept: a reader that knows its analyzer knows these.
FIELDS = (
    "collective_seq_id",
    "p2p_seq_id",
    "pg_id",
    "process_group",
    "profiling_name",
    "input_sizes",
    "input_dtypes",
    "output_sizes",
    "output_dtypes",
    "state",
    "time_created_ns",
    "is_p2p",
)
_OFF = ("0", "no", "false", "off")
_DIST = "torch.distributed"


def wanted(env: Mapping[str, str]) -> bool:
    """Whether ``env`` leaves the Flight Recorder on (``EZPZ_FLIGHT_RECORDER=0`` turns it off)."""
    return env.get(ENABLE_VAR, "1").strip().lower() not in _OFF


def add_env(env: MutableMapping[str, str], dump: str, fifo: str, nccl_prefix: str) -> None:
    """Turn the Flight Recorder on in a rank's environment, or off where it is switched off:
    torch keeps a ring of 2,000 entries when ``TORCH_FR_BUFFER_SIZE`` is unset (2.13; older
    versions none), so off must say 0. Values the user set win either way."""
    if not wanted(env):
        env.setdefault(BUFFER_VAR, "0")
        return
    env.setdefault(BUFFER_VAR, str(DEFAULT_BUFFER))
    env.setdefault("TORCH_NCCL_DUMP_ON_TIMEOUT", "1")  # NCCL's own dump when a watchdog fires
    env.setdefault("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", nccl_prefix)
    env[FILE_VAR], env[FIFO_VAR] = dump, fifo


def interval_s(env: Mapping[str, str]) -> float:
    """Seconds between two looks at the recorder: ``EZPZ_FLIGHT_INTERVAL_S``, else 5."""
    try:
        value = float(env.get(INTERVAL_VAR, ""))
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if value > 0 else DEFAULT_INTERVAL_S


def ask(fifo: str, what: bytes = b"d") -> str | None:
    """Ask the rank behind ``fifo`` to write its entries now (and, with ``b"p5"``, to profile
    its next 5 steps: :mod:`runtime.profiling`); why not, or None when asked. Never blocks: a
    FIFO nobody reads (the rank is gone, or its recorder off) refuses at once."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        return (
            "no Flight Recorder request pipe: the rank has ended (its pipe is removed then), "
            "or its recorder is off or not started yet"
        )
    except OSError as exc:
        return f"its Flight Recorder does not listen: {exc.strerror or exc}"
    try:
        os.write(fd, what + b"\n")
    except BlockingIOError:
        pass  # the pipe is full of earlier requests: the rank will answer those
    except OSError as exc:
        return f"cannot ask its Flight Recorder: {exc.strerror or exc}"
    finally:
        os.close(fd)
    return None


def remove_request(fifo: str | os.PathLike[str]) -> None:
    """Remove a rank's FIFO once the rank has ended, so the finished run holds only regular
    files and folders (a copy, an archive or a transfer of it chokes on a named pipe). Only a
    FIFO is removed: a path something else now holds is left alone; never raises."""
    with contextlib.suppress(OSError):
        if stat.S_ISFIFO(os.lstat(fifo).st_mode):
            os.unlink(fifo)


def remove_requests(folder: str | os.PathLike[str]) -> int:
    """Remove every rank's FIFO left in ``folder`` (a run's ``flight/``) by ranks whose wrapper
    could not (killed with it); how many. Cheap at 127,488 ranks: one listing, and an unlink
    per ``*.fifo`` name (:meth:`runtime.rundir.RunDir.flight_request`), no ``stat``; never
    raises. Called by whoever records the run's end, when every rank has ended."""
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        if entry.name.endswith(FIFO_SUFFIX):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed += 1
    return removed


def snapshot(*raws: bytes | str, keep: int = KEEP) -> dict[str, Any]:
    """The part of torch's dumps (``_dump_fr_trace_json``, and ``_dump_nccl_trace_json`` where
    torch has NCCL) a reader uses: each group's config and status and the newest ``keep``
    entries with :data:`FIELDS`, in the order they were called."""
    entries: list[dict[str, Any]] = []
    config: dict[str, Any] = {}
    status: dict[str, Any] = {}
    version = None
    import json

    for raw in raws:
        data = json.loads(raw)
        entries += data.get("entries") or []
        config.update(data.get("pg_config") or {})
        status.update(data.get("pg_status") or {})
        version = version or data.get("version")
    if len(raws) > 1:
        entries.sort(key=lambda e: e.get("time_created_ns") or 0)
    return {
        "fr_version": version,
        "pg_config": config,
        "pg_status": status,
        "entries": [{k: e.get(k) for k in FIELDS} for e in entries[-keep:]],
    }


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def progress(dumps: Sequence[Mapping[str, Any]], at: float, every: float) -> dict[str, Any]:
    """Where each of the rank's process groups got, from torch's dumps (the JSON ones or the
    pickled ones, parsed): by the group's name (the same on every member), its description, the
    last sequence number entered (its status' ``last_enqueued_collective``, or its newest entry)
    and completed, the op, sizes and dtypes of the newest entry, and the times the newest
    :data:`ARRIVALS` consecutive sequence numbers were entered: ``seq``, the first of them,
    ``t_ns`` when it was, ``dt_us`` each next one after it. ``at``: when torch was asked;
    ``every``: the interval, so a reader knows how stale a report may be."""
    entries: dict[str, dict[int, Mapping[str, Any]]] = {}
    status: dict[int, Mapping[str, Any]] = {}
    for data in dumps:
        for pg_id, said in (data.get("pg_status") or {}).items():
            if _int(pg_id) is not None and isinstance(said, dict):
                status[int(pg_id)] = said
        for entry in data.get("entries") or ():
            seq = entry.get("collective_seq_id")
            if not isinstance(seq, int) or seq <= 0 or entry.get("is_p2p"):
                continue
            pg = entry.get("process_group") or ("", "")
            entries.setdefault(str(pg[0]), {})[seq] = entry
    groups: dict[str, Any] = {}
    for name, calls in entries.items():
        newest = max(calls)
        last = calls[newest]
        pg = last.get("process_group") or ("", "")
        said = status.get(last.get("pg_id")) or {}  # type: ignore[arg-type]
        entered = max(newest, _int(said.get("last_enqueued_collective")) or 0)
        first = newest
        while first - 1 in calls and newest - first + 1 < ARRIVALS:
            first -= 1
        t0 = calls[first].get("time_created_ns") or 0
        dt_us = [
            ((calls[seq].get("time_created_ns") or 0) - t0) // 1000
            for seq in range(first + 1, newest + 1)
        ]
        groups[name] = {
            "desc": str(pg[1]) if len(pg) > 1 else "",
            "entered": entered,
            "completed": _int(said.get("last_completed_collective")),
            "op": str(last.get("profiling_name") or "?").rpartition(":")[2],
            "sizes": [list(size) for size in last.get("input_sizes") or ()],
            "dtypes": [str(dtype) for dtype in last.get("input_dtypes") or ()],
            "seq": first,
            "t_ns": t0,
            "dt_us": dt_us,
        }
    return {"at": at, "every": every, "groups": groups}


def _recorders(dist: Any) -> list[tuple[Any, Any]]:
    """This process's recorders as (JSON dump, pickled dump) functions: the CPU one (gloo's
    groups) and, where torch has NCCL, the CUDA one (NCCL's); none before the default group
    exists."""
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return []
    c10d = sys.modules["torch"]._C._distributed_c10d
    found = [(c10d._dump_fr_trace_json, c10d._dump_fr_trace)]
    nccl = getattr(c10d, "_dump_nccl_trace_json", None), getattr(c10d, "_dump_nccl_trace", None)
    if None not in nccl:
        found.append(nccl)
    return found


def _dump() -> dict[str, Any] | None:
    """This process's recorders now, or None before its default group exists.

    torch keeps one recorder per kind of event: the CPU one (gloo's groups) dumps through
    ``_dump_fr_trace_json``, the CUDA one (NCCL's) only through ``_dump_nccl_trace_json``, which a
    build without NCCL lacks. A job may have both (an NCCL job's gloo group for checkpoints)."""
    recorders = _recorders(sys.modules.get(_DIST))
    if not recorders:
        return None
    raws = []
    for as_json, _ in recorders:
        with contextlib.suppress(RuntimeError):  # a CUDA build whose job made no NCCL group
            raws.append(as_json(True, False))
    return snapshot(*raws) if raws else None


def _progress_now(last: tuple[tuple[bytes, ...], dict[str, Any]] | None, every: float) -> Any:
    """(torch's status, the progress) now; ``last``'s progress, newly dated, while the status is
    the same (no collective entered or completed since: a hung rank's look costs microseconds).
    Otherwise the entries without their Python stacks, pickled (the cheapest of torch's dumps:
    ``bench/flight_bench.py``'s "dump"). None before the default group exists."""
    import pickle

    recorders = _recorders(sys.modules.get(_DIST))
    if not recorders:
        return None
    at = time.time()
    said = []
    for as_json, _ in recorders:
        with contextlib.suppress(RuntimeError):
            said.append(as_json(False, False))
    status = tuple(said)
    if last is not None and last[0] == status:
        return status, {**last[1], "at": at}
    dumps = []
    for _, pickled in recorders:
        with contextlib.suppress(RuntimeError):
            dumps.append(pickle.loads(pickled(True, False, False)))  # torch's own, in-process
    return status, progress(dumps, at, every)


def _write(path: str, text: str) -> None:
    """Replace ``path`` whole, so a reader never sees half a dump."""
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _listen(fifo: str) -> int | None:
    """The FIFO opened for reading, made first if need be; None when it cannot be. Opened for
    writing too, so it never reads as hung up between two requests (Linux allows it)."""
    try:
        os.mkfifo(fifo, 0o600)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            os.close(fd)
            return None
    except OSError:
        return None
    return fd


class _Recorder:
    """The daemon thread that reports the rank's progress every interval and writes its
    entries when asked."""

    def __init__(self, dump: str, fifo: str, every: float) -> None:
        import threading

        self.dump, self.fifo, self.every = dump, fifo, every
        self.pid = os.getpid()
        self.looked: tuple[tuple[bytes, ...], dict[str, Any]] | None = None
        self.sent: dict[str, Any] | None = None  # the progress last sent, but its time
        self.unchanged = 0  # intervals since
        self.lock = threading.Lock()  # the thread's writes and the one at exit
        thread = threading.Thread(target=self._run, name="ezpz-flight-recorder", daemon=True)
        thread.start()

    def _wait(self, fd: int | None, seconds: float) -> bool:
        """Up to ``seconds``, or until a request came: whether one did."""
        if fd is None:
            time.sleep(seconds)
            return False
        import select

        ready, _, _ = select.select([fd], [], [], max(seconds, 0.0))
        if not ready:
            return False
        with contextlib.suppress(OSError):
            for word in os.read(fd, 4096).split():
                if word[:1] == b"p" and word[1:].isdigit() and int(word[1:]) > 0:
                    profile_requests.append(int(word[1:]))
        return True

    def _run(self) -> None:
        fd = _listen(self.fifo)
        while True:
            due = (time.time() // self.every + 1) * self.every  # every rank at about one moment
            while (left := due - time.time()) > 0:
                if self._wait(fd, left):
                    self.write("asked")
            self.report()

    def report(self, now: bool = False) -> None:
        """The progress into the node's digest when it changed (``now``: in any case, past the
        digest's rate limit: a last word), and every :data:`RESEND` intervals even if not, so
        a hung rank leaves its node's digest unchanged (rewritten at its heartbeat only) and a
        dropped report is made good; never raises."""
        try:
            looked = _progress_now(self.looked, self.every)
            if looked is None:
                return
            self.looked = looked
            said = {k: v for k, v in looked[1].items() if k != "at"}
            self.unchanged += 1
            if not now and said == self.sent and self.unchanged < RESEND:
                return
            send = _reporter()
            if send is not None:
                send(SECTION, looked[1], now=now)
                self.sent, self.unchanged = said, 0
        except Exception:  # a rank must never fail because of this; try again next time
            return

    def write(self, why: str) -> None:
        """Write the entries whole (``why``: ``"asked"`` or ``"end"``, kept in the file so a
        reader knows it is no periodic rewrite); never raises."""
        import json

        with self.lock:
            try:
                found = _dump()
                if found is None:
                    return
                record = {"rank": _rank(), "pid": self.pid, "time": time.time(), **found}
                record["interval_s"] = self.every
                record["written"] = why
                _write(self.dump, json.dumps(record, separators=(",", ":")))
            except Exception:  # a rank must never fail because of this; try again next time
                return


def _reporter() -> Callable[..., Any] | None:
    """:func:`runtime.node_digest.report`; None where the rank's Python cannot import
    ``runtime`` (the wrapper's ``sitecustomize`` loaded this file by its path): no digest then,
    and readers fall back to the files."""
    try:
        from runtime import node_digest
    except Exception:
        return None
    return node_digest.report


def _rank() -> int | None:
    try:
        return int(os.environ.get("RANK", ""))
    except ValueError:
        return None


_recorder: list[_Recorder] = []
# Steps to profile, as asked through the FIFO: read by runtime.profiling at a step's end.
profile_requests: list[int] = []


def _arm() -> None:
    """Start the recorder thread, once; one that cannot start leaves the rank as it was."""
    dump, fifo = os.environ.get(FILE_VAR), os.environ.get(FIFO_VAR)
    if not _recorder and dump and fifo:
        with contextlib.suppress(Exception):
            _recorder.append(_Recorder(dump, fifo, interval_s(os.environ)))


def at_exit() -> None:
    """The last entries and progress, at the interpreter's exit: every rank that ends leaves
    them, a run shorter than one interval or a rank that raised too (before the exit hook
    destroys a group left alive). The node's digest is rewritten with them at once where this
    process is its writer (whose own exit hook ran before this one)."""
    if _recorder and _recorder[0].pid == os.getpid():
        _recorder[0].write("end")
        _recorder[0].report(now=True)
        with contextlib.suppress(Exception):
            from runtime import node_digest

            node_digest.flush()


def write_now() -> None:
    """The entries now, from whichever copy of this module runs the recorder: a program that
    ends cleanly destroys its group before the interpreter exits (``runtime.cleanup``), and
    torch has nothing left to give :func:`at_exit` then, so the file would keep only what
    was last asked for, or nothing."""
    shared = sys.modules.get(SHARED_NAME)
    if shared is not None:
        shared.at_exit()


class _WhenImported:
    """Starts the recorder when ``torch.distributed`` is first imported; finds nothing.

    It stays on ``sys.meta_path``: taking itself off while the import system walks that list
    would make the walk skip the finder after it, the exit hook's, whose destroyer would then
    never start (the group left alive at exit aborts the rank; docs/pitfalls.md)."""

    def __init__(self) -> None:
        self.fired = False

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == _DIST and not self.fired:
            self.fired = True
            _arm()
        return None


_registered: list[bool] = []


def register() -> bool:
    """Start the recorder thread when ``torch.distributed`` is imported (at once if it is),
    once per process whichever copy of this module asks first; whether this call did."""
    if _registered or not wanted(os.environ) or not os.environ.get(FILE_VAR):
        return False
    me = sys.modules.get(__name__)
    if me is None or sys.modules.setdefault(SHARED_NAME, me) is not me:
        return False
    _registered.append(True)
    atexit.register(at_exit)  # after the exit hook's: so it runs first
    if _DIST in sys.modules:
        _arm()
    else:
        sys.meta_path.insert(0, _WhenImported())
    return True
