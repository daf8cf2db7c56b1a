"""The rank list: every rank with its live state, the first failure marked, its last line.

The launcher (its log, where Hydra, PALS and srun say why a job ended) is the first row
once its log exists: labelled ``launcher``, with the run's state as its own and its last line.
It is the pseudo-rank ``LAUNCHER`` (-1), so selecting it shows its log like a rank's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.message import Message

from ezpz_tui.core.watching.followers import LAUNCHER
from ezpz_tui.core.watching.monitor import RunMonitor
from ezpz_tui.core.watching.tails import strip_ansi
from ezpz_tui.ui.palette import bindings_for
from ezpz_tui.ui.widgets.linelist import LineList, fits
from ezpz_tui.ui.widgets.runs import STATE_STYLE as RUN_STATE_STYLE
from ezpz_tui.ui.widgets.runs import age

TYPE_TIMEOUT_S = 1.0  # digits typed within this add up to one rank number

STATE_STYLE = {
    **RUN_STATE_STYLE,
    "running": "green",
    "waiting": "dim",
    "stalled": "bold magenta",
    "idle": "dim",
    "hung": "bold magenta",
}


class RankList(LineList):
    """One row per rank, in rank order. The cursor selects the rank whose log is shown; typing a
    rank's number jumps to it; ``]``/``[`` stop at failed and stalled ranks. Rows end with the
    rank's last line, cut to the width: no sideways scrolling, a row is read at a glance."""

    DEFAULT_CSS = """
    RankList { overflow-x: hidden; }
    """

    @dataclass(eq=False)
    class Selected(Message):
        rank: int

    class Chosen(Message):
        """Enter: the user wants to read the selected rank's log."""

    BINDINGS = LineList.BINDINGS + bindings_for("ranks", only={"choose"})

    def action_choose(self) -> None:
        self.post_message(self.Chosen())

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
        self._order: list[int] = []
        self._typed = ""
        self._typed_at = 0.0
        self._host_width = 0
        self._first_failure: int | None = None
        self._first_silent: int | None = None  # of a hung job: every rank silent

    def set_monitor(self, monitor: RunMonitor | None) -> None:
        self.monitor = monitor
        self.cursor = 0
        self.update_rows()

    def update_rows(self) -> None:
        """Re-read the monitor (new ranks, states); repaints only the rows on screen."""
        ranks = self.monitor.ranks if self.monitor else {}
        launcher = self.monitor is not None and self.monitor.has_launcher
        if len(ranks) + launcher != len(self._order):
            before = self.selected
            self._order = [LAUNCHER] * launcher + sorted(ranks)
            if before is not None and before in self._order:
                # Rows above it appeared (the launcher's): the cursor stays on its rank, quietly.
                self.set_reactive(RankList.cursor, self._order.index(before))
        self._first_failure = self.monitor.first_failure if self.monitor else None
        self._first_silent = self.monitor.hung(self.clock()) if self.monitor else None
        hosts = (len(info.host.split(".")[0]) for info in ranks.values())
        self._host_width = min(16, max(hosts, default=0))
        self.rows_changed()

    @property
    def row_count(self) -> int:
        return len(self._order)

    @property
    def selected(self) -> int | None:
        return self._order[self.cursor] if self._order else None

    def state(self, row: int) -> str:
        assert self.monitor is not None
        if self._order[row] == LAUNCHER:
            return self.monitor.launcher_state()[0]
        return self.monitor.state_of(self._order[row], self.clock())

    def _launcher_row(self) -> Text:
        assert self.monitor is not None
        state, outcome = self.monitor.launcher_state()
        text = Text(" ")
        text.append("launcher ", "bold")
        text.append(f"{fits(outcome or state, 9):<9} ", STATE_STYLE.get(state, ""))
        room = self.scrollable_content_region.width - text.cell_len
        text.append(fits(strip_ansi(self.monitor.launcher.last_line), max(0, room)), "dim")
        return text

    def render_row(self, row: int) -> Text:
        assert self.monitor is not None
        if self._order[row] == LAUNCHER:
            return self._launcher_row()
        info = self.monitor.ranks[self._order[row]]
        state = self.state(row)
        first = self._first_failure == info.rank
        text = Text()
        if info.rank == self._first_silent:
            text.append("!", "bold magenta")  # a hung job: the rank that went silent first
        else:
            text.append("✗" if first else " ", "bold red")
        text.append(f"{info.rank:>5} ")
        shown = {"succeeded": "exited 0", "failed": info.outcome}.get(state, state)
        text.append(f"{fits(shown, 9):<9} ", STATE_STYLE.get(state, ""))
        if info.last_activity is not None and state in ("running", "stalled"):
            text.append(f"{age(self.clock() - info.last_activity):>4} ", "dim")
        else:
            text.append("     ")
        text.append(f"{fits(info.host.split('.')[0], 16):<{self._host_width}} ", "dim")
        room = self.scrollable_content_region.width - text.cell_len
        text.append(fits(strip_ansi(info.last_line), max(0, room)), "dim")
        return text

    def is_heading(self, row: int) -> bool:
        return self.state(row) in ("failed", "raised", "stalled")

    def watch_cursor(self, old: int, new: int) -> None:
        super().watch_cursor(old, new)
        if old != new and self._order:
            self.post_message(self.Selected(self._order[new]))

    def select_rank(self, rank: int) -> bool:
        """Put the cursor on ``rank``; False when the run has no such rank."""
        if rank not in self._order:
            return False
        row = self._order.index(rank)
        self.move_to(row, scroll=False)
        # The list grows with the rows it shows (up to a share of the tab): scroll once the
        # layout has its new height, or a row that will fit scrolls the list needlessly.
        self.call_after_refresh(self.scroll_to_row, row)
        return True

    def on_resize(self) -> None:
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
