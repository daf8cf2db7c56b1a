"""The topology grid as data: which rank runs in which accelerator slot, and its groups.

A plan's sizes only mean something once you see them on the hosts: whether a TP group stays on
one node, where the pipeline stages split, which hosts sit idle. This module turns a plan and an
allocation into that picture without any UI, so the widget only paints it, the text rendering can
be tested at any size, and the same picture can be printed by a command-line tool.

Two steps, kept apart because the second runs on every resize and the first on every keystroke
in the launch form:

- :func:`build_topology`: one row per allocated host (used, excluded or beyond ``nodes``), one cell
  per accelerator slot, each cell with its rank, its group along ``colour_by`` and its coordinate
  inside that group. A group of dimension *d* is the set of ranks that differ only in coordinate
  *d* (a TP group shares pp, dp and cp), which is exactly the set that talks in *d*'s collectives.
- :func:`layout_topology`: lines of styled spans for a given width and height. A grid too tall for
  the height is summarised: hosts whose pattern continues the previous host's (ranks, groups and
  coordinates all shifted by the same amount) collapse into one line, and the boundaries where the
  pattern changes (a new pipeline stage, an excluded host) stay visible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal, NamedTuple

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import LaunchPlan, RankPlace, rank_layout, short_host, validate

ColourBy = Literal["tp", "pp", "cp", "dp"]
COLOUR_BY: tuple[ColourBy, ...] = ("tp", "pp", "cp", "dp")
"""The order ``cycle_colour`` steps through."""

MESH_ORDER: tuple[ColourBy, ...] = ("pp", "dp", "cp", "tp")
"""Mesh dimensions outermost first, as :func:`ezpz_tui.core.launching.plan.rank_layout` lays ranks out;
group indices count in this order, so group 0 always holds rank 0."""

HostStatus = Literal["used", "excluded", "unused"]
SpanKind = Literal["text", "heading", "index", "label", "cell", "idle", "dim", "note", "reason"]

GROUP_LINES_MAX = 3
"""Lines of the group list at most; a 768-rank DP colouring has 384 groups nobody reads."""

_LAYOUT_FIELDS = frozenset({"nodes", "exclude", "ppn", "tp", "pp", "cp", "sizes"})


def next_colour_by(current: str, topo: Topology | None = None) -> ColourBy:
    """The dimension after ``current`` in TP → PP → CP → DP → TP (TP for anything unknown).

    Given the current ``topo``, dimensions of size 1 are skipped while another one has groups:
    with tp = pp = cp = 1 only DP colours anything, and three presses to get there help nobody.
    """
    start = COLOUR_BY.index(current) if current in COLOUR_BY else -1
    following = [COLOUR_BY[(start + step) % len(COLOUR_BY)] for step in range(1, 5)]
    if topo is not None and topo.reason is None:
        wide = [d for d in following if topo.size(d) > 1]
        if wide:
            return wide[0]
    return following[0]


class Cell(NamedTuple):
    """One accelerator slot of one host.

    ``rank`` is None for an idle slot. ``group`` (the index of the rank's group along the colour
    dimension, counted in mesh order) and ``coord`` (the rank's coordinate inside that group) are
    None when the sizes do not divide, and so is ``place``. ``oversubscribed`` marks a rank placed
    beyond the host's accelerators, which has no device of its own.
    """

    host: str
    slot: int
    rank: int | None = None
    group: int | None = None
    coord: int | None = None
    place: RankPlace | None = None
    oversubscribed: bool = False


class HostRow(NamedTuple):
    """One allocated host in allocation order; ``index`` is its position in the allocation."""

    index: int
    host: str
    status: HostStatus
    cells: tuple[Cell, ...]

    @property
    def ranks(self) -> list[int]:
        """The ranks placed on this host, in slot order."""
        return [c.rank for c in self.cells if c.rank is not None]


@dataclass(frozen=True)
class Topology:
    """The grid model of one plan on one allocation, coloured by one dimension.

    ``groups[g]`` lists the ranks of group ``g`` (empty when ``reason`` says why there are no
    groups). ``notes`` are one-line warnings worth showing next to the grid. ``runs`` are the
    stretches of rows (first, last) where each host continues the previous one's pattern, which
    a summary may fold into one line; they are found here, once per plan, not on every resize.
    """

    colour_by: ColourBy
    rows: tuple[HostRow, ...]
    slots: int
    accelerators: int
    ppn: int
    tp: int
    pp: int
    cp: int
    dp: int
    world: int
    groups: tuple[tuple[int, ...], ...]
    reason: str | None
    notes: tuple[str, ...]
    nodes: int | None
    runs: tuple[tuple[int, int], ...]

    def size(self, dim: str) -> int:
        """The size of mesh dimension ``dim`` (tp, pp, cp or dp)."""
        return {"tp": self.tp, "pp": self.pp, "cp": self.cp, "dp": self.dp}[dim]

    @property
    def coloured(self) -> bool:
        """Whether colours carry meaning: groups exist and the colour dimension is not 1 wide
        (then every rank is a group of its own and colouring would be noise)."""
        return self.reason is None and self.size(self.colour_by) > 1

    @property
    def used_hosts(self) -> int:
        """Hosts that get ranks."""
        return sum(1 for row in self.rows if row.status == "used")


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


_FIELD = {dim: RankPlace._fields.index(f"{dim}_rank") for dim in MESH_ORDER}
"""Where each coordinate sits in a :class:`RankPlace` tuple (read by index: this is hot)."""


def _group_index(place: RankPlace, radix: Sequence[tuple[int, int]]) -> int:
    """Mixed-radix index of the coordinates other than the colour dimension, outermost first;
    ``radix`` holds (field position, size) of those coordinates."""
    index = 0
    for position, size in radix:
        index = index * size + place[position]
    return index


def _reason(plan: LaunchPlan, alloc: Allocation) -> str:
    """The first problem that stops ranks forming a mesh, in the words of :func:`validate`."""
    for problem in validate(plan, alloc):
        if problem.level == "error" and problem.field in _LAYOUT_FIELDS:
            return problem.message
    return "The sizes do not fit the ranks."


def build_topology(plan: LaunchPlan, alloc: Allocation, colour_by: str = "tp") -> Topology:
    """The grid of ``plan`` on ``alloc``, with groups along ``colour_by`` (tp, pp, cp or dp).

    Cheap enough to call on every change of the launch form: linear in the number of ranks.
    """
    dim = next((d for d in COLOUR_BY if d == colour_by), COLOUR_BY[0])
    used = plan.hosts_used(alloc)
    usable = set(plan.usable_hosts(alloc))
    ppn = max(plan.ranks_per_node(alloc), 0)
    accelerators = alloc.accelerators_per_host
    cpu = alloc.accelerator_kind == "cpu"
    # CPU "slots" are only a default rank count, so on CPU hosts the grid is as wide as the plan.
    slots = ppn if cpu else max(ppn, accelerators)
    # Beyond this slot ranks share a device; CPU hosts never run out of slots.
    devices = slots if cpu else accelerators
    places = rank_layout(plan, alloc)
    world = len(used) * ppn
    reason = None if places else _reason(plan, alloc)
    tp, pp, cp = plan.tp, plan.pp, plan.cp
    dp = plan.dp(alloc) if places else 0
    sizes = {"tp": tp, "pp": pp, "cp": cp, "dp": dp}
    radix = [(_FIELD[d], sizes[d]) for d in MESH_ORDER if d != dim]
    coord_field = _FIELD[dim]

    groups: dict[int, list[int]] = {}
    used_index = {host: i for i, host in enumerate(used)}
    rows: list[HostRow] = []
    for index, host in enumerate(alloc.hosts):
        if host in used_index:
            first = used_index[host] * ppn
            cells = []
            for slot in range(slots):
                if slot >= ppn:
                    cells.append(Cell(host, slot))
                    continue
                rank = first + slot
                if places:
                    place = places[rank]
                    group = _group_index(place, radix)
                    groups.setdefault(group, []).append(rank)
                    coord = place[coord_field]
                    cell = Cell(host, slot, rank, group, coord, place, slot >= devices)
                else:
                    cell = Cell(host, slot, rank, oversubscribed=slot >= devices)
                cells.append(cell)
            rows.append(HostRow(index, host, "used", tuple(cells)))
        else:
            status: HostStatus = "unused" if host in usable else "excluded"
            rows.append(HostRow(index, host, status, ()))

    notes: list[str] = []
    if not cpu and ppn > accelerators:
        notes.append(
            f"{ppn} ranks per host on {accelerators} accelerators: "
            f"! marks ranks with no device of their own."
        )
    if cpu and ppn > alloc.cpus_per_host:
        notes.append(f"{ppn} ranks per host on {alloc.cpus_per_host} CPUs: ranks share cores.")
    if places:
        notes += [p.message for p in validate(plan, alloc) if p.field == "tp"]
    return Topology(
        colour_by=dim,
        rows=tuple(rows),
        slots=slots,
        accelerators=accelerators,
        ppn=ppn,
        tp=tp,
        pp=pp,
        cp=cp,
        dp=dp,
        world=world,
        groups=tuple(tuple(groups[g]) for g in sorted(groups)),
        reason=reason,
        notes=tuple(notes),
        nodes=plan.nodes,
        runs=_runs(rows),
    )


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
        head = ",".join(_span_text(a, b) for a, b in spans[: limit - 1])
        return f"{head},…,{_span_text(*spans[-1])}"
    return ",".join(_span_text(a, b) for a, b in spans)


def _span_text(first: int, last: int) -> str:
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
    coords = " ".join(f"{d} {place[_FIELD[d]]}" for d in COLOUR_BY)
    dim = topo.colour_by
    members = rank_summary(topo.groups[cell.group], limit=4)
    return f"{text} · {coords} · {dim.upper()} group {cell.group}: ranks {members}"


# --- layout ----------------------------------------------------------------------------------


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


_VECTOR = 6
"""Numbers per rank that must all move in step for a host to continue the pattern: rank,
group and the four coordinates."""


_Signature = tuple[HostStatus, tuple[bool, ...], list[int]]


def _signature(row: HostRow) -> _Signature:
    """Status, which slots are idle, and the flat numbers of the rank cells of ``row``."""
    numbers: list[int] = []
    for cell in row.cells:
        if cell.rank is not None:
            coords = (0, 0, 0, 0) if cell.place is None else cell.place[2:]
            numbers += (cell.rank, cell.group or 0, *coords)
    return row.status, tuple(c.rank is None for c in row.cells), numbers


def _step(a: _Signature, b: _Signature) -> tuple[int, ...] | None:
    """How host ``b`` follows from host ``a`` when every rank moved by the same amount (rank,
    group and each coordinate); None when it does not. Hosts of one non-used status always
    follow each other."""
    if a[0] != b[0] or a[1] != b[1]:
        return None
    diffs = [y - x for x, y in zip(a[2], b[2], strict=True)]
    step = diffs[:_VECTOR]
    return tuple(step) if diffs == step * (len(diffs) // _VECTOR) else None


def _runs(rows: Sequence[HostRow]) -> tuple[tuple[int, int], ...]:
    """Maximal stretches of hosts (first, last) where each host follows the one before by the
    same step: a uniform pattern, one pipeline stage, a block of excluded hosts."""
    signatures = [_signature(row) for row in rows]
    steps = [_step(a, b) for a, b in pairwise(signatures)]
    runs: list[tuple[int, int]] = []
    i = 0
    while i < len(rows):
        j = i
        if i < len(steps) and steps[i] is not None:
            j = i + 1
            while j < len(steps) and steps[j] == steps[i]:
                j += 1
        runs.append((i, j))
        i = j + 1
    return tuple(runs)


Keep = tuple[int, int] | None
"""How much of each stretch of alike hosts to draw: (first rows, last rows) around one summary
line, or None for every row."""


def _kept(topo: Topology, first: int, last: int, keep: Keep) -> tuple[int, int]:
    """(first rows, last rows) drawn of the stretch ``first``-``last`` (the rest is one line).
    Stretches of excluded or unused hosts fold whole: their rows say nothing more."""
    count = last - first + 1
    if keep is None:
        return count, 0
    head, tail = keep if topo.rows[first].status == "used" else (0, 0)
    return (count, 0) if count <= head + tail + 1 else (head, tail)


def _line_count(topo: Topology, keep: Keep) -> int:
    total = 0
    for first, last in topo.runs:
        head, tail = _kept(topo, first, last, keep)
        total += head + tail + (head + tail < last - first + 1)
    return total


def _items(topo: Topology, keep: Keep) -> list[tuple[int, int, bool]]:
    """(first, last, summarised) for each line of host rows."""
    out: list[tuple[int, int, bool]] = []
    for first, last in topo.runs:
        head, tail = _kept(topo, first, last, keep)
        out += [(i, i, False) for i in range(first, first + head)]
        if head + tail < last - first + 1:
            out.append((first + head, last - tail, True))
        out += [(i, i, False) for i in range(last - tail + 1, last + 1)]
    return out


def _choose_keep(topo: Topology, budget: int | None) -> Keep:
    """Every row when they fit; else as many first rows of each stretch as fit, plus its last
    row (so a big screen shows more real rows); else only each stretch's first row."""
    if budget is None or len(topo.rows) <= budget:
        return None
    for head in range(budget, 0, -1):
        if _line_count(topo, (head, 1)) <= budget:
            return head, 1
    return 1, 0


def _rank_range(rows: Sequence[HostRow]) -> str:
    ranks = [r for row in rows for r in row.ranks]
    return f"ranks {_span_text(min(ranks), max(ranks))}" if ranks else ""


def _steady(topo: Topology, rows: Sequence[HostRow]) -> list[str]:
    """``pp 0``-style facts true of every rank in ``rows``: the stage a stretch of hosts is."""
    places = [c.place for row in rows for c in row.cells if c.place is not None]
    if not places:
        return []
    facts = []
    for dim in MESH_ORDER:
        if topo.size(dim) > 1:
            values = {p[_FIELD[dim]] for p in places}
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
    items = _items(topo, _choose_keep(topo, budget))
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
