"""What a run's ``stage.json`` says of its staging: the figures ``compare`` and ``summary.json``
report and the line the runs list and the Run tab show.

The staging itself (copying the environment to every node, removing it after) is the launch's,
:mod:`ezpz_tui.core.launching.staging`; reading its record is every reader's, so it is here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runtime.rundir import RunDir
from runtime.stage import bytes_text


def read_stage(run_dir: Path) -> dict[str, Any] | None:
    """A run's ``stage.json``, or None (not staged, or unreadable)."""
    try:
        data = json.loads(RunDir(run_dir).stage_json.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def stage_seconds(run_dir: Path) -> float | None:
    """The seconds a run spent staging its environment before its ranks started, or None."""
    seconds = (read_stage(run_dir) or {}).get("seconds")
    return float(seconds) if isinstance(seconds, int | float) else None


def stage_line(run_dir: Path) -> str | None:
    """One line for the run header: ``staged 1.8 GiB to /tmp/ezpz-stage-… on 2 nodes in
    35.1 s, removed after`` (``, without vm2 (its copy failed: excluded)`` when the launch went
    on without nodes that could not stage); None for a run that was not staged."""
    record = read_stage(run_dir)
    if record is None:
        return None
    nodes = record.get("nodes") if isinstance(record.get("nodes"), dict) else {}
    where = f"{record.get('dest')} on {len(nodes)} node{'s' * (len(nodes) != 1)}"
    seconds = record.get("seconds")
    took = f" in {seconds:.1f} s" if isinstance(seconds, int | float) else ""
    if record.get("failure"):
        return f"staging to {where} failed{took}"
    if record.get("reused"):
        line = f"staged: reused the kept copy {where}{took}"
    else:
        size = record.get("bytes")
        line = f"staged {bytes_text(size if isinstance(size, int) else 0)} to {where}{took}"
    excluded = record.get("excluded")
    if isinstance(excluded, dict) and excluded:
        line += f", without {', '.join(map(str, excluded))} (its copy failed: excluded)"
    removed = record.get("removed")
    if isinstance(removed, dict):
        failure = removed.get("failure")
        line += f", not removed: {failure}" if failure else ", removed after"
    elif record.get("keep"):
        line += ", kept"
    return line
