"""``ezpz-tui compare``: runs side by side, fastest first, as a table a person reads at 100
columns or as JSON; and the table ``ezpz-tui sweep`` ends with."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ezpz_tui.cli.common import fail, outputs_of, run_named, say

NEWEST = 5  # runs compared when no RUN is given and the newest run has no relatives
WIDTH = 100
MAX_CHANGES = 20


def _runs_to_compare(args: argparse.Namespace) -> list[Path] | str:
    """The run directories the arguments name, or why not. One RUN brings its relatives."""
    from ezpz_tui.core.comparing.relatives import relatives_of
    from ezpz_tui.core.comparing.sweep_record import read_sweep
    from ezpz_tui.core.runs.store import RunStore
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


def peak_settings() -> Any:
    """``[efficiency]`` from the config (its problems on stderr), for MFU."""
    from ezpz_tui.config import load_config
    from ezpz_tui.core.watching.efficiency import PeakSettings

    settings, problems = load_config()
    for problem in problems:
        say(f"ezpz-tui: {problem}")
    return PeakSettings(settings.peak_tflops, settings.peak_dtype)


def cmd_compare(args: argparse.Namespace) -> int:
    from ezpz_tui.core.comparing.compare import compare

    paths = _runs_to_compare(args)
    if isinstance(paths, str):
        return fail(paths)
    comparison = compare(paths, peak_settings())
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
    best, then the record entries that differ (by run id)."""
    from ezpz_tui.core.comparing.compare import ranked_by
    from ezpz_tui.core.watching.numbers import warmup

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
                "efficiency": facts.efficiency.as_dict(n.tokens_per_s),
                "restart": None if facts.restart is None else facts.restart.parts(),
                "notes": list(facts.notes),
            }
        )
    ids = [facts.run_id for facts in comparison.runs]
    return {
        "ranked_by": list(ranked_by(comparison.runs)),
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


def _line(cells: Sequence[str], widths: Sequence[int]) -> str:
    return " ".join(
        f"{cell:<{w}}" if i < 4 else f"{cell:>{w}}"
        for i, (cell, w) in enumerate(zip(cells, widths, strict=True))
    ).rstrip()


def _change_line(change: Any, runs: Sequence[Any]) -> str:
    from ezpz_tui.core.comparing.columns import change_text

    line = "  " + change_text(change, [facts.run_id for facts in runs])
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"


def table_lines(comparison: Any) -> list[str]:
    """The comparison as lines of at most 100 columns: one row per run, fastest first, the
    best value of each figure marked ``*`` (a suspect MFU ``?``); then the run ids, notes and
    what changed."""
    from ezpz_tui.core.comparing.columns import (
        LEAD,
        figure_cell,
        figure_columns,
        lead_cells,
        legend,
    )
    from ezpz_tui.core.words import percent_of
    from runtime.rundir import RUN_TOML

    runs = comparison.runs
    if not runs:
        return ["no runs to compare"]
    columns = figure_columns(comparison, narrow=True)
    widths = [w for _, w in LEAD] + [c.width for c in columns]
    # figures hold their best mark, or a space where there is none, and so do their heads
    lines = [_line([h for h, _ in LEAD] + [f"{c.head} " for c in columns], widths)]
    for i in range(len(runs)):
        cells = lead_cells(comparison, i)
        for column in columns:
            text, mark = figure_cell(comparison, column, i)
            cells.append(text + (mark or " "))
        lines.append(_line(cells, widths))
    lines.append("")
    lines += legend(comparison)
    for i, facts in enumerate(runs):
        parent = f"  (parent {facts.parent})" if facts.parent else ""
        goodput = f"  goodput {percent_of(facts.goodput)}" if facts.goodput is not None else ""
        lines.append(f"{i + 1:>2} {facts.run_id}{parent}{goodput}")
        lines += [f"     {note}" for note in facts.notes]
    if comparison.changes:
        lines.append(f"{RUN_TOML} differs:")
        lines += [_change_line(c, runs) for c in comparison.changes[:MAX_CHANGES]]
        more = len(comparison.changes) - MAX_CHANGES
        if more > 0:
            lines.append(f"  ... and {more} more (--json lists them all)")
    return lines
