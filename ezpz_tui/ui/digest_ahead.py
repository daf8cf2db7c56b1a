"""A finished run's digest read while ``ezpz-tui attach`` starts.

The app's start-up (its screen, the regions, the run's views) takes a second or more before the
opened run's thread begins; the digest's read (a child interpreter for a large one:
:func:`~ezpz_tui.core.watching.digested.read_apart`) need not wait for it. :func:`read_ahead`
starts it when the app is made; :func:`digest_of` hands its result to the opened run, or reads
now when nothing was read ahead.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.rundir import FINAL, RunState, read_state

if TYPE_CHECKING:
    from ezpz_tui.core.watching.digested import Digested

Read = tuple[RunState, "Digested | None"]

_ahead: dict[Path, Future[Read]] = {}


def _read(path: Path) -> Read:
    """The run's state, and its digest when it has ended (None: none readable, or live)."""
    from ezpz_tui.core.watching.digested import read_apart  # numpy: off the first frame's path

    state = read_state(path)
    return state, read_apart(path) if state.state in FINAL else None


def read_ahead(path: Path) -> None:
    """Start reading ``path``'s digest in a thread (its parse in a child, when large)."""
    future: Future[Read] = Future()
    _ahead[path] = future

    def read() -> None:
        try:
            future.set_result(_read(path))
        except Exception as exc:  # handed to digest_of's caller, which reads the files instead
            future.set_exception(exc)

    threading.Thread(target=read, name=f"digest {path.name}", daemon=True).start()


def digest_of(path: Path) -> Read:
    """What :func:`read_ahead` found for ``path`` (waiting for it), else read now."""
    future = _ahead.pop(path, None)
    return future.result() if future is not None else _read(path)
