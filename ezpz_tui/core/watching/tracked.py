"""Which trackers a run feeds and where, for the run header: read from the run directory.

Rank 0's log says it first: :mod:`runtime.trackers` writes ``ezpz: tracker NAME -> WHERE`` when
it opens each one (so an MLflow server named by ``MLFLOW_TRACKING_URI`` shows too), near the
start of the log; only the log's head is read. The trackers' own folders in the run directory
name the rest (a run whose log has been cut, one made by another version).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from runtime.rundir import RunDir

LOG_HEAD_BYTES = 1 << 16  # the tracker lines come before the first step's log line
_OPENED = re.compile(r"^ezpz: tracker (\w+) -> (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class TrackerOutput:
    name: str
    where: str  # a directory or a URI
    command: str  # what opens or uploads it, to run from anywhere


def _command(name: str, where: str) -> str:
    if name == "wandb":
        return f"wandb sync {where}" if "offline-run-" in where else f"wandb: {where}"
    if name == "tensorboard":
        return f"tensorboard --logdir {where}"
    if name == "mlflow":
        return f"mlflow ui --backend-store-uri {where}"
    return f"{name}: {where}"


def _from_log(run: RunDir) -> dict[str, str]:
    try:
        with open(run.log(0), "rb") as fh:
            head = fh.read(LOG_HEAD_BYTES).decode("utf-8", "replace")
    except OSError:
        return {}
    return {m.group(1): m.group(2).strip() for m in _OPENED.finditer(head)}


def _from_folders(run: RunDir) -> dict[str, str]:
    found: dict[str, str] = {}
    runs = sorted(run.wandb_dir.glob("*run-*")) if run.wandb_dir.is_dir() else []
    runs = [p for p in runs if p.name != "latest-run"]
    if runs:
        found["wandb"] = str(runs[-1])
    if run.tensorboard_dir.is_dir():
        found["tensorboard"] = str(run.tensorboard_dir)
    if run.mlruns_dir.is_dir():
        found["mlflow"] = run.mlruns_dir.as_uri()
    if run.metrics_csv.is_file():
        found["csv"] = str(run.metrics_csv)
    return found


def tracker_outputs(run_dir: Path) -> list[TrackerOutput]:
    """The trackers ``run_dir`` feeds or fed (those with a folder first); never raises."""
    run = RunDir(run_dir)
    try:
        found = _from_folders(run) | _from_log(run)  # the log's word wins: it is exact
    except OSError:
        return []
    return [TrackerOutput(name, where, _command(name, where)) for name, where in found.items()]


def tracker_line(run_dir: Path) -> str | None:
    """One line for the run header, paths in the run directory relative to it (the header
    has room for one line): ``trackers: wandb sync wandb/offline-run-… · csv: metrics.csv``."""
    outputs = tracker_outputs(run_dir)
    if not outputs:
        return None
    prefixes = (f"{run_dir}/", f"{RunDir(run_dir).path.as_uri()}/")
    parts = []
    for out in outputs:
        where = out.where
        for prefix in prefixes:
            where = where.replace(prefix, "", 1) if where.startswith(prefix) else where
        parts.append(_command(out.name, where))
    return "trackers (in the run directory): " + " · ".join(parts)
