"""The sweep a person types into the TUI's prompt: ``tp=1,2 pp=1,2 cp=1 steps=20``, or the tune
that races those layouts instead: ``tune tp=1,2 pp=1,2 steps=6 budget=600 mem=4``.

The CLI spells the same as ``--tp 1,2 --pp 1,2 --cp 1 --steps 20`` (``ezpz-tui tune ...
--first-steps 6 --budget 600 --mem-limit-gb 4``): a tune's ``steps`` are its first race's. The
prompt starts filled in from the plan on the form, so the common case (try the tensor-parallel
sizes a node allows) is one key and Enter.
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
    tune: bool = False  # race the layouts (ezpz-tui tune) rather than run each in full
    budget: float | None = None  # a tune's seconds
    mem_gb: float | None = None  # a tune's memory limit a rank


def _whole_numbers(name: str, text: str) -> tuple[int, ...]:
    values = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit() or int(item) < 1:
            raise ValueError(f"{name}={text}: give whole numbers of at least 1, e.g. {name}=1,2")
        values.append(int(item))
    return tuple(dict.fromkeys(values))


def _positive_number(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"{name}={text}: give a number above 0")
    return value


def parse_spec(text: str) -> SweepSpec:
    """``tp=1,2 pp=1 cp=1 steps=20`` (any order; an unnamed size stays 1), after ``tune`` also
    ``budget=S`` and ``mem=GiB``; ``ValueError`` says what is wrong in one sentence."""
    words = text.split()
    tune = bool(words) and words[0] == "tune"
    keys = (*SIZES, "steps", *(("budget", "mem") if tune else ()))
    given: dict[str, str] = {}
    for word in words[1:] if tune else words:
        key, sep, value = word.partition("=")
        if not sep or key not in keys:
            extra = " budget=600 mem=4" if tune else ""
            raise ValueError(f"{word!r}: write {'tune ' * tune}tp=1,2 pp=1,2 cp=1 steps=20{extra}")
        if key in given:
            raise ValueError(f"{key} is given twice")
        given[key] = value
    sizes = {name: _whole_numbers(name, given[name]) if name in given else (1,) for name in SIZES}
    steps = None
    if "steps" in given:
        if not given["steps"].isdigit() or int(given["steps"]) < 1:
            raise ValueError(f"steps={given['steps']}: give a whole number of at least 1")
        steps = int(given["steps"])
    if tune and steps is not None and steps < 4:
        raise ValueError(f"steps={steps}: a tune's first race needs 4 or more (2 are warm-up)")
    budget = _positive_number("budget", given["budget"]) if "budget" in given else None
    mem = _positive_number("mem", given["mem"]) if "mem" in given else None
    return SweepSpec(sizes["tp"], sizes["pp"], sizes["cp"], steps, tune, budget, mem)


def default_spec(plan: LaunchPlan, alloc: Allocation, demo: bool) -> str:
    """The prompt's start: the TP sizes that keep TP on a node, the plan's PP and CP, and
    :data:`DEFAULT_STEPS` steps for the demo (a user's command keeps its own)."""
    ppn = plan.ranks_per_node(alloc)
    tps = [v for v in size_values(plan.with_changes(tp=1), alloc, "tp") if v <= ppn]
    text = f"tp={','.join(map(str, tps[:MAX_PROMPT_VALUES] or [1]))} pp={plan.pp} cp={plan.cp}"
    return text + (f" steps={DEFAULT_STEPS}" if demo else "")
