"""``ezpz-tui compare``: runs side by side, fastest first, as a table a person reads at 100
columns or as JSON; and the table ``ezpz-tui sweep`` ends with."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ezpz_tui.cli.common import fail, outputs_of, run_named, say
from ezpz_tui.core.words import short_number

NEWEST = 5  # runs compared when no RUN is given and the newest run has no relatives
BEST = "*"
ARROW = "→"
WIDTH = 100
MAX_CHANGES = 20


def _runs_to_compare(args: argparse.Namespace) -> list[Path] | str:
    """The run directories the arguments name, or why not. One RUN brings its relatives."""
    from ezpz_tui.core.comparing.relatives import relatives_of
    from ezpz_tui.core.comparing.sweep_record import read_sweep
    from ezpz_tui.core.launching.runstore import RunStore
    from runtime.rundir import SWEEP_PREFIX

    if not args.run:
        runs = RunStore(outputs_of(args)).list_runs()
        if not runs:
            return f"no runs in {outputs_of(args)}"
        family = relatives_of(runs[0].path)
        if family.sweep is not None:
            say(f"ezpz-tui: comparing sweep {family.sweep}, the newest run's")
            return list(family.together())
        if family.parents:
            say(f"ezpz-tui: comparing the newest run {runs[0].run_id} with its parents")
            return list(family.together())
        say(f"ezpz-tui: comparing the {min(NEWEST, len(runs))} newest runs")
        return [r.path for r in reversed(runs[:NEWEST])]
    paths = []
    for name in args.run:
        sweep = read_sweep(outputs_of(args), name) if name.startswith(SWEEP_PREFIX) else None
        if sweep is not None:  # a sweep id: its runs
            paths += [outputs_of(args) / run_id for run_id in sweep.runs]
            continue
        found = run_named(args, name)
        if isinstance(found, str):
            return found
        paths.append(found)
    if len(args.run) == 1 and len(paths) == 1:
        return list(relatives_of(paths[0]).together())
    return list(dict.fromkeys(paths))


def cmd_compare(args: argparse.Namespace) -> int:
    from ezpz_tui.core.comparing.compare import compare

    paths = _runs_to_compare(args)
    if isinstance(paths, str):
        return fail(paths)
    comparison = compare(paths)
    if args.json:
        print(json.dumps(as_json(comparison), indent=2))
    else:
        print("\n".join(table_lines(comparison)))
    return 0


# --- JSON -------------------------------------------------------------------------------------


def _plain(value: float | None) -> float | str | None:
    """JSON that strict readers parse: non-finite numbers as the records spell them."""
    from runtime.records import to_plain

    return None if value is None else to_plain(value)


def as_json(comparison: Any) -> dict[str, Any]:
    """The comparison as plain data: runs fastest first, each with its figures and where it is
    best, then the run.toml entries that differ (by run id)."""
    from ezpz_tui.core.comparing.numbers import warmup

    runs = []
    for i, facts in enumerate(comparison.runs):
        n, state = facts.numbers, facts.state
        runs.append(
            {
                "rank": i + 1,
                "run_id": facts.run_id,
                "path": str(facts.path),
                "layout": asdict(facts.layout),
                "state": state.state,
                "exit_code": state.exit_code,
                "signal": state.signal_name,
                "partial": facts.partial,
                "parent": facts.parent,
                "steps": n.records,
                "last_step": n.last_step,
                "steady_steps": n.steady,
                "warmup_steps": n.records - n.steady,
                "figures": {row.key: _plain(row.values[i]) for row in comparison.rows},
                "best_at": list(comparison.best_at(i)),
                "step_time_from": n.step_time_from,
                "memory_metric": n.memory_metric,
                "peak_mem_gb_by_rank": {str(rank): gb for rank, gb in n.peak_mem_gb},
                "notes": list(facts.notes),
            }
        )
    ids = [facts.run_id for facts in comparison.runs]
    return {
        "ranked_by": ["tokens_per_s", "samples_per_s", "step_time_s"],
        "warmup": f"rank 0's first max(2, 10%) records, e.g. {warmup(1000)} of 1000",
        "common_step": comparison.common_step,
        "better": {row.key: row.better for row in comparison.rows},
        "runs": runs,
        "changes": [
            {"key": c.key, "values": dict(zip(ids, c.values, strict=True))}
            for c in comparison.changes
        ],
    }


# --- the table --------------------------------------------------------------------------------


def _three(value: float | None) -> str:
    """Three significant digits (seconds, GiB): ``6.3``, ``12.3``, ``143``."""
    if value is None or not math.isfinite(value) or abs(value) >= 100:
        return short_number(value)
    return f"{value:.3g}"


# header, width, row key (None: not a figure), how to show the figure
_Cell = tuple[str, int, str | None, Callable[[float | None], str]]
_COLUMNS: tuple[_Cell, ...] = (  # widths hold the best mark, or a space where there is none
    ("1ST s", 6, "first_step_s", _three),
    ("STEP ms", 8, "step_time_s", lambda v: short_number(None if v is None else v * 1e3)),
    ("SMP/s", 6, "samples_per_s", short_number),
    ("TOK/s", 6, "tokens_per_s", short_number),
    ("GiB", 6, "peak_mem_gb", _three),
    ("LOSS", 7, "final_loss", short_number),
    ("BEST", 7, "best_loss", short_number),
    ("@STEP", 7, "loss_at_common_step", short_number),
)
_LEAD = (("#", 2), ("LAYOUT", 15), ("NxP", 4), ("STATE", 9), ("STEPS", 5))


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return " ".join(
        f"{cell:<{w}}" if i < 4 else f"{cell:>{w}}"
        for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
    ).rstrip()


def _change_line(change: Any, runs: Sequence[Any]) -> str:
    """``sizes.tp: 1 → 2`` for two runs (older first), ``#1 2 · #2 1 · ...`` for more."""
    if len(runs) == 2:
        older, newer = sorted(range(2), key=lambda i: runs[i].run_id)
        text = f"{change.values[older] or '-'} {ARROW} {change.values[newer] or '-'}"
    else:
        text = " · ".join(f"#{i + 1} {v or '-'}" for i, v in enumerate(change.values))
    line = f"  {change.key}: {text}"
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"


def table_lines(comparison: Any) -> list[str]:
    """The comparison as lines of at most 100 columns: one row per run, fastest first, the
    best value of each figure marked ``*``; then the run ids, notes and what changed."""
    runs = comparison.runs
    if not runs:
        return ["no runs to compare"]
    columns = [c for c in _COLUMNS if comparison.row(c[2]) is not None]
    widths = [w for _, w in _LEAD] + [w for _, w, _, _ in columns]
    step = comparison.common_step
    heads = [h for h, _ in _LEAD] + [  # a space where the figures have their best mark
        f"@{step} " if key == "loss_at_common_step" else f"{head} " for head, _, key, _ in columns
    ]
    lines = [_line(heads, widths)]
    for i, facts in enumerate(runs):
        layout, n = facts.layout, facts.numbers
        cells = [str(i + 1), layout.label, layout.placement, str(facts.state.state)]
        cells.append(str(n.records) + ("~" if facts.partial else ""))
        for _, _, key, show in columns:
            row = comparison.row(key)
            cells.append(show(row.values[i]) + (BEST if i in row.best else " "))
        lines.append(_line(cells, widths))
    lines.append("")
    lines.append(f"{BEST} best   speed: medians past the first max(2, 10%) steps of rank 0")
    lines.append(
        f"~ still running   @{step if step is not None else '-'}: loss at the last step all reached"
    )
    for i, facts in enumerate(runs):
        parent = f"  (parent {facts.parent})" if facts.parent else ""
        lines.append(f"{i + 1:>2} {facts.run_id}{parent}")
        lines += [f"     {note}" for note in facts.notes]
    if comparison.changes:
        lines.append("run.toml differs:")
        lines += [_change_line(c, runs) for c in comparison.changes[:MAX_CHANGES]]
        more = len(comparison.changes) - MAX_CHANGES
        if more > 0:
            lines.append(f"  ... and {more} more (--json lists them all)")
    return lines
