"""The sweep a person types into the TUI's prompt: ``tp=1,2 pp=1,2 cp=1 steps=20``.

The CLI spells the same as ``--tp 1,2 --pp 1,2 --cp 1 --steps 20``. The prompt starts filled in
from the plan on the form, so the common case (try the tensor-parallel sizes a node allows) is
one key and Enter.
"""

from __future__ import annotations

from dataclasses import dataclass

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import LaunchPlan
from ezpz_tui.core.launching.sizes import size_values

SIZES = ("tp", "pp", "cp")
DEFAULT_STEPS = 20
MAX_PROMPT_VALUES = 4  # sizes offered in the prompt: a sweep of 4 x 1 x 1 runs takes minutes


@dataclass(frozen=True)
class SweepSpec:
    """The sizes to combine and the demo's steps per run (None: the command's own)."""

    tp: tuple[int, ...]
    pp: tuple[int, ...]
    cp: tuple[int, ...]
    steps: int | None


def _whole_numbers(name: str, text: str) -> tuple[int, ...]:
    values = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) < 1:
            raise ValueError(f"{name}={text}: give whole numbers of at least 1, e.g. {name}=1,2")
        values.append(int(item))
    return tuple(dict.fromkeys(values))


def parse_spec(text: str) -> SweepSpec:
    """``tp=1,2 pp=1 cp=1 steps=20`` (any order; an unnamed size stays 1); ``ValueError`` says
    what is wrong in one sentence."""
    given: dict[str, str] = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if not sep or key not in (*SIZES, "steps"):
            raise ValueError(f"{word!r}: write tp=1,2 pp=1,2 cp=1 steps=20")
        if key in given:
            raise ValueError(f"{key} is given twice")
        given[key] = value
    sizes = {name: _whole_numbers(name, given[name]) if name in given else (1,) for name in SIZES}
    steps = None
    if "steps" in given:
        if not given["steps"].isdigit() or int(given["steps"]) < 1:
            raise ValueError(f"steps={given['steps']}: give a whole number of at least 1")
        steps = int(given["steps"])
    return SweepSpec(sizes["tp"], sizes["pp"], sizes["cp"], steps)


def default_spec(plan: LaunchPlan, alloc: Allocation, demo: bool) -> str:
    """The prompt's start: the TP sizes that keep TP on a node, the plan's PP and CP, and
    :data:`DEFAULT_STEPS` steps for the demo (a user's command keeps its own)."""
    ppn = plan.ranks_per_node(alloc)
    tps = [v for v in size_values(plan.with_changes(tp=1), alloc, "tp") if v <= ppn]
    text = f"tp={','.join(map(str, tps[:MAX_PROMPT_VALUES] or [1]))} pp={plan.pp} cp={plan.cp}"
    return text + (f" steps={DEFAULT_STEPS}" if demo else "")
