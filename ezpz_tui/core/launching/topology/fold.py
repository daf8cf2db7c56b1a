"""Which host rows a summarised grid draws: stretches of hosts that continue one pattern are
found once per plan (:func:`find_runs`), and :func:`fold_rows` keeps as many real rows of each
stretch as the height allows, folding the rest into one summary line."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ezpz_tui.core.launching.topology.model import HostRow, HostStatus, Topology

    _Signature = tuple[HostStatus, tuple[bool, ...], list[int]]

_VECTOR = 6
"""Numbers per rank that must all move in step for a host to continue the pattern: rank,
group and the four coordinates."""


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


def find_runs(rows: Sequence[HostRow]) -> tuple[tuple[int, int], ...]:
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


def fold_rows(topo: Topology, budget: int | None) -> list[tuple[int, int, bool]]:
    """(first, last, summarised) for each line of host rows in at most ``budget`` lines where
    folding can get there (None: every row); the caller cuts what still does not fit."""
    return _items(topo, _choose_keep(topo, budget))
