"""The runs list: this TUI's runs and earlier ones; Enter opens one, ``c`` overlays its metrics.

The list reads the outputs directory in a worker (:meth:`RunsPanel.list_runs`) and reports what
it found with :class:`RunsPanel.Listed`; the screen, which knows which runs this process started,
shows it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widgets import Static

from ezpz_tui.ui.palette import bindings_for
from ezpz_tui.ui.widgets.steady import SteadyStatic
from ezpz_tui.ui.widgets.table import VimTable

if TYPE_CHECKING:  # the list is on the first frame; the run store loads with the first listing
    from ezpz_tui.core.runs.outputs_watch import OutputsWatch
    from ezpz_tui.core.runs.store import RunStore, RunSummary
    from runtime.rundir import RunState

COLUMNS = ("run", "state", "age")
STATE_STYLE = {
    "running": "bold green",
    "pending": "cyan",
    "succeeded": "green",
    "failed": "bold red",
    "stopped": "yellow",
    "killed": "red",
    "raised": "bold red",
    "lost": "magenta",
    "unknown": "dim",
    "queued": "blue",
}


def age(seconds: float) -> str:
    """Compact age for a narrow column: 45s, 12m, 3h, 2d."""
    seconds = max(0.0, seconds)
    for limit, unit, div in ((120, "s", 1), (7200, "m", 60), (172800, "h", 3600)):
        if seconds < limit:
            return f"{int(seconds // div)}{unit}"
    return f"{int(seconds // 86400)}d"


def short_id(run_id: str) -> str:
    """``20261122-103105-123-tp2pp1cp1`` -> ``1122-103105-tp2pp1cp1``: the sidebar is narrow and
    the year and milliseconds rarely tell runs apart; the run view shows the whole id."""
    parts = run_id.split("-")
    if len(parts) >= 4 and parts[0].isdigit() and len(parts[0]) == 8:
        return "-".join([parts[0][4:], parts[1], *parts[3:]])
    return run_id


class RunsPanel(Vertical):
    """Newest first, with the batch jobs ``submit`` queued that have no run yet; Enter opens
    the highlighted run. ``]``/``[`` jump between failed runs; ``c`` overlays (or removes) the
    highlighted run's metrics on the plots; ``b`` submits its plan as a batch job."""

    BINDINGS = bindings_for("runs")
    _kept_details: tuple[Path, tuple[int, int, int] | None, RunDetails] | None = None
    _watch: OutputsWatch | None = None  # the listing worker's
    _posted_details: RunDetails | None = None

    @dataclass(eq=False)
    class Open(Message):
        path: Path

    @dataclass(eq=False)
    class Compare(Message):
        path: Path

    @dataclass(eq=False)
    class SubmitAsked(Message):
        path: Path

    @dataclass(eq=False)
    class Listed(Message):
        """The run directories on disk, and the header facts of the run asked about."""

        runs: list[RunSummary]
        details: RunDetails | None

    def list_runs(self, store: RunStore, details_of: Path | None, whole: bool = True) -> None:
        """Read ``store`` again, and the state and plan of the run in ``details_of``; not
        ``whole``: only what can have changed (:class:`OutputsWatch`), and nothing is posted
        when nothing did."""
        self._list(store, details_of, whole)

    @work(thread=True, exclusive=True, group="runs")
    def _list(self, store: RunStore, details_of: Path | None, whole: bool) -> None:
        from ezpz_tui.core.runs.outputs_watch import OutputsWatch

        if self._watch is None or self._watch.store is not store:
            self._watch = OutputsWatch(store)
        runs = self._watch.look(whole)
        details = self._details(details_of) if details_of else None
        if runs is None and details == self._posted_details:
            return
        self._posted_details = details
        self.post_message(self.Listed(self._watch.runs, details))

    def _details(self, path: Path) -> RunDetails:
        """The header facts of ``path``, read again only while its run may still change: an
        ended run's are kept until its state.json is written again (the list refreshes every
        2 s; on a shared filesystem each read is a metadata round trip)."""
        from ezpz_tui.core.runs.store import state_signature
        from runtime.rundir import FINAL

        sig = state_signature(path)
        kept = self._kept_details
        if kept is not None and sig is not None and kept[:2] == (path, sig):
            return kept[2]
        details = read_run_details(path)
        ended = sig is not None and details.state.state in FINAL
        self._kept_details = (path, sig, details) if ended else None
        return details

    def compose(self) -> ComposeResult:
        yield SteadyStatic("Runs", id="runs-title")
        yield VimTable(id="runs-table")

    def on_mount(self) -> None:
        table = self.query_one(VimTable)
        # Widths set from the rows (set_runs), not measured by the table when it is next idle:
        # a measure can be missed (the columns then stay as wide as their labels, "112 stopp",
        # until the rows change).
        self._columns = [table.add_column(label, width=len(label)) for label in COLUMNS]
        table.is_heading = lambda row: self.runs[row].state in ("failed", "lost")
        self.runs: list[RunSummary] = []
        self.mine: set[Path] = set()
        self.compared: set[Path] = set()
        self._now = 0.0
        self._shown: list[tuple[str, str, str]] | None = None  # the rows as the table shows them

    def set_runs(self, runs: list[RunSummary], now: float, mine: set[Path]) -> None:
        """Replace the rows, keeping the cursor on the same run when it is still listed; rows
        that read as they do already are left alone (the list is read every 2 s)."""
        table = self.query_one(VimTable)
        keep = self.runs[table.cursor_row].path if self.runs and table.row_count else None
        self.runs, self.mine, self._now = runs, mine, now
        rows = [self._row(run, now, mine) for run in runs]
        # As marked up: rich's Text compares its letters, not its style.
        shown = [(name.markup, state.markup, when) for name, state, when in rows]
        if shown == self._shown or self._ages_only(shown):
            return
        self._shown = shown
        table.clear()
        for at, key in enumerate(self._columns):
            cells = [Text(row[at]) if isinstance(row[at], str) else row[at] for row in rows]
            table.columns[key].width = max([len(COLUMNS[at]), *(c.cell_len for c in cells)])
        for row in rows:
            table.add_row(*row)
        self.query_one("#runs-title", Static).update(self._title())
        paths = [r.path for r in runs]
        if keep in paths:
            table.move_cursor(row=paths.index(keep))

    def _ages_only(self, shown: list[tuple[str, str, str]]) -> bool:
        """Where only ages changed, each still within its column: those cells alone are
        rewritten, and True (a run's age changes every second in its first two minutes; the
        rows rebuilt each time cost more than the rest of an idle second)."""
        before, table = self._shown, self.query_one(VimTable)
        if before is None or len(before) != len(shown):
            return False
        if any(old[:2] != new[:2] for old, new in zip(before, shown, strict=True)):
            return False
        if any(len(when) > table.columns[self._columns[2]].width for *_, when in shown):
            return False
        for at, (old, new) in enumerate(zip(before, shown, strict=True)):
            if old[2] != new[2]:
                table.update_cell_at(Coordinate(at, 2), new[2])
        self._shown = shown
        return True

    def tick(self, now: float) -> None:
        """The ages as of ``now``: the rows are redrawn when one of them reads differently
        (each second in a run's first two minutes, each minute until two hours)."""
        if self.runs:
            self.set_runs(self.runs, now, self.mine)

    def _row(self, run: RunSummary, now: float, mine: set[Path]) -> tuple[Text, Text, str]:
        # The exit code only where it says something the state does not.
        state = run.state
        if run.signal:
            state += f" {run.signal}"
        elif run.exit_code not in (None, 0, 130):
            state += f" {run.exit_code}"
        name = Text(short_id(run.run_id), "bold" if run.path in mine else "")
        if run.path in self.compared:
            name = Text("+", "bold") + name
        return name, Text(state, STATE_STYLE.get(run.state, "")), age(now - run.created)

    def on_data_table_row_selected(self, event: VimTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self.runs):
            run = self.runs[event.cursor_row]
            if run.queued:  # a batch job: nothing to open until its run directory appears
                self.app.notify(run.reason or "", title=f"{run.run_id}: {run.state}")
                return
            self.post_message(self.Open(run.path))

    def mark_compared(self, compared: set[Path]) -> None:
        """Show which runs are overlaid on the plots (a ``+`` in the title count)."""
        self.compared = compared
        self.set_runs(self.runs, self._now, self.mine)

    def _title(self) -> str:
        extra = f"; {len(self.compared)} overlaid" if self.compared else ""
        return f"Runs ({len(self.runs)}; bold = started here{extra})"

    def action_compare_run(self) -> None:
        row = self.query_one(VimTable).cursor_row
        if 0 <= row < len(self.runs) and not self.runs[row].queued:
            self.post_message(self.Compare(self.runs[row].path))

    def action_submit_batch(self) -> None:
        from runtime.rundir import FINAL

        row = self.query_one(VimTable).cursor_row
        if not 0 <= row < len(self.runs):
            return
        run = self.runs[row]
        if run.queued or run.state not in FINAL:
            self.app.notify(
                f"{run.run_id} is {run.state}: submit the plan of a run that has finished",
                severity="warning",
            )
            return
        self.post_message(self.SubmitAsked(run.path))


@dataclass(frozen=True)
class RunDetails:
    """The run header's facts, read from disk by a worker."""

    path: Path
    state: RunState
    plan: dict
    trackers: str | None = None  # which trackers it feeds and where, in one line
    stage: str | None = None  # where its environment was staged and how long that took
    problem: str | None = None  # why its run.toml cannot be read, when it cannot
    restart: str | None = None  # a relaunch's child: what its restart cost, by part


def read_run_details(path: Path) -> RunDetails:
    """State and plan of a run, never raising on a half-written or foreign run."""
    from ezpz_tui.core.runs.liveness import run_state
    from ezpz_tui.core.runs.record import read_record
    from ezpz_tui.core.runs.restart import restart_line
    from ezpz_tui.core.runs.staged import stage_line
    from ezpz_tui.core.watching.tracked import tracker_line

    meta, problem = read_record(path)  # a foreign or broken record still opens
    state = run_state(path)
    restart = restart_line(path, meta)
    return RunDetails(path, state, meta, tracker_line(path), stage_line(path), problem, restart)
