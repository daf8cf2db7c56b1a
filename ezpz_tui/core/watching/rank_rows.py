"""The rank list's rows and the heatmap's cells: which rank comes first under each sort key,
ranks folded under their hosts, each host's totals, and each figure's value by rank. UI-free,
so a test drives it with a monitor and no terminal.

Sorting puts the rank a user hunts for first: the slowest, the busiest, the fullest. Ranks
without the figure go last, in rank order, so a rank that never reported is not mistaken for the
best one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from ezpz_tui.core.watching.followers import LAUNCHER
from ezpz_tui.core.watching.heatmap import Values
from ezpz_tui.core.watching.monitor import RunMonitor

SORTS: tuple[str, ...] = ("rank", "step time", "cpu", "rss", "util", "mem")
"""The sort keys ``s`` cycles through, in order; each but ``rank`` puts the highest first."""

Row = int | str
"""A row: a rank, or a host's name (the heading of that host's group)."""


def figure(monitor: RunMonitor, rank: int, sort: str) -> float | None:
    """``rank``'s value of the figure ``sort`` names (None: not known)."""
    if sort == "step time":
        return monitor.steps.recent(rank)
    telemetry = monitor.telemetry.get(rank)
    latest = telemetry.latest if telemetry else None
    if latest is None:
        return None
    if sort == "cpu":
        return latest.cpu_pct
    if sort == "rss":
        return latest.rss_bytes
    if sort == "util":
        return latest.util_pct
    if sort == "mem":
        return latest.mem_used_bytes
    return None


def _by(monitor: RunMonitor, sort: str) -> Callable[[int], tuple[int, float, int]]:
    def key(rank: int) -> tuple[int, float, int]:
        if sort == "rank":
            return (0, 0.0, rank)
        value = figure(monitor, rank, sort)
        return (1, 0.0, rank) if value is None else (0, -value, rank)

    return key


def host_of(monitor: RunMonitor, rank: int) -> str:
    """The short name of ``rank``'s host (``?`` until its status says)."""
    return monitor.ranks[rank].host.split(".")[0] or "?"


def ordered_rows(monitor: RunMonitor, sort: str, collapsed: Collection[str] | None) -> list[Row]:
    """Every rank in ``sort`` order; with ``collapsed`` given (the hosts folded shut), ranks are
    grouped under a heading row per host, hosts in the order of their first rank after sorting.
    ``None`` means no grouping (a run on one host gains nothing from a heading)."""
    ranks = sorted(monitor.ranks, key=_by(monitor, sort))
    if collapsed is None:
        return list(ranks)
    groups: dict[str, list[int]] = {}
    for rank in ranks:
        groups.setdefault(host_of(monitor, rank), []).append(rank)
    rows: list[Row] = []
    for host, members in groups.items():
        rows.append(host)
        if host not in collapsed:
            rows.extend(members)
    return rows


def hosts(monitor: RunMonitor) -> list[str]:
    """The run's known hosts by their lowest rank (ranks whose status is not read yet have
    none: they do not make a one-host run look like two)."""
    seen: dict[str, None] = {}
    for rank in sorted(monitor.ranks):
        if monitor.ranks[rank].host:
            seen.setdefault(host_of(monitor, rank), None)
    return list(seen)


@dataclass(frozen=True)
class HostTotals:
    """A host's heading: its ranks, their summed CPU, RSS and accelerator memory, their mean
    utilisation and how many are slow."""

    ranks: int
    cpu_pct: float | None
    rss_bytes: float | None
    util_pct: float | None
    mem_used_bytes: float | None
    slow: int


def totals_by_host(monitor: RunMonitor) -> dict[str, HostTotals]:
    """Every host's totals, in one pass over the ranks."""
    members: dict[str, list[int]] = {}
    for rank in list(monitor.ranks):  # a copy: the rank list reads it in a thread
        members.setdefault(host_of(monitor, rank), []).append(rank)
    return {host: _totals(monitor, ranks) for host, ranks in members.items()}


def _totals(monitor: RunMonitor, ranks: list[int]) -> HostTotals:
    def values(sort: str) -> list[float]:
        found = (figure(monitor, r, sort) for r in ranks)
        return [v for v in found if v is not None]

    cpu, rss, util, mem = (values(s) for s in ("cpu", "rss", "util", "mem"))
    return HostTotals(
        ranks=len(ranks),
        cpu_pct=sum(cpu) if cpu else None,
        rss_bytes=sum(rss) if rss else None,
        util_pct=sum(util) / len(util) if util else None,
        mem_used_bytes=sum(mem) if mem else None,
        slow=sum(r in monitor.slow_ranks for r in ranks),
    )


@dataclass(frozen=True)
class RankRows:
    """Everything the rank list draws from that costs a pass over every rank: computed in a
    thread for a big run, so 16,384 ranks re-sorted after each batch never hold up a key."""

    rows: list[Row]
    grouped: bool
    totals: dict[str, HostTotals]
    first_failure: int | None
    first_silent: int | None
    host_width: int
    missing: frozenset[int] = frozenset()  # never entered the collective the others wait in


def rank_rows(
    monitor: RunMonitor, sort: str, collapsed: Collection[str], launcher: bool, now: float
) -> RankRows:
    """The rows of ``monitor``'s run in ``sort`` order (the launcher's first when it has
    one), grouped by host on several hosts with ``collapsed`` folded; safe in a thread while
    the monitor is fed on another (it reads copies of the rank table)."""
    grouped = len(hosts(monitor)) > 1
    rows: list[Row] = [LAUNCHER] if launcher else []
    rows += ordered_rows(monitor, sort, collapsed if grouped else None)
    names = (len(info.host.split(".")[0]) for info in list(monitor.ranks.values()))
    return RankRows(
        rows=rows,
        grouped=grouped,
        totals=totals_by_host(monitor) if grouped else {},
        first_failure=monitor.first_failure,
        first_silent=monitor.hung(now),
        missing=monitor.missing,
        # Grouped, the heading names the host: its ranks' rows give the room to their figures.
        host_width=0 if grouped else min(16, max(names, default=0)),
    )


def heat_values(
    monitor: RunMonitor, now: float | None = None
) -> tuple[dict[int, tuple[str, int]], dict[str, Values], dict[str, str]]:
    """What the heatmap draws of ``monitor``'s run: each rank's place (host, local rank), for
    the ranks whose status said it, each figure's latest value by rank, and what a figure's
    value is of (the peak an MFU divides by). A rank's MFU is the run's FLOPs per token at that
    rank's latest tokens/s (each rank times the global batch by its own step)."""
    places = {
        rank: (info.host, info.local_rank)
        for rank, info in monitor.ranks.items()
        if info.host and info.local_rank is not None
    }
    latest = {rank: t.latest for rank, t in monitor.telemetry.items() if t.latest is not None}
    values: dict[str, Values] = {
        "step_time": {rank: monitor.steps.recent(rank) for rank in monitor.ranks},
        "tokens_per_s": dict(monitor.steps.tokens_per_s),
        "util_pct": {rank: s.util_pct for rank, s in latest.items()},
        "mem_pct": {rank: s.mem_pct for rank, s in latest.items()},
        "cpu_pct": {rank: s.cpu_pct for rank, s in latest.items()},
        "arrival_lag": dict(monitor.collectives.lags.lag_s) if monitor.collectives else {},
    }
    steps = monitor.steps
    eff = monitor.efficiency.get(steps.flops_per_token, time.time() if now is None else now)
    about: dict[str, str] = {}
    if eff is not None and eff.peak is not None:
        values["mfu"] = {rank: eff.mfu(tps) for rank, tps in steps.tokens_per_s.items()}
        about["mfu"] = f"of {eff.peak.label}"
    return places, values, about
