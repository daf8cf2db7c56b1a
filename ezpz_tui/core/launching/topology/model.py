"""The grid model: one row per allocated host, one cell per slot, each rank with its group along
the colour dimension. Built on every keystroke of the launch form, so linear in the ranks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import LaunchPlan, RankPlace, rank_layout, validate
from ezpz_tui.core.launching.topology.fold import find_runs
from runtime.layout import MESH_ORDER

ColourBy = Literal["tp", "pp", "cp", "dp"]
COLOUR_BY: tuple[ColourBy, ...] = ("tp", "pp", "cp", "dp")
"""The order ``cycle_colour`` steps through."""

COORD_FIELD = {dim: RankPlace._fields.index(f"{dim}_rank") for dim in MESH_ORDER}
"""Where each coordinate sits in a :class:`RankPlace` tuple (read by index: this is hot)."""

HostStatus = Literal["used", "excluded", "unused"]

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
    layout = plan.layout(alloc)
    reason = None if places else _reason(plan, alloc)
    dp = layout.dp if places else 0
    coord_field = COORD_FIELD[dim]

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
                    group = layout.group(rank, dim)
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
        tp=plan.tp,
        pp=plan.pp,
        cp=plan.cp,
        dp=dp,
        world=layout.world,
        groups=tuple(tuple(groups[g]) for g in sorted(groups)),
        reason=reason,
        notes=tuple(notes),
        nodes=plan.nodes,
        runs=find_runs(rows),
    )
