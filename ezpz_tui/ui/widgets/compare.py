"""The Compare tab: the opened run beside the runs it is naturally compared with (its parents,
its sweep) and the runs marked with ``c``, side by side: a column per run, fastest first, a row
per fact and figure written as ``ezpz-tui compare`` writes them
(:mod:`ezpz_tui.core.comparing.columns`), the best of each row marked. Under the table, each
run's id and notes and what differs in their record.

Runs are columns here (the CLI prints a row per run): a person compares a handful of layouts,
and a figure's row reads across them in under 90 columns.

The comparison is read in a worker by the screen (:mod:`ezpz_tui.ui.main.comparison`); this
widget only shows it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from ezpz_tui.core.comparing.columns import (
    BEST,
    change_text,
    figure_cell,
    figure_columns,
    legend,
)
from ezpz_tui.core.comparing.compare import ranked_by
from ezpz_tui.ui.widgets.runs import STATE_STYLE
from ezpz_tui.ui.widgets.table import VimTable
from runtime.rundir import RUN_TOML

if TYPE_CHECKING:
    from ezpz_tui.core.comparing.compare import Comparison

MAX_CHANGES = 40
LABEL_WIDTH = 16  # "loss @ step 1000"
RUN_WIDTH = 9
HINT = (
    "Nothing to compare yet: open a run (Enter in the runs list, or launch one). A relaunched "
    "run is compared with its parent, a sweep's run with the whole sweep; c in the runs list "
    "adds any other run."
)


class CompareView(Vertical):
    """The table of runs and, below it, what tells them apart."""

    DEFAULT_CSS = """
    CompareView #compare-title { height: 1; padding: 0 1; text-style: bold; }
    CompareView #compare-race { height: auto; padding: 0 1; display: none; }
    CompareView #compare-table { height: auto; max-height: 60%; }
    CompareView #compare-notes { height: 1fr; padding: 0 1; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.comparison: Comparison | None = None

    def compose(self) -> ComposeResult:
        yield Static(HINT, id="compare-title")
        yield Static("", id="compare-race")
        yield VimTable(id="compare-table")
        with VerticalScroll(id="compare-notes"):
            yield Static("", id="compare-details")

    def show_race(self, lines: list[str]) -> None:
        """A tune's live leaderboard above the table (layout, state and why, estimate,
        tokens/s, MFU); an empty list hides it."""
        race = self.query_one("#compare-race", Static)
        race.display = bool(lines)
        race.update(Text("\n".join(lines)))

    @property
    def table(self) -> VimTable:
        return self.query_one("#compare-table", VimTable)

    def show(self, comparison: Comparison) -> None:
        """Replace what is shown; the cursor stays on the same run where it still is."""
        table = self.table
        keep = table.cursor_row if table.row_count else None
        self.comparison = comparison
        runs = comparison.runs
        title = self.query_one("#compare-title", Static)
        table.clear(columns=True)
        if not runs:
            title.update(HINT)
            self.query_one("#compare-details", Static).update("")
            return
        by = (
            "highest MFU first"
            if ranked_by(runs) == ("mfu",)
            else "fastest first (tokens/s, then samples/s, step time)"
        )
        title.update(f"{len(runs)} runs, {by}")
        table.add_column("", width=LABEL_WIDTH)
        for i, facts in enumerate(runs):
            head = Text(f"#{i + 1}", "bold")
            table.add_column(head, width=max(RUN_WIDTH, len(str(facts.state.state)) + 1))
        for label, cells in _fact_rows(comparison):
            table.add_row(Text(label, "bold"), *cells)
        for column in figure_columns(comparison):
            row = comparison.row(column.key)
            assert row is not None  # figure_columns keeps the columns that have a row
            if all(value is None for value in row.values):
                continue  # nobody recorded it (memory, say): a row of dashes says nothing
            cells = [_figure(*figure_cell(comparison, column, i)) for i in range(len(runs))]
            table.add_row(Text(column.label, "bold"), *cells, key=column.key)
        if keep is not None and keep < table.row_count:
            table.move_to(keep)
        self.query_one("#compare-details", Static).update(self._details(comparison))

    def _details(self, comparison: Comparison) -> Text:
        text = Text("\n".join(legend(comparison)) + "\n", "dim")
        for i, facts in enumerate(comparison.runs):
            parent = f"  (parent {facts.parent})" if facts.parent else ""
            text.append(f"{i + 1:>2} {facts.run_id}{parent}\n")
            for note in facts.notes:
                text.append(f"     {note}\n", "yellow")
        changes = comparison.changes
        if changes:
            text.append(f"{RUN_TOML} differs:\n", "bold")
            ids = [facts.run_id for facts in comparison.runs]
            for change in changes[:MAX_CHANGES]:
                text.append(f"  {change_text(change, ids)}\n")
            if len(changes) > MAX_CHANGES:
                more = len(changes) - MAX_CHANGES
                text.append(f"  … and {more} more (ezpz-tui compare --json lists them all)\n")
        return text


def _fact_rows(comparison: Comparison) -> list[tuple[str, list[Text]]]:
    """What each run is: its sizes, placement, launcher, state and steps (``~``: still going)."""
    runs = comparison.runs
    rows: list[tuple[str, list[Text]]] = []
    for name in ("tp", "pp", "cp", "dp"):
        values = [getattr(facts.layout, name) for facts in runs]
        rows.append((name.upper(), [Text("?" if v is None else str(v)) for v in values]))
    rows.append(("nodes x ranks", [Text(f.layout.placement) for f in runs]))
    rows.append(("launcher", [Text(f.layout.launcher or "?") for f in runs]))
    rows.append(
        ("state", [Text(str(f.state.state), STATE_STYLE.get(str(f.state.state), "")) for f in runs])
    )
    rows.append(("steps", [Text(f"{f.numbers.records}{'~' * f.partial}") for f in runs]))
    return rows


def _figure(text: str, mark: str) -> Text:
    if mark == BEST:
        return Text(text + mark, "bold green")
    return Text(text + mark, "yellow") if mark else Text(text)
