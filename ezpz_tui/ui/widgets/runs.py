"""The runs list (this TUI's and earlier ones) and the view of one opened run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Static

from ezpz_tui.core.runstore import RunSummary, read_run_toml, read_state
from ezpz_tui.ui.widgets.table import VimTable
from runtime.capture import read_statuses

STATE_STYLE = {
    "running": "bold green",
    "pending": "cyan",
    "succeeded": "green",
    "failed": "bold red",
    "stopped": "yellow",
    "lost": "magenta",
    "unknown": "dim",
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
    """Newest first; Enter opens the highlighted run. ``]``/``[`` jump between failed runs."""

    class Open(Message):
        def __init__(self, path: Path) -> None:
            super().__init__()
            self.path = path

    def compose(self) -> ComposeResult:
        yield Static("Runs", id="runs-title")
        yield VimTable(id="runs-table")

    def on_mount(self) -> None:
        table = self.query_one(VimTable)
        table.add_column("run", key="run")
        table.add_column("state", key="state")
        table.add_column("age", key="age")
        table.is_heading = lambda row: self.runs[row].state in ("failed", "lost")
        self.runs: list[RunSummary] = []
        self.mine: set[Path] = set()

    def set_runs(self, runs: list[RunSummary], now: float, mine: set[Path]) -> None:
        """Replace the rows, keeping the cursor on the same run when it is still listed."""
        table = self.query_one(VimTable)
        keep = self.runs[table.cursor_row].path if self.runs and table.row_count else None
        self.runs, self.mine = runs, mine
        table.clear()
        for run in runs:
            # The exit code only where it says something the state does not.
            state = run.state
            if run.signal:
                state += f" {run.signal}"
            elif run.exit_code not in (None, 0, 130):
                state += f" {run.exit_code}"
            name = Text(short_id(run.run_id), "bold" if run.path in mine else "")
            table.add_row(
                name,
                Text(state, STATE_STYLE.get(run.state, "")),
                age(now - run.created),
            )
        title = f"Runs ({len(runs)}; bold = started here)"
        self.query_one("#runs-title", Static).update(title)
        paths = [r.path for r in runs]
        if keep in paths:
            table.move_cursor(row=paths.index(keep))

    def on_data_table_row_selected(self, event: VimTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self.runs):
            self.post_message(self.Open(self.runs[event.cursor_row].path))


@dataclass(frozen=True)
class RunDetails:
    """What the run view shows, read from disk by a worker."""

    path: Path
    state: dict
    plan: dict
    ranks: list[dict]
    log_tail: str


def read_run_details(path: Path, tail_bytes: int = 16384) -> RunDetails:
    """Everything the run view needs, never raising on a half-written or foreign run."""
    try:
        meta = read_run_toml(path)
    except Exception:  # a foreign or broken run.toml still opens
        meta = {}
    log = path / "logs" / "rank-00000.log"
    try:
        with log.open("rb") as fh:
            fh.seek(max(0, log.stat().st_size - tail_bytes))
            tail = fh.read().decode("utf-8", errors="replace")
    except OSError:
        tail = ""
    return RunDetails(path, read_state(path), meta, read_statuses(path), tail)


class RunView(VerticalScroll, can_focus=True):
    """One run: its plan, state, every rank's status and the end of rank 0's log.

    Live per-rank logs, the all-ranks view and metric plots come with the monitoring views;
    this is the read-only snapshot a run opens into until then, refreshed every few seconds.
    """

    # Long log lines are cut, not wrapped (Textual ignores a Rich Text's own no_wrap).
    DEFAULT_CSS = """
    RunView #run-log { text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def compose(self) -> ComposeResult:
        yield Static(
            "No run opened. Launch one (r), or pick one in the runs list and press Enter.",
            id="run-header",
        )
        yield Static("", id="run-ranks")
        yield Static("", id="run-log")

    def show(self, details: RunDetails) -> None:
        state = details.state.get("state", "unknown")
        header = Text(details.path.name, "bold")
        header.append("\nstate ")
        header.append(state, STATE_STYLE.get(state, ""))
        sizes = details.plan.get("sizes", {})
        if sizes:
            header.append("  ·  " + " ".join(f"{k}={v}" for k, v in sizes.items()))
        if details.plan.get("parent"):
            header.append(f"\nparent: {details.plan['parent']}", "dim")
        if details.state.get("reason"):
            header.append(f"\n{details.state['reason']}", "yellow")
        self.query_one("#run-header", Static).update(header)
        table = Table(box=None, padding=(0, 1), header_style="bold")
        for column in ("rank", "host", "state", "exit", "pid"):
            table.add_column(column)
        for rank in details.ranks:
            exit_text = rank.get("signal_name") or rank.get("exit_code")
            rank_state = rank.get("state", "?")
            table.add_row(
                str(rank.get("rank")),
                str(rank.get("host")),
                Text(rank_state, STATE_STYLE.get(rank_state, "")),
                "" if exit_text is None else str(exit_text),
                str(rank.get("pid")),
            )
        ranks = self.query_one("#run-ranks", Static)
        ranks.update(table if details.ranks else Text("no rank has started yet", "dim"))
        log = Text("rank 0 log (end):\n", "bold")
        # Only "\n" ends a line: a "\r" rewrite (a progress bar) keeps its last version.
        # (str.splitlines would split at "\r" too and show every rewrite.)
        lines = details.log_tail.rstrip("\n").split("\n")[-40:]
        log.append(
            Text.from_ansi("\n".join(line.rstrip("\r").rsplit("\r", 1)[-1] for line in lines))
        )
        self.query_one("#run-log", Static).update(log)
