"""Record an uncaught exception in the rank's run directory at the moment it propagates.

When one rank of a job raises, its peers fail after it ("Connection closed by peer", a collective
timeout), and they may well *exit* first: the raising rank's interpreter still has its ``atexit``
work to do (destroying its process group, flushing its trackers) while a peer that lost it is
already gone. So the order in which ranks ended does not say which failed first; the moment of
the raise does, and only the rank's own interpreter sees it. This hook is called by Python as the
exception leaves the main thread (``sys.excepthook``) or a thread (``threading.excepthook``),
before any ``atexit`` function and before the rank's connections close, so the record is on disk
before any peer can notice the failure. It writes the exception's type, message and place, the
time, the thread and the formatted traceback to the file :data:`FILE_VAR` names
(``status/rank-NNNNN.raised``: :meth:`runtime.rundir.RunDir.raised`, read back by
:func:`runtime.rundir.read_raised`), through a temporary file and a rename, then hands the
exception on to the hook it replaced (Python's own prints the traceback to the rank's log).

Only the rank's own process records: the first Python process of the rank to load the hook
claims the file (:data:`OWNER_VAR` in its environment, inherited by the processes it starts,
which then stay silent), and a forked child (a data loader's worker) never writes. Registered by
the capture wrapper's ``sitecustomize`` (loaded by its path under :data:`SHARED_NAME`: the rank's
Python may not be able to import ``runtime``, so this module needs only the standard library).
Silent: a rank must never fail because of it, and an exception it meets while recording is
dropped, not raised.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

# Loaded at every rank's start: what only a raise needs (json, traceback) is imported when one
# comes, and typing never.
TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers; nothing is imported at run time
    from types import TracebackType
    from typing import Any

FILE_VAR = "EZPZ_RAISED_FILE"  # set by the capture wrapper: where the record goes
OWNER_VAR = "EZPZ_RAISED_OWNER"  # the pid of the process that claimed the record
SHARED_NAME = "_ezpz_raise_hook"  # in sys.modules: the copy of this module that registered
MAX_RAISES = 8  # a thread that raises in a loop must not grow the record without end
MAX_MESSAGE = 4000  # characters of an exception's message kept
MAX_LINES = 64  # lines of a formatted traceback kept: its first, then its end

_raises: list[dict[str, Any]] = []
_state: dict[str, Any] = {}  # pid and path of the registration, the hooks replaced
_lock = threading.Lock()


def _type_name(exc_type: type[BaseException]) -> str:
    module = getattr(exc_type, "__module__", None)
    name = getattr(exc_type, "__qualname__", None) or getattr(exc_type, "__name__", "?")
    return name if module in (None, "builtins", "__main__") else f"{module}.{name}"


def _lines(exc_type: type[BaseException], exc: BaseException | None, tb: object) -> list[str]:
    import traceback

    text = "".join(traceback.format_exception(exc_type, exc, tb))  # type: ignore[arg-type]
    lines = text.rstrip("\n").splitlines()
    if len(lines) > MAX_LINES:
        lines = [lines[0], "  ...", *lines[-(MAX_LINES - 2) :]]
    return lines


def describe(
    exc_type: type[BaseException],
    exc: BaseException | None,
    tb: TracebackType | None,
    thread: str | None,
) -> dict[str, Any]:
    """The record of one raise: type, message, where (the innermost frame's ``file:line``), the
    function it was raised in, the time, the thread (None: the main thread) and the traceback."""
    import traceback

    frames = traceback.extract_tb(tb) if tb is not None else []
    last = frames[-1] if frames else None
    try:
        message = str(exc) if exc is not None else ""
    except Exception:
        message = "<the message could not be made>"
    return {
        "type": _type_name(exc_type),
        "message": message[:MAX_MESSAGE],
        "where": f"{last.filename}:{last.lineno}" if last is not None else None,
        "function": last.name if last is not None else None,
        "time": time.time(),
        "thread": thread,
        "traceback": _lines(exc_type, exc, tb),
    }


def _write(path: str) -> None:
    import json

    data = json.dumps({"pid": os.getpid(), "raises": _raises}, indent=1).encode("utf-8")
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as fh:  # the mode a plain open gives, as the other records
            fh.write(data + b"\n")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def record(
    exc_type: type[BaseException],
    exc: BaseException | None,
    tb: TracebackType | None,
    thread: str | None,
) -> None:
    """Add one raise to the record and rewrite it whole; never raises."""
    path = _state.get("path")
    if not path or _state.get("pid") != os.getpid() or len(_raises) >= MAX_RAISES:
        return  # not registered, a forked child, or enough said
    try:
        entry = describe(exc_type, exc, tb, thread)
        with _lock:
            _raises.append(entry)
            _write(path)
    except Exception:
        pass


def _main_hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    record(exc_type, exc, tb, None)
    _state["excepthook"](exc_type, exc, tb)


def _thread_hook(args: Any) -> None:
    if args.exc_type is not SystemExit:  # a thread's sys.exit() is no failure
        name = getattr(args.thread, "name", None) or "a thread"
        record(args.exc_type, args.exc_value, args.exc_traceback, name)
    _state["threading_excepthook"](args)


def register() -> bool:
    """Put the hooks in place, once per process whichever copy of this module asks first, and
    only in the process that claims the rank's record; whether this call did."""
    path = os.environ.get(FILE_VAR)
    owner = os.environ.get(OWNER_VAR)
    if _state or not path or (owner and owner != str(os.getpid())):
        return False
    me = sys.modules.get(__name__)
    if me is None or sys.modules.setdefault(SHARED_NAME, me) is not me:
        return False
    os.environ[OWNER_VAR] = str(os.getpid())
    _state.update(
        pid=os.getpid(),
        path=path,
        excepthook=sys.excepthook,
        threading_excepthook=threading.excepthook,
    )
    sys.excepthook = _main_hook
    threading.excepthook = _thread_hook
    return True
