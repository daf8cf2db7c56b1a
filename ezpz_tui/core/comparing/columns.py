"""How a comparison is written in a table: one row per run, fastest first, a column per figure,
each figure in a few characters and the best of each column marked.

``ezpz-tui compare`` prints this table and the TUI's Compare tab shows it, so the two read the
same: the same heads, the same rounding, the same mark.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, replace

from ezpz_tui.core.comparing.compare import Change, Comparison
from ezpz_tui.core.words import percent_of, short_number

BEST = "*"
SUSPECT = "?"
"""In the mark's place after an MFU the legend calls suspect (above 100% or below 0.5%: more
likely a wrong figure than a true one, so never marked best)."""
LEGEND_WIDTH = 100  # the CLI's lines
LEAD = (("#", 2), ("LAYOUT", 15), ("NxP", 4), ("STATE", 9), ("STEPS", 5))
"""The columns that say which run a row is: its place, sizes, placement, state, steps."""


def three(value: float | None) -> str:
    """Three significant digits (seconds, GiB): ``6.3``, ``12.3``, ``143``."""
    if value is None or not math.isfinite(value) or abs(value) >= 100:
        return short_number(value)
    return f"{value:.3g}"


def milli(seconds: float | None) -> str:
    """Seconds as milliseconds: a step of the demo takes tens of them."""
    return short_number(None if seconds is None else seconds * 1e3)


@dataclass(frozen=True)
class Column:
    """One figure's column: its head and width in a table of runs, its label where runs are
    columns (the TUI), the comparison row it shows and how."""

    head: str
    width: int
    label: str
    key: str
    show: Callable[[float | None], str]


FIGURES: tuple[Column, ...] = (  # widths hold the figure and its best mark
    Column("STG s", 6, "stage s", "stage_s", three),
    Column("1ST s", 6, "first step s", "first_step_s", three),
    Column("RST s", 6, "restart s", "restart_s", three),
    Column("STEP ms", 8, "step ms", "step_time_s", milli),
    Column("SMP/s", 6, "samples/s", "samples_per_s", short_number),
    Column("TOK/s", 6, "tokens/s", "tokens_per_s", short_number),
    Column("TFLOPS", 7, "TFLOPS/device", "tflops", three),
    Column("MFU", 6, "MFU", "mfu", percent_of),
    Column("GiB", 6, "peak GiB", "peak_mem_gb", three),
    Column("LOSS", 7, "final loss", "final_loss", short_number),
    Column("BEST", 7, "best loss", "best_loss", short_number),
    Column("@STEP", 7, "loss @ step", "loss_at_common_step", short_number),
    Column("GOOD", 6, "goodput", "goodput", percent_of),
)


EFFICIENCY = frozenset({"tflops", "mfu"})
"""The columns shown only when a run has the figure (a script that records no FLOPs per token
has neither)."""


def figure_columns(comparison: Comparison, narrow: bool = False) -> list[Column]:
    """The figure columns this comparison has rows for, the loss column named by its step.

    ``narrow`` (the CLI's 100 columns): TFLOPS is left to ``--json``, goodput to the line of
    each run below the table, and where the MFU column shows, so is the time to the first
    step."""
    step = comparison.common_step
    columns = []
    for c in FIGURES:
        row = comparison.row(c.key)
        if row is None or (c.key in EFFICIENCY and all(v is None for v in row.values)):
            continue
        if c.key == "loss_at_common_step":
            c = replace(c, head=f"@{step}", label=f"loss @ step {step}")
        columns.append(c)
    if narrow:
        mfu = any(c.key == "mfu" for c in columns)
        drop = {"tflops", "goodput"} | ({"first_step_s", "stage_s"} if mfu else set())
        columns = [c for c in columns if c.key not in drop]
    return columns


def lead_cells(comparison: Comparison, index: int) -> list[str]:
    """Which run row ``index`` is: ``~`` after the steps of a run still going."""
    facts = comparison.runs[index]
    layout, steps = facts.layout, str(facts.numbers.records) + ("~" if facts.partial else "")
    return [str(index + 1), layout.label, layout.placement, str(facts.state.state), steps]


def figure_cell(comparison: Comparison, column: Column, index: int) -> tuple[str, str]:
    """Run ``index``'s figure in ``column`` as text, and its mark: :data:`BEST` for the
    column's best, :data:`SUSPECT` for an MFU the legend calls suspect, else none."""
    row = comparison.row(column.key)
    if row is None:
        return "-", ""
    if column.key == "mfu" and _suspect(comparison, index):
        return column.show(row.values[index]), SUSPECT
    return column.show(row.values[index]), BEST if index in row.best else ""


def _suspect(comparison: Comparison, index: int) -> str | None:
    facts = comparison.runs[index]
    return facts.efficiency.suspect(facts.numbers.tokens_per_s)


def legend(comparison: Comparison) -> list[str]:
    """What the marks and the loss column mean, and the peak each MFU divides by."""
    step = comparison.common_step
    lines = [
        f"{BEST} best   speed: medians past the first max(2, 10%) steps of rank 0",
        f"~ still running   @{step if step is not None else '-'}: loss at the last step all "
        "reached",
    ]
    peaks = {
        i: facts.efficiency.peak.label if facts.efficiency.peak else facts.efficiency.why_not
        for i, facts in enumerate(comparison.runs)
        if facts.efficiency.flops_per_token
    }
    if peaks:
        lines.append("MFU: model FLOPs per token x tokens/s / (ranks x one device's peak)")
        if len(set(peaks.values())) == 1 and len(peaks) == len(comparison.runs):
            lines.append(f"  peak of every run: {next(iter(peaks.values()))}")
        else:
            lines += [f"  peak of #{i + 1}: {said}" for i, said in peaks.items()]
    for i in range(len(comparison.runs)):
        why = _suspect(comparison, i)
        if why:
            said = f"  {SUSPECT} MFU of #{i + 1} {why}"
            lines += textwrap.wrap(said, LEGEND_WIDTH, subsequent_indent="    ")
    return lines


def change_text(change: Change, ids: list[str]) -> str:
    """``sizes.tp: 1 → 2`` for two runs (older first), ``#1 2 · #2 1 · ...`` for more."""
    values = change.values
    if len(ids) == 2:
        older, newer = sorted(range(2), key=lambda i: ids[i])
        return f"{change.key}: {values[older] or '-'} → {values[newer] or '-'}"
    return f"{change.key}: " + " · ".join(f"#{i + 1} {v or '-'}" for i, v in enumerate(values))
