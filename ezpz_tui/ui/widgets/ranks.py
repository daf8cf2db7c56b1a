"""The rank list: every rank with its live state, the first failure marked, its telemetry and
its last line.

The launcher (its log, where Hydra, PALS and srun say why a job ended) is the first row
once its log exists: labelled ``launcher``, with the run's state as its own and its last line.
It is the pseudo-rank ``LAUNCHER`` (-1), so selecting it shows its log like a rank's.

With ranks on more than one host, each host heads its ranks with its totals; ``C``/``E`` fold
and unfold every host, Enter on a heading folds or unfolds that one. ``s`` sorts by the next
figure (step time, CPU, RSS, accelerator utilisation and memory), highest first, so the
straggler or the rank about to run out of memory is the first row.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from rich.text import Text
from textual import events, work
from textual.message import Message

from ezpz_tui.core.watching.followers import LAUNCHER
from ezpz_tui.core.watching.monitor import RunMonitor
from ezpz_tui.core.watching.rank_rows import (
    SORTS,
    HostTotals,
    RankRows,
    Row,
    host_of,
    hosts,
    rank_rows,
)
from ezpz_tui.core.watching.tails import plain
from ezpz_tui.core.watching.telemetry import human_bytes, percent, sparkline
from ezpz_tui.ui.palette import bindings_for
from ezpz_tui.ui.widgets.linelist import LineList, fits
from ezpz_tui.ui.widgets.runs import STATE_STYLE as RUN_STATE_STYLE
from ezpz_tui.ui.widgets.runs import age

ASYNC_ROWS = 2048  # from this many ranks, batches and ticks recompute the rows in a thread
ROWS_EVERY_S = 0.5  # and then at most this often
TYPE_TIMEOUT_S = 1.0  # digits typed within this add up to one rank number
SPARK = 6  # characters of sparkline after a figure's latest value
CELL = 6  # a figure's latest value and its space: " 100%", "12.3G"

STATE_STYLE = {
    **RUN_STATE_STYLE,
    "running": "green",
    "waiting": "dim",
    "stalled": "bold magenta",
    "slow": "bold yellow",
    "idle": "dim",
    "hung": "bold magenta",
}

# The telemetry columns: heading, the sample's field, how a value reads, the sparkline's floor
# (percentages from 0, sizes relative to their own minute).
COLUMNS = (
    ("cpu", "cpu_pct", percent, 0.0),
    ("rss", "rss_bytes", human_bytes, None),
    ("util", "util_pct", percent, 0.0),
    ("mem", "mem_used_bytes", human_bytes, None),
)


class RankList(LineList):
    """One row per rank (and per host, on several). The cursor selects the rank whose log is
    shown; typing a rank's number jumps to it; ``]``/``[`` stop at failed, stalled and slow
    ranks. Rows end with the rank's last line, cut to the width: no sideways scrolling, a row is
    read at a glance."""

    DEFAULT_CSS = """
    RankList { overflow-x: hidden; }
    """

    @dataclass(eq=False)
    class Selected(Message):
        rank: int

    class Chosen(Message):
        """Enter: the user wants to read the selected rank's log."""

    @dataclass(eq=False)
    class Sorted(Message):
        """The rows' order or columns changed: the heading above the list says so, shown
        while it has more to say than "rank order"."""

        heading: Text
        worth_showing: bool

    BINDINGS = LineList.BINDINGS + bindings_for(
        "ranks", only={"choose", "cycle_sort", "collapse_all", "expand_all"}
    )

    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.clock = clock
        self.monitor: RunMonitor | None = None
        self.sort = SORTS[0]
        self.collapsed: set[str] = set()
        self._rows: list[Row] = []
        self._grouped = False
        self._totals: dict[str, HostTotals] = {}
        self._columns: tuple[int, bool] = (0, False)  # telemetry columns shown, with sparklines
        self._heading = Text()
        self._typed = ""
        self._typed_at = 0.0
        self._host_width = 0
        self._first_failure: int | None = None
        self._first_silent: int | None = None  # of a hung job: every rank silent
        self._missing: frozenset[int] = frozenset()  # never entered the collective others wait in
        self._computing = False  # rows being computed in a thread
        self._stale = False  # and the monitor changed since that computation began

    def set_monitor(self, monitor: RunMonitor | None) -> None:
        self.monitor = monitor
        self.collapsed = set()
        self._rows = []
        self.cursor = 0
        self.update_rows()

    def update_rows(self, wait: bool = True) -> None:
        """Re-read the monitor (new ranks, states, figures); repaints only the rows on screen.

        ``wait=False`` (a batch, a tick) on a run of ASYNC_ROWS ranks or more: the rows are
        computed in a thread and shown when ready, one computation at a time (updates that
        arrive meanwhile make one more). A key waits: what it does must be seen at once."""
        monitor = self.monitor
        args = (self.sort, frozenset(self.collapsed), bool(monitor and monitor.has_launcher))
        if wait or monitor is None or len(monitor.ranks) < ASYNC_ROWS:
            self._show_rows(None if monitor is None else rank_rows(monitor, *args, self.clock()))
        elif self._computing:
            self._stale = True
        else:
            self._computing = True
            self._rows_in_thread(monitor, *args)

    @work(thread=True, group="rank-rows")
    def _rows_in_thread(
        self, monitor: RunMonitor, sort: str, collapsed: frozenset[str], launcher: bool
    ) -> None:
        computed = rank_rows(monitor, sort, collapsed, launcher, self.clock())
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile
            self.app.call_from_thread(self._rows_computed, monitor, computed)

    def _rows_computed(self, monitor: RunMonitor, computed: RankRows) -> None:
        self._computing = False
        if monitor is self.monitor:
            self._show_rows(computed)
        if self._stale:  # at most one computation a ROWS_EVERY_S: each costs a core's while
            self._stale = False
            self.set_timer(ROWS_EVERY_S, partial(self.update_rows, wait=False))

    def _show_rows(self, computed: RankRows | None) -> None:
        before = self.selected_row
        rows = computed.rows if computed else []
        self._grouped = bool(computed and computed.grouped)
        self._totals = computed.totals if computed else {}
        if rows != self._rows:
            self._rows = rows
            shown = self.monitor.shown if self.monitor is not None else None
            if before is not None and before in rows:
                # Rows above it moved (a sort, the launcher's row): the cursor stays on its row.
                self.set_reactive(RankList.cursor, rows.index(before))
            elif before is None and shown in rows:
                # The first rows of a run (none were known before): the cursor on the rank whose
                # log is shown, whatever row the launcher's or a host's heading took.
                self.set_reactive(RankList.cursor, rows.index(shown))
            elif rows and self.cursor >= len(rows):
                self.set_reactive(RankList.cursor, len(rows) - 1)
        self._first_failure = computed.first_failure if computed else None
        self._first_silent = computed.first_silent if computed else None
        self._missing = computed.missing if computed else frozenset()
        self._host_width = computed.host_width if computed else 0
        self._update_heading()
        self.rows_changed()

    # --- what a row is ----------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def rows(self) -> tuple[Row, ...]:
        """What each row shows: a rank, ``LAUNCHER`` or a host's heading (its name)."""
        return tuple(self._rows)

    @property
    def selected_row(self) -> Row | None:
        return self._rows[self.cursor] if 0 <= self.cursor < len(self._rows) else None

    @property
    def selected(self) -> int | None:
        """The rank under the cursor; None on a host's heading or in an empty list."""
        row = self.selected_row
        return row if isinstance(row, int) else None

    def row_of(self, rank: int) -> int | None:
        """The row showing ``rank``; None when there is none (folded away, or no such rank)."""
        try:
            return self._rows.index(rank)
        except ValueError:
            return None

    def state(self, row: int) -> str:
        assert self.monitor is not None
        item = self._rows[row]
        if isinstance(item, str):
            return "slow" if self._totals[item].slow else "host"
        if item == LAUNCHER:
            return self.monitor.launcher_state()[0]
        return self.monitor.state_of(item, self.clock())

    # --- drawing ----------------------------------------------------------------------------

    def _prefix_width(self) -> int:
        return 1 + 6 + 10 + 5 + (self._host_width + 1 if self._host_width else 0)

    def _update_heading(self) -> None:
        """Choose the telemetry columns the width allows and say them, with the sort key."""
        monitor = self.monitor
        shown = 0
        if monitor is not None and monitor.telemetry:
            accelerated = any(
                t.latest is not None and (t.latest.util_pct or t.latest.mem_used_bytes)
                for t in monitor.telemetry.values()
            )
            shown = 4 if accelerated else 2
        room = self.scrollable_content_region.width - self._prefix_width()
        sparks = room >= shown * (CELL + SPARK) + 12
        if not sparks and room < shown * CELL + 8:
            shown = 0
        self._columns = (shown, sparks)
        heading = Text(" " * (self._prefix_width() - 1) if shown else " ", "dim")
        for title, *_ in COLUMNS[:shown]:
            heading.append(f"{title:>{CELL - 1}} " + " " * (SPARK if sparks else 0), "bold dim")
        order = "rank order" if self.sort == "rank" else f"sorted by {self.sort} ▼"
        heading.append(f" {order}", "dim")
        if self._grouped:
            heading.append("  C fold  E unfold", "dim")
        if heading.plain != self._heading.plain:
            self._heading = heading
            worth = bool(shown) or self.sort != "rank" or self._grouped
            self.post_message(self.Sorted(heading, worth))

    def _figures(self, text: Text, rank: int) -> None:
        assert self.monitor is not None
        shown, sparks = self._columns
        telemetry = self.monitor.telemetry.get(rank)
        latest = telemetry.latest if telemetry else None
        for _title, field, shows, floor in COLUMNS[:shown]:
            value = getattr(latest, field) if latest else None
            text.append(f"{shows(value):>{CELL - 1}} ")
            if sparks:
                series = telemetry.series(field) if telemetry else []
                text.append(f"{sparkline(series, SPARK - 1, floor):<{SPARK - 1}} ", "cyan")

    def _host_row(self, host: str) -> Text:
        totals = self._totals[host]
        text = Text(" ")
        text.append("▸ " if host in self.collapsed else "▾ ", "bold")
        text.append(f"{fits(host, 16)} ", "bold")
        text.append(f"{totals.ranks} ranks", "dim")
        if totals.slow:
            text.append(f"  {totals.slow} slow", STATE_STYLE["slow"])
        figures = (
            ("cpu", percent(totals.cpu_pct), totals.cpu_pct),
            ("rss", human_bytes(totals.rss_bytes), totals.rss_bytes),
            ("util", percent(totals.util_pct), totals.util_pct),
            ("mem", human_bytes(totals.mem_used_bytes), totals.mem_used_bytes),
        )
        for title, shown, value in figures:
            if value is not None:
                text.append(f"  {title} {shown}", "dim")
        return text

    def _launcher_row(self) -> Text:
        assert self.monitor is not None
        state, outcome = self.monitor.launcher_state()
        text = Text(" ")
        text.append("launcher ", "bold")
        text.append(f"{fits(outcome or state, 9):<9} ", STATE_STYLE.get(state, ""))
        room = self.scrollable_content_region.width - text.cell_len
        text.append(fits(plain(self.monitor.launcher.last_line), max(0, room)), "dim")
        return text

    def render_row(self, row: int) -> Text:
        assert self.monitor is not None
        item = self._rows[row]
        if isinstance(item, str):
            return self._host_row(item)
        if item == LAUNCHER:
            return self._launcher_row()
        info = self.monitor.ranks[item]
        state = self.state(row)
        first = self._first_failure == info.rank
        text = Text()
        if info.rank in self._missing:
            text.append("?", "bold magenta")  # never entered the collective the others wait in
        elif info.rank == self._first_silent:
            text.append("!", "bold magenta")  # a hung job: the rank that went silent first
        else:
            text.append("✗" if first else " ", "bold red")
        text.append(f"{info.rank:>5} ")
        # A rank without a status file (ezpz's) has no exit code: its history says finished.
        ended = "exited 0" if info.status == "succeeded" else "finished"
        shown = {"succeeded": ended, "failed": info.outcome}.get(state, state)
        text.append(f"{fits(shown, 9):<9} ", STATE_STYLE.get(state, ""))
        if info.last_activity is not None and state in ("running", "stalled", "slow"):
            text.append(f"{age(self.clock() - info.last_activity):>4} ", "dim")
        elif self._slow_at_end(info.rank):
            text.append("slow ", STATE_STYLE["slow"])  # where a live rank's age would be
        else:
            text.append("     ")
        if self._host_width:
            text.append(f"{fits(info.host.split('.')[0], 16):<{self._host_width}} ", "dim")
        self._figures(text, info.rank)
        room = self.scrollable_content_region.width - text.cell_len
        text.append(fits(plain(info.last_line), max(0, room)), "dim")
        return text

    def _slow_at_end(self, rank: int) -> bool:
        """Whether ``rank`` of an ended run was a straggler when it ended (its state says how
        it ended, so the verdict goes beside it)."""
        assert self.monitor is not None
        run = self.monitor.run_state
        return run is not None and not run.live and rank in self.monitor.slow_ranks

    def is_heading(self, row: int) -> bool:
        return self.state(row) in ("failed", "raised", "stalled", "slow")

    # --- keys -------------------------------------------------------------------------------

    def watch_cursor(self, old: int, new: int) -> None:
        super().watch_cursor(old, new)
        rank = self.selected
        if old != new and rank is not None:
            self.post_message(self.Selected(rank))

    def action_choose(self) -> None:
        """Enter: a rank's log, or fold/unfold the host under the cursor."""
        row = self.selected_row
        if isinstance(row, str):
            self.collapsed ^= {row}
            self.update_rows()
        elif row is not None:
            self.post_message(self.Chosen())

    def action_cycle_sort(self) -> None:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.update_rows()
        self.move_to(0 if self.monitor is None or not self.monitor.has_launcher else 1)

    def _host_under_cursor(self) -> str | None:
        row = self.selected_row
        if isinstance(row, str):
            return row
        if row is None or row == LAUNCHER or self.monitor is None:
            return None
        return host_of(self.monitor, row)

    def action_collapse_all(self) -> None:
        """Fold every host; the cursor stays on the host it was in."""
        if self.monitor is not None and self._grouped:
            host = self._host_under_cursor()
            self.collapsed = set(hosts(self.monitor))
            self.update_rows()
            if host is not None and host in self._rows:
                self.move_to(self._rows.index(host))

    def action_expand_all(self) -> None:
        if self.collapsed:
            rank = self.selected
            self.collapsed = set()
            self.update_rows()
            if rank is not None:
                self.select_rank(rank)

    def select_rank(self, rank: int) -> bool:
        """Put the cursor on ``rank`` (unfolding its host); False when the run has no such
        rank."""
        if self.monitor is None or (rank not in self.monitor.ranks and rank != LAUNCHER):
            return False
        if self.row_of(rank) is None and rank != LAUNCHER:
            self.collapsed.discard(host_of(self.monitor, rank))
            self.update_rows()
        row = self.row_of(rank)
        if row is None:
            return False
        self.move_to(row, scroll=False)
        # The list grows with the rows it shows (up to a share of the tab): scroll once the
        # layout has its new height, or a row that will fit scrolls the list needlessly.
        self.call_after_refresh(self.scroll_to_row, row)
        return True

    def on_resize(self) -> None:
        self._update_heading()
        self.refresh()

    def on_key(self, event: events.Key) -> None:
        """Digits pick a rank by number (the keymap's ``type_rank``): ``1`` ``2`` goes to 12."""
        if event.character is None or not event.character.isdigit():
            return
        event.stop()
        now = time.monotonic()
        if now - self._typed_at > TYPE_TIMEOUT_S:
            self._typed = ""
        self._typed, self._typed_at = self._typed + event.character, now
        if not self.select_rank(int(self._typed)):
            self._typed = event.character
            if not self.select_rank(int(self._typed)):
                self.app.bell()
