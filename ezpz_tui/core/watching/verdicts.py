"""Every verdict a run had, judged once as of its end for its ``summary.json``
(:mod:`~ezpz_tui.core.watching.recorded` says why and what the section holds).

The moment is the run's end, not the finalizer's now: what a watcher would have seen at the
last moment the run was live. Stragglers by step time are judged over each rank's newest
records and stragglers by arrival lag over the newest collectives of the ranks' Flight Recorder
files, as ``top`` judges a live run; a hang's missing rank over the collectives the others had
waited in for two intervals when the run ended; a mismatch wherever it is.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ezpz_tui.core.watching.collectives import ended_at, judge
from ezpz_tui.core.watching.stragglers import SLOW_FACTOR, StepTimes
from ezpz_tui.core.watching.top import newest_records, slow_reasons
from runtime.rundir import RunDir


def ended_verdicts(run_dir: Path, slow_factor: float = SLOW_FACTOR) -> dict[str, Any]:
    """The ``verdicts`` section of an ended run's summary."""
    end = ended_at(run_dir, time.time())
    reading = judge(run_dir, end)
    steps = StepTimes(slow_factor)
    steps.update(newest_records(RunDir(run_dir), [], ended=True))  # top names bad files
    lags = reading.lags
    stragglers = []
    for rank, why in slow_reasons(steps, lags).items():
        lag = lags.lag_s.get(rank)
        stragglers.append(
            {
                "rank": rank,
                "by": "step_time" if rank in steps.slow else "arrival",
                "why": why,
                "arrival_lag_s": None if lag is None else round(lag, 6),
                "step_time_s": steps.recent(rank),
            }
        )
    found = reading.verdict
    return {
        "judged_at": end,
        "stragglers": stragglers,
        "median_step_s": steps.median,
        "slow_factor": slow_factor,
        "arrival": lags.to_json(),
        "collective": None if found is None else {**found.to_json(), "lines": found.lines()},
        "notes": list(reading.notes),
    }
