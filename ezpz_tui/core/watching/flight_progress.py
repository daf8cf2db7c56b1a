"""The ranks' Flight Recorder progress as their node digests hold it (section ``"flight"``:
:mod:`runtime.flight` reports it, :mod:`runtime.node_digest` keeps it, read by
:mod:`~ezpz_tui.core.watching.node_digests`), one small file a node rather than one a rank.

A live run's digest whose writer stopped rewriting it (its writer died and no rank of the node
has reported since) may no longer say where its ranks are: they are named ``stale``, and their
own files are read too (:func:`~ezpz_tui.core.watching.collectives.read_records`), which the
digests' note says. UI-free and never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ezpz_tui.core.watching.node_digests import NodeDigests, read_node_digests
from runtime.flight import SECTION


@dataclass
class DigestProgress:
    """Each rank's progress from the digests, when the digest holding it was written, the
    ranks of the stale ones, and lines about digests that could not be used or are stale."""

    progress: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    # By rank: when its digest was written. A rank reports its progress when it changed, so
    # an unchanged one still held then, but for the rank's own interval of looking.
    written: dict[int, float] = field(default_factory=dict)
    stale: set[int] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)


def progress_of(digests: NodeDigests, notes: bool = True) -> DigestProgress:
    """The ``"flight"`` sections of ``digests`` (fresh and stale), with their notes unless
    ``notes`` is False (a reader that read them for more says them once)."""
    found = DigestProgress()
    for stale, nodes in ((False, digests.fresh), (True, digests.stale)):
        for node in nodes:
            for rank, held in node.ranks.items():
                value = held.sections.get(SECTION)
                if value is None or (stale and rank in found.progress):
                    continue
                found.progress[rank], found.written[rank] = value, node.written
                if stale:
                    found.stale.add(rank)
    if notes:
        found.notes += list(digests.notes)
        said = digests.note()
        found.notes += [said] if said and found.stale else []
    return found


def read_progress(run_dir: Path, live: bool, now: float) -> DigestProgress:
    """Every node digest's ``"flight"`` sections; a live run's stale digests' ranks named in
    ``stale`` too."""
    return progress_of(read_node_digests(run_dir, live, now))
