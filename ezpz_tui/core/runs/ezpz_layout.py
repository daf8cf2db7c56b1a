"""Run directories written by ezpz itself (github.com/saforem2/ezpz), read as first-class runs.

ezpz writes no ``state.json``, ``status/`` or ``logs/rank-N.log``. What it does write (as of
its ``src/ezpz/history.py`` and ``src/ezpz/examples/test.py``):

* ``outputs/<module>/<timestamp>/metrics.jsonl``, appended to by every rank's ``History``: one
  record per ``History.update``, ``{"timestamp", "rank", "metrics"}``, where rank 0's records
  also carry the cross-rank statistics twice: as ``<key>/mean|max|min|std`` among its metrics
  and as an ``aggregated`` object holding the same keys (or per-rank ``metrics-<rank>.jsonl``);
* ``report.md``, written by ``History.finalize`` once training is over, with a
  ``## Metric Overview`` section: the history's own word that the run finished;
* its log only where someone kept it: ezpz logs to the console, rank 0 only unless
  ``EZPZ_LOG_FROM_ALL_RANKS`` is set, as ``[2025-01-01 12:00:00.123456][I][ezpz/dist:123] msg``;
  a tee'd console log (``*.log``) or ``get_file_logger``'s ``output.log`` /
  ``output-<rank>.log`` sits in the run directory.

This module finds those logs by rank, derives the run's state from what is there (``succeeded``
with the last step when the history says it finished, ``running`` only while its files still
change, ``unknown`` with the age of the last write otherwise) and finds ezpz runs one level
down an outputs directory (``<module>/<timestamp>``). It never raises on what it reads.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from runtime.metric_files import metric_files
from runtime.records import parse_chunk
from runtime.rundir import LOGS, RunDir, RunState, State

REPORT = "report.md"
FINISHED_MARK = b"## Metric Overview"
"""What ``History.finalize`` writes into ``report.md`` after the last step."""

RUNNING_WITHIN_S = 60.0
"""A run none of whose files changed for this long is not called running."""

_RANKED_LOG = re.compile(r"(?:output-|.*?(?:^|[-_.])rank[-_]?)(\d+)\.log")
"""``output-<rank>.log`` (``ezpz.log.get_file_logger``) or a name saying ``rank N``; other
names end in timestamps often enough that a trailing number is not taken for a rank."""

_TAIL_BYTES = 64 << 10
_MAX_REPORT = 1 << 20


def is_ezpz_run(run_dir: str | os.PathLike[str]) -> bool:
    """Whether ``run_dir`` is a run ezpz wrote (metric JSONL, and none of our records)."""
    return bool(_ezpz_metrics(Path(run_dir)))


def _ezpz_metrics(root: Path) -> list[Path]:
    """The metric files of an ezpz run; none for anything else."""
    run = RunDir(root)
    if run.state_json.exists() or run.run_toml.exists():
        return []
    return [path for path, _ in metric_files(root)]


def ezpz_logs(run_dir: str | os.PathLike[str]) -> list[tuple[Path, int]]:
    """ezpz's logs in ``run_dir`` (or its ``logs/``) with their ranks, by rank: files named for
    a rank, and the newest other ``*.log`` as rank 0's console log when no file claims rank 0;
    nothing for a run of ours (whose ``launcher.log`` is no rank's)."""
    return _logs(Path(run_dir)) if is_ezpz_run(run_dir) else []


def _logs(root: Path) -> list[tuple[Path, int]]:
    ranked: dict[int, Path] = {}
    console: list[tuple[float, Path]] = []
    for folder in (root, root / LOGS):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.endswith(".log") or not _is_file(entry):
                continue
            match = _RANKED_LOG.fullmatch(entry.name)
            if match:
                ranked.setdefault(int(match.group(1)), Path(entry.path))
            else:
                console.append((_mtime(Path(entry.path)), Path(entry.path)))
    if console and 0 not in ranked:
        ranked[0] = max(console)[1]
    return sorted(((path, rank) for rank, path in ranked.items()), key=lambda item: item[1])


def ezpz_state(run_dir: str | os.PathLike[str], now: float | None = None) -> RunState | None:
    """The state of an ezpz run as its files show it, with the reason; None when ``run_dir`` is
    not one. Never ``running`` for a run whose files stopped changing."""
    root = Path(run_dir)
    metrics = _ezpz_metrics(root)
    if not metrics:
        return None
    now = time.time() if now is None else now
    report = root / REPORT
    if _finished(report):
        step = last_step(metrics)
        at = "" if step is None else f" at step {step}"
        return RunState(
            State.SUCCEEDED,
            end=_mtime(report),
            reason=f"ezpz run: finished{at} (its History wrote {REPORT})",
        )
    newest = max(_mtime(path) for path in [*metrics, *(p for p, _ in _logs(root))])
    age = now - newest
    if age < RUNNING_WITHIN_S:
        return RunState(State.RUNNING, reason=f"ezpz run: files written {max(age, 0):.0f} s ago")
    return RunState(
        State.UNKNOWN,
        reason=f"ezpz run: no end recorded, nothing written for {_ago(age)}",
    )


def last_step(paths: list[Path]) -> int | None:
    """The highest step in the last records of ``paths`` (ezpz's ``iter``, or ``step``); for
    step-less records, the number of records of the busiest rank less one."""
    best: int | None = None
    counted: int | None = None
    for path in paths:
        records = parse_chunk(_tail(path)).records
        steps = [r.step for r in records if r.step is not None]
        if steps:
            best = max(steps) if best is None else max(best, *steps)
        elif records:
            ranks = len({r.rank for r in records}) or 1
            lines = _count_lines(path) // ranks - 1
            counted = lines if counted is None else max(counted, lines)
    return best if best is not None else counted


def ezpz_runs_below(folder: str | os.PathLike[str]) -> list[Path]:
    """ezpz runs one level below ``folder``: ``outputs/<module>/<timestamp>`` seen from
    ``outputs``, where ``folder`` is ``<module>``."""
    return ezpz_runs_and_others(folder)[0]


def ezpz_runs_and_others(folder: str | os.PathLike[str]) -> tuple[list[Path], list[Path]]:
    """The ezpz runs one level below ``folder`` (as :func:`ezpz_runs_below`), and the other
    folders there: one of those becomes a run when ezpz writes its first metrics into it."""
    try:
        entries = [Path(e.path) for e in os.scandir(folder) if _is_dir(e)]
    except OSError:
        return [], []
    runs, others = [], []
    for path in sorted(entries):
        # looks_like_run first: it reads one folder, where is_ezpz_run searches the tree below
        (runs if RunDir(path).looks_like_run() and is_ezpz_run(path) else others).append(path)
    return runs, others


def _finished(report: Path) -> bool:
    try:
        with open(report, "rb") as fh:
            return FINISHED_MARK in fh.read(_MAX_REPORT)
    except OSError:
        return False


def _tail(path: Path) -> bytes:
    """The complete lines of the last ``_TAIL_BYTES`` of ``path``."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            start = max(0, size - _TAIL_BYTES)
            fh.seek(start)
            data = fh.read(_TAIL_BYTES)
    except OSError:
        return b""
    if start:
        data = data[data.find(b"\n") + 1 :]  # the first line is cut
    return data


def _count_lines(path: Path) -> int:
    count = 0
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                count += chunk.count(b"\n")
    except OSError:
        pass
    return count


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:
        return False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _ago(seconds: float) -> str:
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"
