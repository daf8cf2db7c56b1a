"""A run's metrics read from its files: a rank's series for a lean store, and an earlier run's
whole store, for overlaying it on the open run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ezpz_tui.core.watching.metrics.store import Loader, MetricStore
from ezpz_tui.core.watching.tails import file_columns
from runtime.metric_files import metric_files
from runtime.record_columns import RecordColumns
from runtime.rundir import EZPZ_METRICS_FILE, JSONL_FILE, RunDir


def rank_loader(run_dir: str | os.PathLike[str]) -> Loader:
    """What reads one rank's records again (a lean store's :meth:`~.store.MetricStore.series`
    of a rank it does not hold): the files named for the rank (``metrics/rank-N.jsonl``,
    ezpz's ``metrics-N.jsonl``) and the files every rank shares (ezpz's ``metrics.jsonl``).
    The run's files are listed once, and again when a rank has none yet (a rank that started
    late). Unreadable files and garbage lines are skipped, as the follower skips them."""
    listed: dict[int, list[Path]] = {}
    shared: list[Path] = []

    def list_files() -> None:
        listed.clear()
        shared.clear()
        for path, rank in metric_files(run_dir):
            own = JSONL_FILE.search(path.name) or EZPZ_METRICS_FILE.search(path.name)
            (listed.setdefault(rank, []) if own else shared).append(path)

    def load(rank: int) -> Iterator[RecordColumns]:
        if rank not in listed:
            list_files()
        for path in [*listed.get(rank, []), *shared]:
            for result in file_columns(path, rank):
                columns = result.columns.get(rank)
                if columns is not None:
                    yield columns

    return load


def own_file_loader(run_dir: str | os.PathLike[str]) -> Loader:
    """What reads one rank's records from its own file (``metrics/rank-N.jsonl``) and no
    other: a finished run opened from its digest lists none of its 131,072 files."""
    run = RunDir(Path(run_dir))

    def load(rank: int) -> Iterator[RecordColumns]:
        for result in file_columns(run.metrics(rank), rank):
            columns = result.columns.get(rank)
            if columns is not None:
                yield columns

    return load


def load_store(run_dir: str | os.PathLike[str]) -> MetricStore:
    """Every metric record of a run directory (ours: ``metrics/rank-N.jsonl``; ezpz's:
    ``metrics-N.jsonl`` or one shared ``metrics.jsonl``), for overlaying an earlier run: past
    :data:`~.store.KEEP_ALL_RANKS` ranks only its bands are kept (an overlay draws its mean).
    Unreadable files and garbage lines are skipped."""
    store = MetricStore(rank_loader(run_dir))
    for path, rank in metric_files(run_dir):
        for result in file_columns(path, rank):
            for record_rank, columns in result.columns.items():
                store.add(record_rank, columns)
    return store
