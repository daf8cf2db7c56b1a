"""Keep torch's Flight Recorder on in every rank and put what it holds in the run directory.

The Flight Recorder keeps, per rank, a ring of the newest collectives the process groups ran
(sequence number, op, group, sizes, dtypes, the time it was called), for gloo as for NCCL, once
``TORCH_FR_BUFFER_SIZE`` is set before the group is made. Matched across ranks it says which
rank never entered which collective of a hung job, and which rank everyone waits for
(:mod:`ezpz_tui.core.watching.collectives`). So the capture wrapper turns it on (:func:`add_env`;
``EZPZ_FLIGHT_RECORDER=0``, set from ``[collectives] flight_recorder = false``, turns it off,
torch's own ring too)
and every rank gets a daemon thread that writes the newest entries to its file in ``flight/``:

* every :data:`INTERVAL_VAR` seconds when they changed, so a reader can follow a live run and
  the collective a hung job waits in is on disk within one interval;
* at once when asked through the rank's FIFO beside that file: ``ezpz-tui stacks`` and the TUI
  (``S``, and a run that turned ``hung``) write a byte into it, as they send SIGUSR1 for the
  stacks. A thread, because the main thread may be blocked inside the very collective;
* once more at the interpreter's exit, so a run shorter than an interval, or a rank that
  raised, leaves its entries too; and just before ``runtime.cleanup()`` destroys the group, after
  which torch has none to give.

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
    from collections.abc import Mapping, MutableMapping
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


def _dump() -> dict[str, Any] | None:
    """This process's recorders now, or None before its default group exists.

    torch keeps one recorder per kind of event: the CPU one (gloo's groups) dumps through
    ``_dump_fr_trace_json``, the CUDA one (NCCL's) only through ``_dump_nccl_trace_json``, which a
    build without NCCL lacks. A job may have both (an NCCL job's gloo group for checkpoints)."""
    dist = sys.modules.get(_DIST)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    c10d = sys.modules["torch"]._C._distributed_c10d
    raws = [c10d._dump_fr_trace_json(True, False)]
    nccl = getattr(c10d, "_dump_nccl_trace_json", None)
    if nccl is not None:
        with contextlib.suppress(RuntimeError):  # a CUDA build whose job made no NCCL group
            raws.append(nccl(True, False))
    return snapshot(*raws)


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
    """The daemon thread that writes the rank's entries, by interval and on request."""

    def __init__(self, dump: str, fifo: str, every: float) -> None:
        import threading

        self.dump, self.fifo, self.every = dump, fifo, every
        self.pid = os.getpid()
        self.last: dict[str, Any] | None = None
        self.lock = threading.Lock()  # the thread's writes and the one at exit
        thread = threading.Thread(target=self._run, name="ezpz-flight-recorder", daemon=True)
        thread.start()

    def _wait(self, fd: int | None) -> None:
        """Until the interval is over or a request came, whichever is first."""
        if fd is None:
            time.sleep(self.every)
            return
        import select

        ready, _, _ = select.select([fd], [], [], self.every)
        if ready:
            with contextlib.suppress(OSError):
                for word in os.read(fd, 4096).split():
                    if word[:1] == b"p" and word[1:].isdigit() and int(word[1:]) > 0:
                        profile_requests.append(int(word[1:]))

    def _run(self) -> None:
        fd = _listen(self.fifo)
        while True:
            self._wait(fd)
            self.write()

    def write(self) -> None:
        """Write the entries if they changed since the last write; never raises."""
        import json

        with self.lock:
            try:
                found = _dump()
                if found is None or found == self.last:
                    return
                self.last = found
                record = {"rank": _rank(), "pid": self.pid, "time": time.time(), **found}
                record["interval_s"] = self.every
                _write(self.dump, json.dumps(record, separators=(",", ":")))
            except Exception:  # a rank must never fail because of this; try again next time
                return


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
    """The last entries, at the interpreter's exit: a run shorter than one interval, or a rank
    that raised, still leaves them (before the exit hook destroys a group left alive)."""
    if _recorder and _recorder[0].pid == os.getpid():
        _recorder[0].write()


def write_now() -> None:
    """The entries now, from whichever copy of this module runs the recorder: a program that
    ends cleanly destroys its group before the interpreter exits (``runtime.cleanup``), and
    torch has nothing left to give :func:`at_exit` then, so the file would keep the last
    interval's entries, or none in a run shorter than one."""
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
