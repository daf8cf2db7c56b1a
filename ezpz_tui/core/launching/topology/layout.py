"""The grid as lines of styled spans for a given width and height: the sizes, the host rows
(folded when too many), notes, and the group legend under the cells it explains."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

from ezpz_tui.core.launching.topology.describe import describe_colour, legend, span_text
from ezpz_tui.core.launching.topology.fold import fold_rows
from ezpz_tui.core.launching.topology.model import (
    COORD_FIELD,
    Cell,
    HostRow,
    Topology,
)
from ezpz_tui.core.runs.hosts import short_host
from runtime.layout import MESH_ORDER

SpanKind = Literal["text", "heading", "index", "label", "cell", "idle", "dim", "note", "reason"]

GROUP_LINES_MAX = 3
"""Lines of the group list at most; a 768-rank DP colouring has 384 groups nobody reads."""


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


class Span(NamedTuple):
    """A run of text with one look. ``group`` picks the colour of ``cell`` and legend spans;
    ``cell`` is the slot a ``cell``/``idle`` span draws (for hover details)."""

    text: str
    kind: SpanKind = "text"
    group: int | None = None
    cell: Cell | None = None


Line = tuple[Span, ...]


def line_text(line: Line) -> str:
    """The plain text of one line."""
    return "".join(span.text for span in line)


def render_text(lines: Sequence[Line]) -> str:
    """The plain text of a layout, one line per line, trailing spaces removed."""
    return "\n".join(line_text(line).rstrip() for line in lines)


def _clip(line: list[Span], width: int) -> Line:
    """``line`` cut to ``width`` cells, ending in … where text was lost."""
    if sum(len(s.text) for s in line) <= width:
        return tuple(line)
    out: list[Span] = []
    room = max(width - 1, 0)
    for span in line:
        if len(span.text) >= room:
            out.append(span._replace(text=span.text[:room]))
            break
        out.append(span)
        room -= len(span.text)
    out.append(Span("…", "dim"))
    return tuple(s for s in out if s.text)


@dataclass(frozen=True)
class _Geometry:
    """How wide each part of a host row is drawn."""

    index_width: int
    name_width: int
    rank_width: int
    cell_width: int
    visible_slots: int


def _geometry(topo: Topology, width: int) -> _Geometry:
    """Fit the label column and cells into ``width``: full names and roomy cells when they fit,
    then tighter cells and shorter names, then host numbers without names (hovering a cell still
    names its host), then only the first slots and a ``+N`` marker.

    Cells carry their own left padding, so nothing separates the label from the first cell.
    """
    rows = topo.rows
    index_width = len(str(max(len(rows) - 1, 0)))
    name_width = max((len(short_host(r.host)) for r in rows), default=1)
    rank_width = len(str(max(topo.world - 1, 0)))
    slots = max(topo.slots, 1)
    min_name = min(name_width, 6)
    # A ``!`` after a rank needs a cell a column wider, or it would run into the next rank.
    oversubscribed = topo.ppn > topo.accelerators and topo.slots > topo.accelerators
    tightest = rank_width + (2 if oversubscribed else 1)
    for cell_width in range(rank_width + 4, tightest - 1, -1):
        room = width - index_width - 1 - slots * cell_width
        if room >= min_name:
            return _Geometry(index_width, min(name_width, room), rank_width, cell_width, slots)
    cell_width = tightest
    marker = len(f" +{slots}")
    if index_width + slots * cell_width <= width:
        return _Geometry(index_width, 0, rank_width, cell_width, slots)
    visible = max((width - index_width - marker) // cell_width, 1)
    return _Geometry(index_width, 0, rank_width, cell_width, min(visible, slots))


def _name(host: str, width: int) -> str:
    """A host name cut to ``width`` from the left: node names differ at their end."""
    short = short_host(host)
    if len(short) <= width:
        return short.ljust(width)
    return "…" + short[len(short) - width + 1 :]


def _label(row: HostRow, geo: _Geometry) -> list[Span]:
    index = Span(f"{row.index:>{geo.index_width}}", "index")
    if not geo.name_width:
        return [index]
    return [index, Span(" " + _name(row.host, geo.name_width), "label")]


def _cell_span(cell: Cell, geo: _Geometry, topo: Topology) -> Span:
    """`` 12 `` in a roomy cell, `` 12`` in a tight one; ``!`` right after a rank with no device
    of its own."""
    width = geo.cell_width
    if cell.rank is None:
        return Span(" " + "·".center(width - 1), "idle", cell=cell)
    right = (width - geo.rank_width) // 2
    left = width - geo.rank_width - right
    mark = "!" if cell.oversubscribed else " "
    text = " " * left + f"{cell.rank:>{geo.rank_width}}" + (mark + " " * right)[:right]
    return Span(text, "cell", cell.group if topo.coloured else None, cell)


def _row_line(row: HostRow, geo: _Geometry, topo: Topology) -> list[Span]:
    spans = _label(row, geo)
    if row.status == "excluded":
        return [*spans, Span(" excluded", "note")]
    if row.status == "unused":
        return [*spans, Span(f" not used (nodes = {topo.nodes})", "dim")]
    spans += [_cell_span(c, geo, topo) for c in row.cells[: geo.visible_slots]]
    hidden = len(row.cells) - geo.visible_slots
    if hidden > 0:
        spans.append(Span(f" +{hidden}", "dim"))
    return spans


def _rank_range(rows: Sequence[HostRow]) -> str:
    ranks = [r for row in rows for r in row.ranks]
    return f"ranks {span_text(min(ranks), max(ranks))}" if ranks else ""


def _steady(topo: Topology, rows: Sequence[HostRow]) -> list[str]:
    """``pp 0``-style facts true of every rank in ``rows``: the stage a stretch of hosts is."""
    places = [c.place for row in rows for c in row.cells if c.place is not None]
    if not places:
        return []
    facts = []
    for dim in MESH_ORDER:
        if topo.size(dim) > 1:
            values = {p[COORD_FIELD[dim]] for p in places}
            if len(values) == 1:
                facts.append(f"{dim} {values.pop()}")
    return facts


def _summary_line(topo: Topology, first: int, last: int, geo: _Geometry) -> list[Span]:
    rows = topo.rows[first : last + 1]
    hosts = f"hosts {rows[0].index}-{rows[-1].index}"
    status = rows[0].status
    if status == "excluded":
        parts = [hosts, "excluded"]
    elif status == "unused":
        parts = [hosts, f"not used (nodes = {topo.nodes})"]
    else:
        parts = [hosts, _rank_range(rows), *_steady(topo, rows), "same pattern"]
    return [Span(f"{'⋮':>{geo.index_width}} ", "index"), Span(" · ".join(parts), "dim")]


def _more_line(topo: Topology, first: int) -> list[Span]:
    rows = topo.rows[first:]
    text = f"… {len(rows)} more hosts ({rows[0].index}-{rows[-1].index})"
    ranks = _rank_range(rows)
    return [Span(f"{text}, {ranks}" if ranks else text, "dim")]


def _host_lines(topo: Topology, geo: _Geometry, budget: int | None) -> list[list[Span]]:
    """Host rows for at most ``budget`` lines: all of them, else summarised, else cut short."""
    items = fold_rows(topo, budget)
    lines: list[list[Span]] = []
    for n, (first, last, summarised) in enumerate(items):
        if budget is not None and len(items) > budget and n >= max(budget - 1, 1):
            lines.append(_more_line(topo, first))
            break
        if summarised:
            lines.append(_summary_line(topo, first, last, geo))
        else:
            lines.append(_row_line(topo.rows[first], geo, topo))
    return lines


def _header(topo: Topology, width: int) -> list[Span]:
    """The sizes in a line; the compact form when the full one does not fit."""
    dp = str(topo.dp) if topo.reason is None else "?"
    full = (
        f"{topo.world} ranks = {_plural(topo.used_hosts, 'host')} × {topo.ppn} · "
        f"tp {topo.tp} · pp {topo.pp} · cp {topo.cp} · dp {dp}"
    )
    compact = (
        f"{topo.world} ranks = {topo.used_hosts}×{topo.ppn} · "
        f"tp {topo.tp} pp {topo.pp} cp {topo.cp} dp {dp}"
    )
    return [Span(full if len(full) <= width else compact, "heading")]


def _group_lines(topo: Topology, width: int, max_lines: int) -> list[list[Span]]:
    """The group list packed into ``max_lines`` lines of ``width``, ending in ``+N more``."""
    if not topo.coloured or max_lines < 1:
        return []
    dim = topo.colour_by.upper()
    total = len(topo.groups)
    lines: list[list[Span]] = [[Span(f"{dim} groups ({total}):", "dim")]]
    used = len(lines[0][0].text)
    # Never more entries than could fit, so a 6144-group legend costs as little as a 4-group one.
    entries = legend(topo, limit=max_lines * max(width // 4, 1))
    for entry in entries:
        text = f" {entry.text} "
        left = total - entry.group - 1
        reserve = len(f" +{left} more") if left and len(lines) == max_lines else 0
        if used + 1 + len(text) + reserve > width:
            if len(lines) == max_lines:
                lines[-1].append(Span(f" +{total - entry.group} more", "dim"))
                return lines
            lines.append([])
            used = 0
        if used:
            lines[-1].append(Span(" "))
            used += 1
        lines[-1].append(Span(text, "cell", entry.group))
        used += len(text)
    if len(entries) < total:
        lines[-1].append(Span(f" +{total - len(entries)} more", "dim"))
    return lines


def layout_topology(topo: Topology, width: int, height: int | None = None) -> list[Line]:
    """The grid as lines of spans, each at most ``width`` cells, at most ``height`` lines when
    that is possible (None: every host row).

    Order: a header with the sizes, the host rows (summarised when too many), then notes, the
    reason there are no groups, and the legend, so the legend sits under the cells it explains.
    """
    width = max(width, 1)
    geo = _geometry(topo, width)
    tail: list[list[Span]] = [[Span(note, "note")] for note in topo.notes]
    if topo.reason is not None:
        tail.append([Span(topo.reason, "reason")])
    tail.append([Span(describe_colour(topo, width), "dim")])
    group_lines = GROUP_LINES_MAX
    if height is not None:
        spare = height - 1 - len(tail) - len(topo.rows)
        group_lines = max(min(GROUP_LINES_MAX, spare), 1)
    groups = _group_lines(topo, width, group_lines)
    budget = None if height is None else max(height - 1 - len(tail) - len(groups), 2)
    lines = [_header(topo, width), *_host_lines(topo, geo, budget), *tail, *groups]
    return [_clip(line, width) for line in lines]
