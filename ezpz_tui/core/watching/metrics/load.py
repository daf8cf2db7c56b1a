"""An earlier run's metrics read into a store, for overlaying it on the open run."""

from __future__ import annotations

import os

from ezpz_tui.core.watching.metrics.store import MetricStore
from ezpz_tui.core.watching.tails import file_columns
from runtime.rundir import metric_files


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
