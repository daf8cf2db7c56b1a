"""The grid in words: ranks as short text, the legend of groups, what a colour means, and
everything about one cell for hovering over it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from ezpz_tui.core.launching.topology.model import (
    COLOUR_BY,
    COORD_FIELD,
    Cell,
    Topology,
)
from ezpz_tui.core.runs.hosts import short_host
from runtime.layout import MESH_ORDER


def rank_summary(ranks: Sequence[int], limit: int = 3) -> str:
    """Ranks as short text: ``0-3``, ``0,4,…,28``; at most ``limit`` pieces around the ellipsis.

    Groups are either consecutive (TP) or evenly strided (DP, PP, CP), so the first pieces and the
    last one say everything a reader needs.
    """
    ordered = sorted(ranks)
    spans: list[list[int]] = []
    for rank in ordered:
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            spans.append([rank, rank])
    limit = max(limit, 2)
    if len(spans) > limit:
        head = ",".join(span_text(a, b) for a, b in spans[: limit - 1])
        return f"{head},…,{span_text(*spans[-1])}"
    return ",".join(span_text(a, b) for a, b in spans)


def span_text(first: int, last: int) -> str:
    """``4`` or ``4-7``: one piece of :func:`rank_summary`."""
    return str(first) if last == first else f"{first}-{last}"


class LegendEntry(NamedTuple):
    """One group in the legend: its index (which picks its colour) and its ranks as text."""

    group: int
    text: str


def legend(topo: Topology, limit: int | None = None) -> list[LegendEntry]:
    """The first ``limit`` groups (all when None) with their ranks summarised."""
    groups = topo.groups if limit is None else topo.groups[:limit]
    return [LegendEntry(g, rank_summary(ranks)) for g, ranks in enumerate(groups)]


def describe_colour(topo: Topology, width: int | None = None) -> str:
    """The legend's first line: what a colour means here, and what the numbers are; without
    the numbers part when ``width`` is too small for it."""
    dim = topo.colour_by
    if topo.reason is not None:
        return "cells = rank (placement only, no groups)"
    if not topo.coloured:
        meaning = f"no colours: {dim} = 1, each rank is its own {dim.upper()} group"
    else:
        others = "/".join(d for d in MESH_ORDER if d != dim)
        meaning = f"colour = {dim.upper()} group (ranks sharing {others})"
    full = f"{meaning} · cells = rank"
    return meaning if width is not None and len(full) > width else full


def describe_cell(topo: Topology, cell: Cell) -> str:
    """Everything about one slot in a line, for hovering over it: the rank, where it runs, its
    coordinates and the ranks of its group (the ones it talks to along the colour dimension)."""
    where = f"{short_host(cell.host)} slot {cell.slot}"
    if cell.rank is None:
        return f"{where}: idle"
    text = f"rank {cell.rank} on {where}"
    if cell.oversubscribed:
        text += " (no device of its own)"
    place = cell.place
    if place is None or cell.group is None:
        return text
    coords = " ".join(f"{d} {place[COORD_FIELD[d]]}" for d in COLOUR_BY)
    dim = topo.colour_by
    members = rank_summary(topo.groups[cell.group], limit=4)
    return f"{text} · {coords} · {dim.upper()} group {cell.group}: ranks {members}"
