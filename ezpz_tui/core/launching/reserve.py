"""Room kept aside in a run directory so its end can be recorded on a disk that filled up.

A run that fills its filesystem (checkpoints, logs, metrics) would otherwise stay ``running``
forever: the supervisor cannot rewrite the run's state or the rank statuses, and readers later call
it ``lost``. So when the run is made, :func:`make_reserve` writes a small file of real bytes in
its directory; whoever records the run's end calls :func:`release_reserve` just before writing the
final state and statuses, which frees that room for them, and the run ends ``failed`` with "no
space left on device" as its recorded cause.

The final records are rewritten one at a time (temp file, then rename over the old one, which
frees the old blocks), so the room needed does not grow with the number of ranks: a few
filesystem blocks. :data:`RESERVE_BYTES` covers GPFS's and Lustre's larger allocation units too.
The bytes are random, not zeros: a compressing filesystem (ZFS, btrfs) stores zeros as nothing
and the reserve would hold no room at all.
"""

from __future__ import annotations

import contextlib
import errno
import os
from pathlib import Path

from ezpz_tui.core.runs.full_disk import NO_SPACE as NO_SPACE  # the cause it lets be recorded
from runtime.rundir import RunDir

RESERVE_BYTES = 256 * 1024
_NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def reserve_path(run_dir: Path) -> Path:
    """Where the reserve of ``run_dir`` lives (hidden, so listings pass it by)."""
    return RunDir(run_dir).reserve


def make_reserve(run_dir: Path, size: int = RESERVE_BYTES) -> Path:
    """Write ``size`` bytes to the reserve file of ``run_dir`` and flush them to the disk.

    Raises ``OSError`` (``ENOSPC`` on a full disk) when the room is not there: a run that could
    not record its own end should not start. A half-written reserve is removed first.
    """
    path = reserve_path(run_dir)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        block = os.urandom(min(size, 64 * 1024))
        left = size
        while left > 0:
            left -= os.write(fd, block[:left])
        os.fsync(fd)
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    os.close(fd)
    return path


def release_reserve(run_dir: Path) -> bool:
    """Delete the reserve of ``run_dir``, so the final records fit; never raises.

    Returns whether a reserve was there and is gone. Safe to call more than once, on runs made
    before reserves existed, and on directories that are gone.
    """
    try:
        reserve_path(run_dir).unlink()
    except OSError:
        return False
    return True


def no_space(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or the user's quota on it) is full: what a supervisor
    whose heartbeat write fails checks, to record :data:`NO_SPACE` as the run's cause."""
    return isinstance(exc, OSError) and exc.errno in _NO_SPACE_ERRNOS


def nearly_full(run_dir: Path) -> bool:
    """Whether the filesystem of ``run_dir`` has less room left than a reserve: a run that
    ended on it most likely ended because of it, even if no record of ours failed to write."""
    try:
        fs = os.statvfs(run_dir)
    except OSError:
        return False
    return fs.f_bavail * fs.f_frsize < RESERVE_BYTES
