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
import tempfile
from pathlib import Path


def _umask() -> int | None:
    """This process's umask, read without changing it (Linux); None where it cannot be."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, then rename it over.

    The file gets the mode a plain ``open`` would give it (0666 less the umask): a temporary
    file is made 0600, and a record left so would be unreadable to the colleagues who read
    the rest of the run (its logs and metrics are made the plain way)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    umask = _umask()
    try:
        with os.fdopen(fd, "wb") as fh:
            if umask is not None:
                os.fchmod(fh.fileno(), 0o666 & ~umask)
            fh.write(data)
            fh.flush()
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
