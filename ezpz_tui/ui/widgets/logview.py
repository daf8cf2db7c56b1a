"""A rank's log, or every rank's lines interleaved: follows the end until the user scrolls up.

Lines arrive in batches from the follower and are kept as :class:`LogLine` tuples (raw text with
its ANSI escapes, plus where it sits in the file); a line becomes styled Rich text only when it is
on screen, through a cache, so a batch of thousands of lines costs a list extend. The buffer is
bounded: older lines of a rank are read back from disk when the cursor reaches the top.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual import events
from textual.cache import LRUCache
from textual.message import Message

from ezpz_tui.core.watching.followers import LAUNCHER
from ezpz_tui.core.watching.monitor import (
    NO_FILTER,
    OFFSET,
    RANK,
    TEXT,
    LineFilter,
    LogLine,
    is_error_line,
)
from ezpz_tui.core.watching.tails import printable, strip_ansi
from ezpz_tui.ui.palette import bindings_for
from ezpz_tui.ui.widgets.linelist import LineList
from ezpz_tui.ui.widgets.topology import group_palette

MAX_LINES = 100_000


def styled(text: str) -> Text:
    """Rich text from a raw log line: colours from its ANSI codes, other control bytes shown
    as ``�`` (they would move the terminal's cursor), tabs expanded."""
    return Text.from_ansi(printable(text.expandtabs()), no_wrap=True, end="")


class LogView(LineList):
    """Shows ``lines`` (one rank's, or all ranks' with a coloured rank column)."""

    BINDINGS = LineList.BINDINGS + bindings_for("log", only={"toggle_follow", "show_line"})

    @dataclass(eq=False)
    class WantOlder(Message):
        """The cursor reached the first line held and the file has earlier ones."""

        rank: int
        offset: int

    @dataclass(eq=False)
    class ShowLine(Message):
        line: LogLine

    class StatusChanged(Message):
        """Follow mode, the count of unseen lines or the filter changed: redraw the header."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.lines: list[LogLine] = []
        self.follow = True
        self.unseen = 0
        self.show_rank = False
        self.rank: int | None = None  # the rank shown, None in the all-ranks view
        self.ranks = 1
        self.filter = NO_FILTER
        self.older_pending = False
        self._cache: LRUCache[tuple[int, int], Text] = LRUCache(2048)
        self._rank_styles: list[Style] = []
        self._rank_width = 1

    # --- content ----------------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self.lines)

    def show(self, lines: Iterable[LogLine], rank: int | None, ranks: int = 1) -> None:
        """Replace the content: ``rank``'s lines, or (``rank`` None) all ranks' interleaved."""
        self.rank = rank
        self.ranks = ranks
        self.show_rank = rank is None
        self._rank_width = len(str(max(0, ranks - 1)))
        self.lines = [line for line in lines if self.filter.keeps(line)][-MAX_LINES:]
        self._cache.clear()
        self.unseen = 0
        self.follow = True
        self.older_pending = False
        self._after_change(self.lines)
        self._to_end()
        self.post_message(self.StatusChanged())

    def append(self, new: Sequence[LogLine]) -> None:
        """New lines at the end; followed, or counted as unseen while the user reads above."""
        if self.filter is not NO_FILTER:
            new = [line for line in new if self.filter.keeps(line)]
        if not new:
            return
        self.lines.extend(new)
        drop = len(self.lines) - MAX_LINES
        if drop > 0:
            del self.lines[:drop]
            self.cursor = max(0, self.cursor - drop)
            if not self.follow:
                self.scroll_to(
                    y=max(0, self.scroll_offset.y - drop), animate=False, immediate=True, force=True
                )
        self._after_change(new)
        if self.follow:
            self._to_end()
        else:
            self.unseen += len(new)
        self.post_message(self.StatusChanged())

    def prepend(self, older: Sequence[LogLine]) -> None:
        """Earlier lines read back from disk, put above without moving what the user reads."""
        self.older_pending = False
        older = [line for line in older if self.filter.keeps(line)]
        room = MAX_LINES - len(self.lines)
        older = older[-room:] if room > 0 else []
        if not older:
            return
        self.lines[:0] = older
        self._after_change(older)
        self.cursor += len(older)
        self.post_message(self.StatusChanged())
        self.scroll_to(
            y=self.scroll_offset.y + len(older), animate=False, immediate=True, force=True
        )

    def set_filter(self, line_filter: LineFilter, source: Iterable[LogLine]) -> None:
        self.filter = line_filter
        self.show(source, self.rank, self.ranks)

    def _after_change(self, new: Sequence[LogLine]) -> None:
        # Raw length bounds the cell width from above (escapes count, wide glyphs rarely
        # matter): good enough for the horizontal scroll range, and O(1) per line.
        width = max(map(len, (line[TEXT] for line in new)), default=0)
        if self.show_rank:
            width += self._rank_width + 3
        self.rows_changed(min(width, 4096))

    def _to_end(self) -> None:
        if self.lines:
            self.cursor = len(self.lines) - 1
        self._scroll_to_end()
        # Again once laid out: a longer line can bring the horizontal scrollbar, which takes a
        # row and so moves the end down by one.
        self.call_after_refresh(self._scroll_to_end)

    def _scroll_to_end(self) -> None:
        if self.follow:
            self.scroll_end(animate=False, immediate=True, x_axis=False, force=True)

    def on_resize(self) -> None:
        """A followed log keeps its last line in view when its size changes (a line above it
        appears, a sidebar steps aside)."""
        if self.follow:
            self.call_after_refresh(self._to_end)

    # --- drawing ----------------------------------------------------------------------------

    def on_mount(self) -> None:
        # The signal, not a watch of app.theme: it comes after the theme's variables are set.
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._theme_changed())
        self._theme_changed()

    def _theme_changed(self) -> None:
        palette = group_palette(self.app.theme_variables)
        self._rank_styles = [Style(color=c.rich_color, bold=True) for c in palette]
        self._cache.clear()
        self.refresh()

    def rank_style(self, rank: int) -> Style:
        styles = self._rank_styles or [Style(bold=True)]
        return styles[rank % len(styles)]

    def render_row(self, row: int) -> Text:
        line = self.lines[row]
        key = (line[RANK], line[OFFSET])
        text = self._cache.get(key)
        if text is None:
            text = styled(line[TEXT])
            if line[OFFSET] < 0:  # a marker the monitor put in: where a rank died
                text.stylize("bold reverse")
            if self.show_rank:
                rank = "L" if line[RANK] == LAUNCHER else line[RANK]  # the launcher's own lines
                prefix = Text(f"{rank:>{self._rank_width}} │ ", self.rank_style(line[RANK]))
                text = Text.assemble(prefix, text, no_wrap=True, end="")
            self._cache[key] = text
        return text.copy()

    def row_text(self, row: int) -> str:
        return strip_ansi(self.lines[row][TEXT])

    def is_heading(self, row: int) -> bool:
        return is_error_line(self.lines[row][TEXT])

    # --- follow mode ------------------------------------------------------------------------

    def move_to(self, row: int, scroll: bool = True) -> None:
        super().move_to(row, scroll)
        if self.follow and self.cursor < len(self.lines) - 1:
            self._set_follow(False)
        if self.cursor == 0 and self.lines:
            self._want_older()

    def _set_follow(self, on: bool) -> None:
        if on == self.follow:
            return
        self.follow = on
        if on:
            self.unseen = 0
            self._to_end()
        self.post_message(self.StatusChanged())

    def action_last(self) -> None:
        self._set_follow(True)
        self._to_end()

    def action_toggle_follow(self) -> None:
        self._set_follow(not self.follow)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._set_follow(False)

    def want_older_if_short(self, enough: int) -> None:
        """Ask for earlier lines at once when fewer than ``enough`` are held: a rank that was
        off screen kept only its last few, the rest are on disk."""
        if self.lines and len(self.lines) < enough:
            self._want_older()

    def _want_older(self) -> None:
        first = self.lines[0]
        if self.rank is not None and first[OFFSET] > 0 and not self.older_pending:
            self.older_pending = True
            self.post_message(self.WantOlder(self.rank, first[OFFSET]))

    def action_show_line(self) -> None:
        if self.lines:
            self.post_message(self.ShowLine(self.lines[self.cursor]))

    def status_text(self) -> Text:
        """The line above the log: what is shown, follow state, unseen lines, filter."""
        what = "all ranks" if self.rank is None else rank_name(self.rank)
        text = Text(f"{what} · {len(self.lines)} lines", "bold")
        if self.follow:
            text.append(" · following", "green")
        else:  # short: between the sidebars the line may have 45 columns
            text.append(" · paused", "yellow")
            if self.unseen:
                text.append(f" +{self.unseen} (G)", "bold yellow")
        if self.filter is not NO_FILTER:
            text.append(f" · filter {self.filter.describe()}", "italic")
        return text


def rank_name(rank: int) -> str:
    """``rank 3``, or ``launcher`` for the launcher's pseudo-rank."""
    return "launcher" if rank == LAUNCHER else f"rank {rank}"
