"""Where a slow step's time goes, on every rank: ask the ranks to profile their next N steps
(:mod:`runtime.profiling`, through each rank's Flight Recorder FIFO) and read back what each
wrote: the split of its step time into compute, communication and idle, and its top operators.

Only ranks on this host (a FIFO is a pipe on its own host) that call the runtime's step hook
(``History.record`` does) can answer; the others are named with why, or what to add. UI-free:
``ezpz-tui profile`` and ``P`` in the TUI use the same calls.
"""

from __future__ import annotations

import json
import socket
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ezpz_tui.core.words import rank_ranges
from runtime import flight
from runtime.rundir import RANK_ENDED, RunDir, read_statuses

WAIT_S = 120.0  # for N steps to pass and the traces to be written
_POLL_S = 0.2
NO_HOOK = (
    "no profile: it calls no step hook (History.record does; a plain script adds "
    "`runtime.profiling.step()` at the end of each step)"
)


@dataclass(frozen=True)
class ProfileReport:
    """The summaries the ranks wrote after the request, and the ranks without one."""

    run_dir: Path
    steps: int
    summaries: dict[int, dict[str, Any]] = field(default_factory=dict)
    skipped: dict[int, str] = field(default_factory=dict)


def _identity(path: Path) -> tuple[int, int] | None:
    """Which file ``path`` is now: a rank replaces its summary whole (a new file renamed over
    the old), so a new answer is a new inode or at least a new modification time."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _fresh(path: Path, before: tuple[int, int] | None) -> dict[str, Any] | None:
    """The summary at ``path`` if it is not the one that was there before the request."""
    now = _identity(path)
    if now is None or now == before:
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def request_profile(run_dir: Path, steps: int, wait_s: float = WAIT_S) -> ProfileReport:
    """Ask every rank of ``run_dir`` to profile its next ``steps`` steps and wait up to ``wait_s``
    for each to write its summary. A summary written before the request (an earlier profile's,
    however recent) is never taken for this one's answer."""
    run = RunDir(run_dir)
    report = ProfileReport(run_dir, steps)
    pending: list[int] = []
    before: dict[int, tuple[int, int] | None] = {}
    here = socket.gethostname()
    for status in read_statuses(run_dir):
        if status.state in RANK_ENDED:
            why: str | None = f"ended ({status.state})"
        elif status.host and status.host != here:  # its FIFO is a pipe on that host only
            why = f"on host {status.host}, not this one ({here}): run profile there"
        else:
            before[status.rank] = _identity(run.profile_summary(status.rank))
            why = flight.ask(str(run.flight_request(status.rank)), f"p{steps}".encode())
        if why is None:
            pending.append(status.rank)
        else:
            report.skipped[status.rank] = f"no profile: {why}"
    deadline = time.monotonic() + wait_s
    while pending and time.monotonic() < deadline:
        for rank in list(pending):
            found = _fresh(run.profile_summary(rank), before.get(rank))
            if found is not None:
                report.summaries[rank] = found
                pending.remove(rank)
        if pending:
            time.sleep(_POLL_S)
    for rank in pending:
        report.skipped[rank] = f"{NO_HOOK}, or fewer than {steps} steps in {wait_s:g} s"
    return report


def _share(part: float, whole: float) -> str:
    return f"{100 * part / whole:.0f}%" if whole > 0 else "-"


def format_profile(report: ProfileReport) -> list[str]:
    """One line per rank (the split and the top operators), the rank that computes longest
    against the median, where the traces are, and the ranks without a profile."""
    lines = []
    for rank, s in sorted(report.summaries.items()):
        wall = float(s.get("wall_s") or 0.0)
        top = ", ".join(f"{t['name']} {t['self_s']:.3f}s" for t in (s.get("top") or [])[:3])
        overlapped = s.get("overlap_s")
        both = "" if overlapped is None else f" ({_share(overlapped, wall)} overlapping compute)"
        on = " on the device" if s.get("split") == "device" else ""
        lines.append(
            f"rank {rank}: {s.get('steps')} steps in {wall:.2f}s{on}: compute "
            f"{_share(s.get('compute_s', 0.0), wall)}, communication "
            f"{_share(s.get('communication_s', 0.0), wall)}{both}, idle "
            f"{_share(s.get('idle_s', 0.0), wall)}; top: {top}"
        )
    computes = {r: float(s.get("compute_s") or 0.0) for r, s in report.summaries.items()}
    if len(computes) > 1:
        middle = statistics.median(computes.values())
        worst = max(computes, key=lambda r: computes[r])
        if middle > 0 and computes[worst] > 1.2 * middle:
            more = 100 * (computes[worst] / middle - 1)
            lines.append(f"rank {worst} computes {more:.0f}% longer than the median rank")
    if report.summaries:
        where = RunDir(report.run_dir).profiles_dir
        lines.append(
            f"traces: {where}/bNNNN/rank-NNNNN.json (open in Perfetto: https://ui.perfetto.dev)"
        )
    by_reason: dict[str, list[int]] = {}
    for rank, why in report.skipped.items():
        by_reason.setdefault(why, []).append(rank)
    for why, ranks in sorted(by_reason.items(), key=lambda kv: min(kv[1])):
        noun = "rank" if len(ranks) == 1 else "ranks"
        lines.append(f"{noun} {rank_ranges(ranks)}: {why}")
    return lines


def report_json(report: ProfileReport) -> dict[str, Any]:
    return {
        "run": str(report.run_dir),
        "steps": report.steps,
        "ranks": {str(r): s for r, s in sorted(report.summaries.items())},
        "skipped": [{"rank": r, "reason": why} for r, why in sorted(report.skipped.items())],
    }
