"""An earlier run's metrics read into a store, for overlaying it on the open run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ezpz_tui.core.watching.metrics.store import MetricStore
from ezpz_tui.core.watching.tails import DEFAULT_READ, MAX_RECORD
from runtime.record_columns import ColumnsResult, parse_columns
from runtime.rundir import metric_files


def file_columns(path: Path, rank: int) -> Iterator[ColumnsResult]:
    """The records of one JSONL file by rank, with its garbage lines counted, a chunk at a time
    so a large file never sits in memory whole. A line longer than MAX_RECORD is skipped
    (garbage, as the followers treat it); a last line without its newline is parsed if it is
    complete JSON (a finished file). An unreadable file ends the records early instead of
    raising."""
    pending = b""
    skipping = False
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(DEFAULT_READ):
                data = pending + chunk
                if skipping:
                    newline = data.find(b"\n")
                    data, skipping = (b"", True) if newline < 0 else (data[newline + 1 :], False)
                result = parse_columns(data, rank)
                pending = data[result.consumed :]
                if len(pending) > MAX_RECORD:
                    pending, skipping = b"", True
                if result.columns or result.garbage:
                    yield result
    except OSError:
        return
    if pending.strip() and not skipping:
        yield parse_columns(pending + b"\n", rank)


def load_store(run_dir: str | os.PathLike[str]) -> MetricStore:
    """Every metric record of a run directory (ours: ``metrics/rank-N.jsonl``; ezpz's:
    ``metrics-N.jsonl`` or one shared ``metrics.jsonl``), for overlaying an earlier run.
    Unreadable files and garbage lines are skipped."""
    store = MetricStore()
    for path, rank in metric_files(run_dir):
        for result in file_columns(path, rank):
            for record_rank, columns in result.columns.items():
                store.add(record_rank, columns)
    return store
