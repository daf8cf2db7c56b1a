"""Replace a file in one step: the one way state and status files are written.

Readers (the UI, a follower on another node of a shared filesystem) must never see half a file,
and a crash must leave either the old content or the new, never an empty file. On a disk that
is full, where the temporary file cannot be written, :func:`overwrite` puts the new content in
the room the old one holds, so a rank's end is still recorded.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path


def write_atomic(path: Path, data: bytes, durable: bool = True) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, then rename it over.

    ``durable=False`` leaves out the fsync (milliseconds each, more on a busy disk) for a
    record that is rewritten durably before anyone relies on it: a run's ``pending`` records,
    replaced before its launcher starts. A crash of the machine may then leave it empty, which
    readers take as unreadable, as they would take a run that crash never started.

    The temporary file is made as a plain ``open`` makes a file (0666 less the umask), so the
    record gets the mode its logs have and colleagues who read those can read it. Its name is
    this process's and random, taken with ``O_EXCL``: ``tempfile`` would do the same, but every
    rank's wrapper writes records, and that module imports ``shutil``, ``random`` and the
    compression modules behind them at every rank's start."""
    while True:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        except FileExistsError:
            continue
        break
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def overwrite(path: Path, data: bytes) -> None:
    """Write ``data`` over the existing file ``path`` in one ``pwrite``, padded with spaces to
    its old length: the fallback when the disk is full, since the blocks the old content holds
    are the one place a write still fits (a new file needs a new block). Not atomic the way
    :func:`write_atomic` is, hence only a fallback; the padding leaves no byte of the old
    content after the new (JSON takes trailing spaces). ``OSError`` when the file is not
    there, or ``ENOSPC`` before anything is written when ``data`` needs more than its blocks."""
    fd = os.open(path, os.O_WRONLY)
    try:
        st = os.fstat(fd)
        if len(data) > max(st.st_size, st.st_blocks * 512):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        padded = data + b" " * max(0, st.st_size - len(data))
        if os.pwrite(fd, padded, 0) != len(padded):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        os.fsync(fd)
    finally:
        os.close(fd)
