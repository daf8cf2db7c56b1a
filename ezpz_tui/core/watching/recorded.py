"""The verdicts a run recorded when it ended: the ``verdicts`` section of its ``summary.json``.

Some verdicts hold only while a run lives: a straggler is a running rank that arrives last, a
hang is a collective the others have waited in for a while *now*. Once the run has ended the
ranks' files still hold what gave them, but judged against the wall clock of a later look (or
with every rank no longer running) they say nothing. So the finalizer judges them once, as of
the run's end, over the whole run's files (:mod:`~ezpz_tui.core.watching.verdicts`), and writes
them here; ``top``, ``why`` and the TUI read them back for an ended run, and judge the files at
the run's end themselves only where there is no summary (an older run, or a finalizer that has
not run yet).

Section, by key: ``judged_at`` (the run's end, the moment it is judged as of), ``stragglers``
(each with ``rank``, ``by`` (``arrival`` or ``step_time``), ``why``, its ``arrival_lag_s`` and
``step_time_s``), ``median_step_s`` and ``slow_factor``, ``arrival`` (the collective, each
rank's median ``lag_s`` and ``last_share``, the ``slow`` ranks), ``collective`` (a hang's
missing rank or a mismatch, as ``why --json`` writes it, with the ``lines`` it shows) and
``notes``. UI-free; reading never raises: a section that is not this shape is as good as none.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.rundir import RunDir

VERDICTS = "verdicts"


def recorded_verdicts(run_dir: Path) -> Mapping[str, Any] | None:
    """The ``verdicts`` section of ``run_dir``'s ``summary.json``; None without one."""
    try:
        data = json.loads(RunDir(run_dir).summary_json.read_bytes())
    except (OSError, ValueError):
        return None
    section = data.get(VERDICTS) if isinstance(data, dict) else None
    if not isinstance(section, dict) or not isinstance(section.get("stragglers"), list):
        return None
    return section


@dataclass(frozen=True)
class Recorded:
    """A verdict as it was written (``to_json`` with its ``lines``): what a finished run's
    summary holds, or a hang and its stragglers said together."""

    data: Mapping[str, Any]

    def headline(self) -> str:
        return str(self.data.get("headline") or "")

    def lines(self) -> list[str]:
        lines = self.data.get("lines")
        return [str(line) for line in lines] if isinstance(lines, list) else [self.headline()]

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.data.items() if k != "lines"}

    @property
    def missing(self) -> tuple[int, ...]:
        """The ranks that never entered the collective the others waited in, if that is it."""
        ranks = self.data.get("missing") if self.data.get("kind") == "missing" else None
        return tuple(r for r in ranks if isinstance(r, int)) if isinstance(ranks, list) else ()


def rank_figures(value: Any) -> dict[int, float]:
    """``{"2": 0.04}`` as written to JSON, back to ranks and numbers; what is not, left out."""
    if not isinstance(value, dict):
        return {}
    out = {}
    for key, figure in value.items():
        if isinstance(figure, (int, float)) and str(key).isdigit():
            out[int(key)] = float(figure)
    return out
