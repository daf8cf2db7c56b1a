"""Incremental reading of a growing JSONL metrics file, and what the summary bar shows from it.

Reads only the bytes added since the last call, keeps a torn last line for the next call, and
starts over when the file shrinks or is replaced (a new inode), so a follower never raises and
never double-counts. Polling by size is deliberate: on Lustre/GPFS/NFS change notification does
not see writes made on other nodes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from runtime import records


class JsonlTail:
    """New records of one file since the previous :meth:`read`."""

    def __init__(self, path: Path, default_rank: int = 0) -> None:
        self.path = Path(path)
        self.default_rank = default_rank
        self.garbage = 0
        self._offset = 0
        self._inode: int | None = None
        self._pending = b""

    def read(self, max_bytes: int = 64 << 20) -> list[records.Record]:
        try:
            st = os.stat(self.path)
        except OSError:
            return []
        if st.st_ino != self._inode or st.st_size < self._offset:
            self._inode, self._offset, self._pending = st.st_ino, 0, b""
        if st.st_size == self._offset:
            return []
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read(max_bytes)
        except OSError:
            return []
        self._offset += len(chunk)
        data = self._pending + chunk
        result = records.parse_chunk(data, self.default_rank)
        self._pending = data[result.consumed :]
        self.garbage += result.garbage
        return result.records


@dataclass
class Progress:
    """The latest step and loss of a run, with a rate measured from the records' timestamps."""

    step: int | None = None
    loss: float | None = None
    steps_per_s: float | None = None
    _first: tuple[int, float] | None = None

    def update(self, new: list[records.Record]) -> None:
        for rec in new:
            if rec.step is None:
                continue
            self.step = rec.step
            if "loss" in rec.metrics:
                self.loss = rec.metrics["loss"]
            if rec.timestamp is None:
                continue
            if self._first is None:
                self._first = (rec.step, rec.timestamp)
            elif rec.timestamp > self._first[1]:
                self.steps_per_s = (rec.step - self._first[0]) / (rec.timestamp - self._first[1])
