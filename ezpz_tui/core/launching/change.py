"""What a relaunch changes: the recorded plan of the run being replaced against the plan on the
form, as rows (old -> new) and as a diff of the launcher's argv.

A relaunch stops a live run, so the question it asks must show everything that will differ, not
only the sizes: the nodes, the ranks, the launcher's own flags. Values that every run chooses
afresh (the run directory, the rendezvous port) are masked on both sides, so the diff shows only
what the person changed.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ezpz_tui.core.launching.plan import CheckedPlan

RUN_DIR_MASK = "<run-dir>"
PORT_MASK = "<port>"
_PORT_VALUE = re.compile(r"(MASTER_PORT=)\d+")
_ENDPOINT = re.compile(r"^(\S+):\d+$")
CONTEXT = 2  # at most this many argv items before a change, back to the flag it belongs to
_SIZE_KEYS = frozenset({"tp", "pp", "cp", "nodes", "ppn"})


@dataclass(frozen=True)
class Row:
    """One fact of the two plans; ``old == new`` when it stays."""

    what: str
    old: str
    new: str

    @property
    def changed(self) -> bool:
        return self.old != self.new


@dataclass(frozen=True)
class Hunk:
    """Consecutive argv items replaced: ``old`` by ``new``, after the unchanged ``before``."""

    before: tuple[str, ...]
    old: tuple[str, ...]
    new: tuple[str, ...]


@dataclass(frozen=True)
class RelaunchChange:
    """The run to be replaced and what replaces it."""

    run_id: str
    rows: tuple[Row, ...]
    hunks: tuple[Hunk, ...]

    @property
    def changed(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.changed)


def _sizes_text(sizes: Mapping[str, Any], name: str) -> str:
    value = sizes.get(name)
    return "?" if value is None else str(value)


def _list_text(value: Any) -> str:
    if isinstance(value, list | tuple):
        return shlex.join(str(v) for v in value) or "(none)"
    if isinstance(value, Mapping):
        return " ".join(f"{k}={v}" for k, v in value.items()) or "(none)"
    return "(none)" if value is None else str(value)


def mask_argv(argv: Sequence[str], run_dir: Path | None) -> list[str]:
    """``argv`` with the values chosen per run (its directory, its rendezvous port) masked."""
    path, name = (str(run_dir), run_dir.name) if run_dir else (None, None)
    out: list[str] = []
    for i, item in enumerate(argv):
        if path and name:
            item = RUN_DIR_MASK if item == name else item.replace(path, RUN_DIR_MASK)
        item = _PORT_VALUE.sub(rf"\g<1>{PORT_MASK}", item)
        if i and argv[i - 1] == "MASTER_PORT":
            item = PORT_MASK
        if i and argv[i - 1] == "--rdzv-endpoint":
            item = _ENDPOINT.sub(rf"\g<1>:{PORT_MASK}", item)
        out.append(item)
    return out


def argv_hunks(old: Sequence[str], new: Sequence[str]) -> tuple[Hunk, ...]:
    """Where ``new`` differs from ``old``, item by item, with :data:`CONTEXT` items around."""
    matcher = difflib.SequenceMatcher(a=list(old), b=list(new), autojunk=False)
    hunks = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        before = list(old[max(0, i1 - CONTEXT) : i1])
        flags = [i for i, item in enumerate(before) if item.startswith("-")]
        if flags:
            before = before[flags[-1] :]
        hunks.append(
            Hunk(
                before=tuple(before),
                old=tuple(old[i1:i2]),
                new=tuple(new[j1:j2]),
            )
        )
    return tuple(hunks)


def relaunch_change(
    record: Mapping[str, Any], run_dir: Path, checked: CheckedPlan, new_argv: Sequence[str]
) -> RelaunchChange:
    """The change from the run whose record is ``record`` to ``checked``, whose
    launch would run ``new_argv`` (a preview: its run directory is a placeholder)."""
    plan, alloc = checked.plan, checked.alloc
    old_sizes = record.get("sizes") if isinstance(record.get("sizes"), Mapping) else {}
    old_plan = record.get("plan") if isinstance(record.get("plan"), Mapping) else {}
    new_sizes = {**checked.sizes, "dp": plan.layout(alloc).dp}
    old_hosts = record.get("hosts") if isinstance(record.get("hosts"), list) else []
    new_hosts = plan.hosts_used(alloc)
    new_dict = plan.to_dict()
    rows = [
        *(
            Row(name.upper(), _sizes_text(old_sizes, name), _sizes_text(new_sizes, name))
            for name in ("tp", "pp", "cp", "dp")
        ),
        Row("nodes", str(len(old_hosts)) if old_hosts else "?", str(len(new_hosts))),
        Row("ranks", _sizes_text(old_sizes, "world_size"), str(checked.world_size)),
        Row(
            "per node",
            str(record.get("ranks_per_node", "?")),
            str(plan.ranks_per_node(alloc)),
        ),
    ]
    for key in sorted((set(old_plan) | set(new_dict)) - _SIZE_KEYS):
        rows.append(Row(key, _list_text(old_plan.get(key)), _list_text(new_dict.get(key))))
    launch = record.get("launch") if isinstance(record.get("launch"), Mapping) else {}
    old_argv = launch.get("argv") if isinstance(launch.get("argv"), list) else []
    at = list(new_argv).index("--run-dir") + 1 if "--run-dir" in new_argv else 0
    placeholder = Path(new_argv[at]) if 0 < at < len(new_argv) else None
    hunks = argv_hunks(
        mask_argv([str(a) for a in old_argv], run_dir), mask_argv(list(new_argv), placeholder)
    )
    return RelaunchChange(run_dir.name, tuple(rows), hunks)


def change_lines(change: RelaunchChange) -> list[str]:
    """The change as the relaunch question shows it: changed facts first as ``old → new``, the
    rest on one line, then each argv hunk as ``flag old → new``."""
    lines = [f"{r.what} {r.old} → {r.new}" for r in change.changed]
    if not lines:
        lines.append("Nothing in the plan changes: the same launch again.")
    kept = [f"{r.what} {r.new}" for r in change.rows if not r.changed and len(r.new) < 40]
    if kept:
        lines.append("unchanged: " + " · ".join(kept))
    for hunk in change.hunks:
        before = shlex.join(hunk.before) + " " if hunk.before else ""
        old, new = shlex.join(hunk.old) or "(nothing)", shlex.join(hunk.new) or "(nothing)"
        lines.append(f"argv: {before}{old} → {new}")
    return lines
