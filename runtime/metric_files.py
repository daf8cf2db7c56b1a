"""Where a run's metric JSONL files are, ours (``metrics/``, in blocks of ranks) and ezpz's
(``metrics*.jsonl`` anywhere below the run, its history files), each with the rank it defaults
to: what every reader of a run's records (the TUI's store, ``compare``, goodput, the finalizer)
lists first. Its own module because the run directory's paths (:mod:`runtime.rundir`) need none
of it, and finding ezpz's files walks folders the paths never do.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from runtime.rundir import (
    EZPZ_HISTORY_FILE,
    EZPZ_METRICS_FILE,
    EZPZ_SHARED_METRICS,
    JSONL_FILE,
    METRICS,
    RANK_FOLDERS,
    RunDir,
)

_JSONL = re.compile(r"[^.].*\.jsonl")  # what ``glob("*.jsonl")`` matches: no hidden file
_EZPZ_NAMES = re.compile(rf"metrics.*\.jsonl|{EZPZ_HISTORY_FILE.pattern}")


def metric_files(run_dir: str | os.PathLike[str]) -> list[tuple[Path, int]]:
    """Metric JSONL files of a run, ours and ezpz's, with the rank each defaults to, by rank."""
    found = _metric_names(Path(run_dir))
    return [(Path(path), rank) for path, rank in sorted(found.items(), key=_by_rank)]


def first_metric_file(run_dir: str | os.PathLike[str]) -> tuple[Path, int] | None:
    """:func:`metric_files`' first (rank 0's, in a run of ours), with one Path made, not one
    a rank: a reader of rank 0's records alone (the goodput ledger, compare's figures) at
    131,072 ranks spent seconds of the interpreter's lock making the others'."""
    root = Path(run_dir)
    own = RunDir(root).metrics(0)
    # Rank 0's own file in its block: no rank is lower, so only that block (and the folder
    # itself, and ezpz's files beside ours) can hold what sorts first.
    found = _metric_names(root, [own.parent] if own.is_file() else None)
    if not found:
        return None
    path, rank = min(found.items(), key=_by_rank)
    return Path(path), rank


def _by_rank(item: tuple[str, int]) -> tuple[int, str]:
    return item[1], item[0]


def _metric_names(root: Path, blocks: list[Path] | None = None) -> dict[str, int]:
    """Every metric file's path (a string) with the rank it defaults to; ``blocks``: of ours,
    only those in the metrics folder itself and these of its blocks (default: every block)."""
    ours: list[str] = []
    folders = RunDir(root).rank_folders(root / METRICS)
    for folder in folders if blocks is None else [*folders[:1], *blocks]:
        try:
            with os.scandir(folder) as entries:
                ours += [e.path for e in entries if _JSONL.fullmatch(e.name)]
        except OSError:
            continue
    theirs = [str(path) for path in _ezpz_files(root, rank_folders=not ours)]
    found: dict[str, int] = {}
    for path in ours + theirs:
        name = path.rpartition(os.sep)[2]
        for pattern in (JSONL_FILE, EZPZ_METRICS_FILE):
            match = pattern.search(name)
            if match:
                found[path] = int(match.group(1))
                break
        else:
            if name == EZPZ_SHARED_METRICS or EZPZ_HISTORY_FILE.fullmatch(name):
                found[path] = 0
    return found


def _ezpz_files(root: Path, rank_folders: bool) -> Iterator[Path]:
    """ezpz's metric files anywhere below ``root``; in the rank folders only when asked. In a
    run directory of ours they hold one file a rank, ours (``metrics/`` is listed by name), and
    walking them cost a 16,384-rank run over half a second each time its numbers were read; a
    directory ezpz wrote keeps its ``metrics.jsonl`` in ``logs/``."""
    for folder, dirs, files in os.walk(root):
        if folder == str(root) and not rank_folders:
            dirs[:] = [d for d in dirs if d not in RANK_FOLDERS]
        yield from (Path(folder, name) for name in files if _EZPZ_NAMES.fullmatch(name))
