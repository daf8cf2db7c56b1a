"""A command's stdout when it will not take the output: closed (``>&-``), full (``> /dev/full``,
a disk that filled), or a pipe whose reader left (``| head``).

None of them stops a command's work or ends it in a traceback. A standard stream closed at start
gets ``/dev/null`` in its place before anything else is opened (else the next file opened would
take its number, and a later print would land in it, or a child would inherit it as its
output); ``sys.stdout`` becomes a :class:`GuardedStdout`, which drops the output from the first
write refused and keeps why. The command then does everything it came to do, a launch runs and
is supervised to its true end, and :func:`exit_status` tells the rest: a command that would
have exited 0 exits :data:`OUTPUT_LOST` with one line on stderr, unless a reader that left the
pipe refused it (nothing was lost that anyone wanted). ``launch`` and ``sweep`` keep the run's
status, as srun does: their output is a copy of what the run directory holds.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import sys
from typing import TextIO

OUTPUT_LOST = 74  # sysexits.h's EX_IOERR: the work is done, its output could not be written


def open_standard_fds() -> None:
    """Put ``/dev/null`` on each of fds 0, 1 and 2 that is closed, and give Python a stream on
    it where it has none (a closed fd at start leaves ``sys.stdout`` None)."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            if getattr(sys, name) is None:
                mode = "r" if fd == 0 else "w"
                setattr(sys, name, open(fd, mode, encoding="utf-8", closefd=False))  # noqa: SIM115


class GuardedStdout(io.TextIOBase):
    """``sys.stdout`` that never raises: from the first write or flush the stream refuses
    (``refused`` keeps why), the output is dropped and fd 1 points at /dev/null, so that
    Python's own flush at exit cannot fail either."""

    def __init__(self, stream: TextIO, closed_at_start: bool = False) -> None:
        super().__init__()
        self._stream = stream
        self.refused: OSError | ValueError | None = None
        if closed_at_start:  # writes would go to the /dev/null put in its place
            self.refused = OSError(errno.EBADF, "stdout is closed")

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._stream, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.refused is None:
            try:
                self._stream.write(text)
            except (OSError, ValueError) as exc:
                self._refuse(exc)
        return len(text)

    def flush(self) -> None:
        if self.refused is None:
            try:
                self._stream.flush()
            except (OSError, ValueError) as exc:
                self._refuse(exc)

    def isatty(self) -> bool:
        return self.refused is None and self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    def _refuse(self, exc: OSError | ValueError) -> None:
        self.refused = exc
        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self._stream.fileno())
            os.close(null)


def guard_stdout() -> GuardedStdout:
    """Make every standard stream usable and ``sys.stdout`` a :class:`GuardedStdout`."""
    if isinstance(sys.stdout, GuardedStdout):
        return sys.stdout
    closed = sys.stdout is None
    open_standard_fds()
    guarded = GuardedStdout(sys.stdout, closed_at_start=closed)
    sys.stdout = guarded
    return guarded


def refused() -> OSError | ValueError | None:
    """Why stdout refused the output, if it has: a loop that only prints stops then."""
    return sys.stdout.refused if isinstance(sys.stdout, GuardedStdout) else None


def why_refused(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def exit_status(code: int, keeps_status: bool) -> int:
    """The status a command that returned ``code`` exits with, once what it printed is flushed:
    :data:`OUTPUT_LOST` for a success whose output stdout refused (said on stderr), else
    ``code``; ``keeps_status``: the command's status is its run's, whatever became of its
    output (launch, sweep)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        sys.stdout.flush()
    exc = refused()
    if exc is None or isinstance(exc, BrokenPipeError) or keeps_status or code != 0:
        return code
    from ezpz_tui.cli.common import say

    say(f"ezpz-tui: stdout refused the output ({why_refused(exc)}); the command did its work")
    return OUTPUT_LOST
