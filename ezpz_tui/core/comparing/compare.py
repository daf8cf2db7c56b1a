"""Runs side by side: which layout trains faster, and what changed between them.

:func:`compare` reads each run (:func:`ezpz_tui.core.comparing.facts.read_facts`) and ranks them
by MFU when every run has one, else by tokens/s (then samples/s, then step time; runs with none
of these last, in the order given), the question a person trying layouts asks. Each
:class:`Row` is one figure across the runs and names the runs best at it: lower step time, time
to first step, memory and loss; higher throughput, TFLOPS and MFU. A best is named only when
two or more runs have the figure and they are not all equal, and a run still running can be best
(its figures are marked partial where they are shown).

Loss is compared at the last step every run recorded a loss for, so a run that went further
does not win for having trained longer. :class:`Change` lists the record entries that
differ, each run's own directory and identity (id, creation time) left out, since those
always differ.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ezpz_tui.core.comparing.facts import RunFacts, read_facts
from ezpz_tui.core.watching.efficiency import PeakSettings

_IDENTITY = frozenset({"run_id", "created", "created_epoch"})
RUN_DIR_MARK = "<run-dir>"


@dataclass(frozen=True)
class Row:
    """One figure across the compared runs, in the comparison's run order."""

    key: str  # stable name for JSON and the TUI: "tokens_per_s", "loss_at_common_step"...
    label: str  # what a person reads: "tokens/s", "loss @ step 19"
    better: str  # "lower" or "higher"
    values: tuple[float | None, ...]
    best: frozenset[int]  # indices of the runs best at it (ties share); empty when < 2 values


@dataclass(frozen=True)
class Change:
    """One record entry that differs: its dotted key and each run's value as text
    (``None`` where a run does not record it)."""

    key: str
    values: tuple[str | None, ...]


@dataclass(frozen=True)
class Comparison:
    """Runs ranked fastest first, their figures as rows, and what differs in their records."""

    runs: tuple[RunFacts, ...]
    rows: tuple[Row, ...]
    common_step: int | None  # the last step every run recorded a loss at
    changes: tuple[Change, ...]

    def row(self, key: str) -> Row | None:
        return next((row for row in self.rows if row.key == key), None)

    def best_at(self, index: int) -> tuple[str, ...]:
        """The keys of the rows run ``index`` is best at."""
        return tuple(row.key for row in self.rows if index in row.best)


def _speed_key(facts: RunFacts) -> tuple[float, ...]:
    n = facts.numbers
    neg = (-v if v is not None else math.inf for v in (n.tokens_per_s, n.samples_per_s))
    return (*neg, n.step_time_s if n.step_time_s is not None else math.inf)


def rank_by_speed(runs: Iterable[RunFacts]) -> list[RunFacts]:
    """Fastest first: tokens/s, then samples/s, then step time (stable for equal keys)."""
    return sorted(runs, key=_speed_key)


def ranked_by(runs: Sequence[RunFacts]) -> tuple[str, ...]:
    """What the runs are ranked by: MFU when every run has one (it compares across models and
    batches, which tokens/s does not), else speed."""
    if runs and all(facts.mfu is not None for facts in runs):
        return ("mfu",)
    return ("tokens_per_s", "samples_per_s", "step_time_s")


def rank_runs(runs: Iterable[RunFacts]) -> list[RunFacts]:
    """Best first, by :func:`ranked_by`: highest MFU, else fastest."""
    listed = list(runs)
    if ranked_by(listed) == ("mfu",):
        return sorted(listed, key=lambda facts: -(facts.mfu or 0.0))
    return rank_by_speed(listed)


def _best(values: Sequence[float | None], better: str) -> frozenset[int]:
    known = [(i, v) for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    if len(known) < 2:
        return frozenset()
    pick = min if better == "lower" else max
    top = pick(v for _, v in known)
    best = frozenset(i for i, v in known if v == top)
    return best if len(best) < len(known) else frozenset()  # all equal: nobody is better


def _common_step(runs: Sequence[RunFacts]) -> int | None:
    steps: set[int] | None = None
    for facts in runs:
        have = set(facts.numbers.loss_by_step)
        steps = have if steps is None else steps & have
        if not steps:
            return None
    return max(steps) if steps else None


ONLY_WHEN_RECORDED = frozenset({"restore_s", "stage_s", "restart_s"})
"""Rows left out when no run compared has the figure: a checkpoint's restore (resumed runs),
the environment's staging (``--stage``), a relaunch's restart (its children)."""

# key, label, better, the figure of one run
_FIGURES: tuple[tuple[str, str, str, Callable[[RunFacts], float | None]], ...] = (
    ("stage_s", "stage s", "lower", lambda f: f.stage_s),
    ("first_step_s", "first step s", "lower", lambda f: f.first_step_s),
    ("restore_s", "restore s", "lower", lambda f: f.numbers.restore_s),
    ("restart_s", "restart s", "lower", lambda f: f.restart.total_s if f.restart else None),
    ("step_time_s", "step s", "lower", lambda f: f.numbers.step_time_s),
    ("samples_per_s", "samples/s", "higher", lambda f: f.numbers.samples_per_s),
    ("tokens_per_s", "tokens/s", "higher", lambda f: f.numbers.tokens_per_s),
    ("tflops", "TFLOPS/device", "higher", lambda f: f.tflops),
    ("mfu", "MFU", "higher", lambda f: f.mfu),
    ("peak_mem_gb", "peak GiB", "lower", lambda f: f.numbers.peak_mem_max_gb),
    ("final_loss", "final loss", "lower", lambda f: f.numbers.final_loss),
    ("best_loss", "best loss", "lower", lambda f: f.numbers.best_loss),
    ("goodput", "goodput", "higher", lambda f: f.goodput),
)


def _rows(runs: Sequence[RunFacts], common: int | None) -> tuple[Row, ...]:
    figures = list(_FIGURES)
    if common is not None:
        label = f"loss @ step {common}"
        figures.append(("loss_at_common_step", label, "lower", lambda f: f.numbers.loss_at(common)))
    rows = []
    for key, label, better, figure in figures:
        values = tuple(figure(facts) for facts in runs)
        if key in ONLY_WHEN_RECORDED and all(v is None for v in values):
            continue
        rows.append(Row(key, label, better, values, _best(values, better)))
    return tuple(rows)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _flat(prefix: str, table: Mapping[str, Any], run_dir: str, out: dict[str, str]) -> None:
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            _flat(f"{name}.", value, run_dir, out)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            # word by word, so an argv that differs in one flag shows that flag, not two lines
            _flat(name, {f"[{i}]": v for i, v in enumerate(value)}, run_dir, out)
        elif name not in _IDENTITY:
            out[name] = _text(value).replace(run_dir, RUN_DIR_MARK)


def record_changes(runs: Sequence[RunFacts]) -> tuple[Change, ...]:
    """The record entries whose values are not the same in every run, in the first run's
    order, then the others'. Keys are dotted (``launch.env.EZPZ_TP``), a list of strings is
    compared item by item (``launch.argv[11]``), and the run's own path reads ``<run-dir>``.
    A run whose record cannot be read differs in nothing, for want of one: its value is ``?``
    (its notes say why)."""
    flats = []
    for facts in runs:
        flat: dict[str, str] = {}
        _flat("", facts.record, os.fspath(facts.path), flat)
        flats.append(flat)
    unknown = [facts.record_problem is not None for facts in runs]
    read = [flat for flat, no in zip(flats, unknown, strict=True) if not no]
    changes = []
    for key in dict.fromkeys(key for flat in read for key in flat):
        if len({flat.get(key) for flat in read}) > 1:
            values = _after_label(key, tuple(flat.get(key) for flat in flats), read)
            shown = tuple("?" if no else v for v, no in zip(values, unknown, strict=True))
            changes.append(Change(key, shown))
    return tuple(changes)


def _after_label(
    key: str, values: tuple[str | None, ...], flats: Sequence[Mapping[str, str]]
) -> tuple[str | None, ...]:
    """A bare value in a list (no ``-``, no ``=``) read after the item before it, where that
    one is the same in every run: ``-genv EZPZ_TP 2`` shows ``EZPZ_TP 2``, not a bare ``2``."""
    name, bracket, index = key.rpartition("[")
    if not bracket or not index[:-1].isdigit() or index[:-1] == "0":
        return values
    if any(v is not None and (v.startswith("-") or "=" in v) for v in values):
        return values  # says what it is already
    before = {flat.get(f"{name}[{int(index[:-1]) - 1}]") for flat in flats}
    label = before.pop() if len(before) == 1 else None
    if label is None:
        return values
    return tuple(None if v is None else f"{label} {v}" for v in values)


def compare_facts(runs: Iterable[RunFacts]) -> Comparison:
    """The comparison of runs already read (the TUI re-reads only the live ones)."""
    ranked = tuple(rank_runs(runs))
    common = _common_step(ranked)
    return Comparison(ranked, _rows(ranked, common), common, record_changes(ranked))


def compare(
    run_dirs: Iterable[str | os.PathLike[str]], peaks: PeakSettings | None = None
) -> Comparison:
    """Read and compare the runs in ``run_dirs``; never raises on what they hold. ``peaks``:
    how each run's peak is found, for MFU."""
    return compare_facts(read_facts(path, peaks) for path in run_dirs)
