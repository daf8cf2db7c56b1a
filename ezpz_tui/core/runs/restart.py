"""What a relaunch cost: from asking the run it replaced to save and stop, to its own first step.

A child of a relaunch records its handover (``[handover]`` in its ``run.toml``, written by the
session: :mod:`ezpz_tui.core.launching.handover`): when its parent was asked, when the save was
complete, when the parent's last process was gone. Its own rank 0's first metric record says
when its first step ended, how long it took (``dt``) and how long the checkpoint's load took
before it (``ckpt_load_s``). The restart is the sum of five parts, each a figure of its own:
save, stop, start (the launch, up to the load), load, first step. The parent's times are this
node's clock and the child's rank 0's: on one node, or clocks kept in step, they agree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.rundir import RunDir

HANDOVER = "handover"  # the child's run.toml table
FIRST_LINE_BYTES = 1 << 16


@dataclass(frozen=True)
class Restart:
    """A relaunched run's restart, in seconds: ``total_s`` and its parts (``save_s`` None
    when the parent could not save: its time is then in ``stop_s``)."""

    total_s: float
    save_s: float | None
    stop_s: float
    start_s: float
    load_s: float | None
    first_step_s: float
    parent: str | None

    def parts(self) -> dict[str, float | None]:
        """The parts by name, as ``compare --json`` gives them."""
        return {
            "save_s": self.save_s,
            "stop_s": self.stop_s,
            "start_s": self.start_s,
            "load_s": self.load_s,
            "first_step_s": self.first_step_s,
        }

    def line(self) -> str:
        """``restart 6.3 s: save 1.2 · stop 0.8 · start 3.1 · load 0.4 · first step 0.8``."""
        parts = [
            ("save", self.save_s),
            ("stop", self.stop_s),
            ("start", self.start_s),
            ("load", self.load_s),
            ("first step", self.first_step_s),
        ]
        shown = " · ".join(f"{name} {value:.1f}" for name, value in parts if value is not None)
        return f"restart {self.total_s:.1f} s after {self.parent or 'its parent'}: {shown}"


def _number(table: Mapping[str, Any], key: str) -> float | None:
    value = table.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def first_record(run_dir: Path) -> Mapping[str, Any] | None:
    """Rank 0's first metric record; None before it is written whole."""
    try:
        with open(RunDir(run_dir).metrics(0), "rb") as fh:
            line = fh.readline(FIRST_LINE_BYTES)
    except OSError:
        return None
    if not line.endswith(b"\n"):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def restart_of(run_dir: Path, record: Mapping[str, Any]) -> Restart | None:
    """The restart of the run in ``run_dir`` whose record is ``record``; None for a run that
    is no relaunch's child, or before its first step."""
    handover = record.get(HANDOVER)
    if not isinstance(handover, Mapping):
        return None
    asked, stopped = _number(handover, "asked"), _number(handover, "stopped")
    saved = _number(handover, "saved")
    first = first_record(run_dir)
    if asked is None or stopped is None or first is None:
        return None
    metrics = first.get("metrics")
    metrics = metrics if isinstance(metrics, Mapping) else {}
    ended, took = _number(first, "timestamp"), _number(metrics, "dt")
    if ended is None or took is None:
        return None
    load = _number(metrics, "ckpt_load_s")
    began = ended - took
    parent = handover.get("parent")
    return Restart(
        total_s=ended - asked,
        save_s=None if saved is None else saved - asked,
        stop_s=stopped - (asked if saved is None else saved),
        start_s=began - (load or 0.0) - stopped,
        load_s=load,
        first_step_s=took,
        parent=parent if isinstance(parent, str) else None,
    )


def restart_line(run_dir: Path, record: Mapping[str, Any]) -> str | None:
    """The Run tab header's line for a relaunch's child: its restart, or that it is awaited."""
    if not isinstance(record.get(HANDOVER), Mapping):
        return None
    found = restart_of(run_dir, record)
    return found.line() if found is not None else "restart: until its first step …"
