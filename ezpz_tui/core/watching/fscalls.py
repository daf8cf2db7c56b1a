"""The filesystem calls the followers make, in one place, counted.

On Lustre or GPFS every ``stat`` and ``open`` is a round trip to a metadata server that every
other user of the machine shares (docs/pitfalls.md). The followers therefore make their
metadata calls only through these wrappers: the scheduler charges what a poll really cost
against its budget, and tests and ``bench/scale_bench.py`` read the counts without strace.

``read`` of an open file is not counted: it is data, served by the object servers.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from typing import IO

_lock = threading.Lock()
_counts: Counter[str] = Counter()


def _count(name: str) -> None:
    with _lock:
        _counts[name] += 1


def stat(path: str | os.PathLike[str]) -> os.stat_result | None:
    """``os.stat`` of ``path``, or None when it cannot be had (gone, no permission)."""
    _count("stat")
    try:
        return os.stat(path)
    except OSError:
        return None


def fstat(fd: int) -> os.stat_result:
    _count("fstat")
    return os.fstat(fd)


def open_read(path: str | os.PathLike[str]) -> IO[bytes]:
    """The file opened for binary reading, unbuffered (a tail reads what it wants itself)."""
    _count("open")
    return open(path, "rb", buffering=0)


def scandir(path: str | os.PathLike[str]) -> list[os.DirEntry[str]]:
    """Every entry of the directory (one listing, however many files); [] when unreadable.
    Each entry's name, type and inode come with the listing, without a ``stat``."""
    _count("scandir")
    try:
        with os.scandir(path) as entries:
            return list(entries)
    except OSError:
        return []


def counts() -> dict[str, int]:
    """Calls made so far in this process, by kind."""
    with _lock:
        return dict(_counts)


def total() -> int:
    """Every counted call so far in this process."""
    with _lock:
        return sum(_counts.values())
