"""Destroy the process group a script left alive, when the interpreter exits.

A script that never calls ``dist.destroy_process_group()`` (the Hugging Face Trainer, Lightning
Fabric, a plain DDP loop) leaves its group to the interpreter's teardown, where a backend thread
may drop the last references and abort the rank after all its work is done ("terminate called
without an active exception", SIGABRT; docs/pitfalls.md). So every rank the product starts gets
this hook, registered at most once per process by whichever comes first:

* the capture wrapper's ``sitecustomize`` (:mod:`runtime.stackdump`), for plain scripts, which
  loads this file by its path under :data:`SHARED_NAME` (the rank's Python may not be able to
  import ``runtime``; so this module needs only the standard library);
* :func:`runtime.setup`, for ranks built on this runtime.

When the interpreter exits (the script's end, ``sys.exit``, an uncaught exception: whatever runs
``atexit``; not ``os._exit`` or a signal) and ``torch.distributed`` was imported and its default
group is still initialised, the hook destroys every group. A broken backend must never hold the
exit, so the destroy runs in a daemon thread and the exit waits at most :data:`TIMEOUT_VAR`
seconds for it, then goes on. That thread is started when ``torch.distributed`` is first
imported, not at exit: from Python 3.12 no thread can be started in an ``atexit`` function, and a
script that never imports torch gets no thread (and torch is never imported here).

Once it has destroyed the group the hook says so in one line on stderr (the rank's log) and,
under the capture wrapper, creates the file :data:`MARK_VAR` names, which the wrapper turns into
``destroyed_at_exit: true`` in the rank's status. ``EZPZ_DESTROY_AT_EXIT=0`` turns it off.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Mapping

ENABLE_VAR = "EZPZ_DESTROY_AT_EXIT"
TIMEOUT_VAR = "EZPZ_DESTROY_AT_EXIT_TIMEOUT_S"
MARK_VAR = "EZPZ_DESTROYED_MARK"  # set by the capture wrapper: the file that tells it
SHARED_NAME = "_ezpz_exit_hook"  # in sys.modules: the copy of this module that registered
DEFAULT_TIMEOUT_S = 10.0
DESTROYED = "ezpz: destroyed the process group at exit (the script left it alive)"
_OFF = ("0", "no", "false", "off")
_STDERR_FD = 2  # the rank log under the capture wrapper, whatever sys.stderr became since
_DIST = "torch.distributed"


def switched_on(env: Mapping[str, str], var: str) -> bool:
    """Whether ``env`` leaves ``var``'s job on: anything but ``0``/``no``/``false``/``off``
    (the rank-side switches, ``EZPZ_STACKS`` and ``EZPZ_DESTROY_AT_EXIT``, read alike)."""
    return env.get(var, "1").strip().lower() not in _OFF


def wanted(env: Mapping[str, str]) -> bool:
    """Whether ``env`` leaves the hook on (``EZPZ_DESTROY_AT_EXIT=0`` turns it off)."""
    return switched_on(env, ENABLE_VAR)


def timeout_s(env: Mapping[str, str]) -> float:
    """How long the exit waits for the destroy: ``EZPZ_DESTROY_AT_EXIT_TIMEOUT_S``, else 10."""
    try:
        value = float(env.get(TIMEOUT_VAR, ""))
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if value >= 0 else DEFAULT_TIMEOUT_S


class _Destroyer:
    """A daemon thread that waits to be asked, then destroys every process group."""

    def __init__(self) -> None:
        import threading

        self.pid = os.getpid()
        self.asked = threading.Event()
        self.done = threading.Event()
        self.error: BaseException | None = None
        thread = threading.Thread(target=self._run, name="ezpz-destroy-at-exit", daemon=True)
        thread.start()

    def _run(self) -> None:
        self.asked.wait()
        try:
            sys.modules[_DIST].destroy_process_group()  # type: ignore[attr-defined]
        except BaseException as exc:  # reported at exit, never raised there
            self.error = exc
        finally:
            self.done.set()

    def destroy(self, timeout: float) -> bool | None:
        """Destroy and wait at most ``timeout`` s: True done, False failed, None still going."""
        self.asked.set()
        if not self.done.wait(timeout):
            return None
        return self.error is None


_destroyer: list[_Destroyer] = []  # started once torch.distributed is imported


def _arm() -> None:
    """Start the destroyer, once; a thread that cannot start leaves the group to the teardown
    (never the import or the ``setup()`` that armed it failing)."""
    if not _destroyer:
        with contextlib.suppress(Exception):
            _destroyer.append(_Destroyer())


class _WhenImported:
    """Starts the destroyer when ``torch.distributed`` is first imported; finds nothing."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == _DIST:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            _arm()
        return None


def _group_alive() -> bool:
    dist = sys.modules.get(_DIST)
    if dist is None:
        return False
    try:
        return bool(dist.is_available() and dist.is_initialized())  # type: ignore[attr-defined]
    except Exception:  # a half-imported or odd torch: nothing to destroy
        return False


def _say(line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(_STDERR_FD, f"{line}\n".encode())


def _mark() -> None:
    path = os.environ.get(MARK_VAR)
    if not path:
        return
    with contextlib.suppress(OSError), open(path, "w") as fh:
        fh.write(f"{os.getpid()}\n")


def at_exit() -> None:
    """Destroy the group the script left alive, within the timeout; never raises."""
    if not _group_alive() or not _destroyer or _destroyer[0].pid != os.getpid():
        return  # nothing to destroy, or a forked child: the group is its parent's
    limit = timeout_s(os.environ)
    done = _destroyer[0].destroy(limit)
    if done is None:
        _say(f"ezpz: destroying the process group at exit took over {limit:g}s; exiting anyway")
    elif not done:
        _say(f"ezpz: could not destroy the process group at exit: {_destroyer[0].error!r}")
    else:
        _say(DESTROYED)
        _mark()


_registered: list[bool] = []


def register() -> bool:
    """Arrange for :func:`at_exit` to run when the interpreter exits, once per process
    whichever copy of this module asks first; whether this call registered it."""
    if _registered or not wanted(os.environ):
        return False
    me = sys.modules.get(__name__)
    if me is None or sys.modules.setdefault(SHARED_NAME, me) is not me:
        return False  # another copy (the wrapper's sitecustomize, or runtime's) registered
    _registered.append(True)
    atexit.register(at_exit)
    if _DIST in sys.modules:
        _arm()
    else:
        sys.meta_path.insert(0, _WhenImported())
    return True
