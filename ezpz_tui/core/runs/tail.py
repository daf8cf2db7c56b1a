"""The end of a file a rank or the launcher may still be writing, read without reading it all.

Logs grow to gigabytes; what a reader wants of one (the last lines, the last record) is at its
end. Every reader of a run, however far up the layers, takes it from here.
"""

from __future__ import annotations

import os
from pathlib import Path


def read_tail(path: Path, limit: int) -> str:
    """The last ``limit`` bytes of ``path`` as text (from a line start); "" if unreadable."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - limit))
            data = fh.read(limit)
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if size > limit:
        text = text.partition("\n")[2]
    return text
