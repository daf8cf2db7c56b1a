"""A cursor over rows that renders only the rows on screen: the base of the rank list and logs.

DataTable keeps per-cell state and re-measures on every update, which costs too much when 256
ranks change several times a second or a log grows by thousands of lines per batch. Here a row is
drawn from the model only when it is visible (``render_row``), so an update costs the rows on
screen, whatever the length. The navigation keys of the keymap table (j/k, g/G, zz, ]/[, }/{,
ctrl+d/ctrl+u, / n N) act the same as in every other list.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.text import Text
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ezpz_tui.ui.widgets.cursor import NAVIGATION, CursorKeys


class LineList(CursorKeys, ScrollView, can_focus=True):
    """Rows ``0..row_count-1`` with a cursor; subclasses say what a row looks like."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"line-list--cursor", "line-list--match"}
    DEFAULT_CSS = """
    LineList { background: $surface; }
    LineList > .line-list--cursor { background: $primary 35%; }
    LineList:focus > .line-list--cursor { background: $primary 60%; }
    LineList > .line-list--match { background: $warning 45%; }
    """
    BINDINGS = NAVIGATION
    cursor: reactive[int] = reactive(0, always_update=True, repaint=False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._width = 0

    # --- what subclasses provide ------------------------------------------------------------

    @property
    def row_count(self) -> int:
        raise NotImplementedError

    def render_row(self, row: int) -> Text:
        """The text of ``row`` (not cropped: the list scrolls sideways)."""
        raise NotImplementedError

    def row_text(self, row: int) -> str:
        """The plain text searches look in."""
        return self.render_row(row).plain

    # --- size and drawing --------------------------------------------------------------------

    def rows_changed(self, width: int | None = None) -> None:
        """Call after the rows changed: resizes the scroll area and repaints what is shown.

        A new scroll area that keeps the scrollbars as they are needs no layout: the list's
        own size does not follow its rows. Setting ``virtual_size`` would lay out the whole
        screen (Textual's reactive says so, for the scrollbars' sake): most of a key's time
        when it shows a rank whose log holds another number of lines, and after each read of
        earlier lines."""
        if width is not None:
            self._width = max(self._width, width)
        size = Size(self._width, self.row_count)
        if self.container_size and self._bars(size) == self._bars(self.virtual_size):
            self.set_reactive(LineList.virtual_size, size)
            self._scroll_update(size)
        else:
            self.virtual_size = size
        self.refresh()

    def _bars(self, size: Size) -> tuple[bool, ...]:
        """What Textual decides the scrollbars from (``Widget._refresh_scrollbars``): the
        scroll area against the room, with and without the other bar's."""
        width, height = self.container_size
        styles = self.styles
        return (
            size.width > width,
            size.width > width - styles.scrollbar_size_vertical,
            size.height > height,
            size.height > height - styles.scrollbar_size_horizontal,
        )

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if row >= self.row_count:
            return Strip.blank(width, base)
        text = self.render_row(row)
        if self.search_term and self.row_matches(row):
            match = self.get_component_rich_style("line-list--match", partial=True)
            text.highlight_words([self.search_term], match, case_sensitive=False)
        if row == self.cursor:
            text.stylize(self.get_component_rich_style("line-list--cursor", partial=True))
            text.pad_right(max(0, scroll_x + width - text.cell_len))
        segments = list(text.render(self.app.console))
        strip = Strip([Segment(s.text, base + s.style if s.style else base) for s in segments])
        return strip.crop_extend(scroll_x, scroll_x + width, base).apply_offsets(scroll_x, row)

    def watch_cursor(self, old: int, new: int) -> None:
        self._refresh_row(old)
        self._refresh_row(new)

    def _refresh_row(self, row: int) -> None:
        y = row - self.scroll_offset.y
        if 0 <= y < self.size.height:
            self.refresh_line(y)

    # --- moving -----------------------------------------------------------------------------

    @property
    def cursor_row(self) -> int:
        return self.cursor

    def move_to(self, row: int, scroll: bool = True) -> None:
        if not self.row_count:
            return
        self.cursor = max(0, min(row, self.row_count - 1))
        if scroll:
            self.scroll_to_row(self.cursor)

    def scroll_to_row(self, row: int) -> None:
        """Scroll just enough to show ``row``."""
        height = self.scrollable_content_region.height
        top = self.scroll_offset.y
        if row < top:
            self.scroll_to(y=row, animate=False, immediate=True, force=True)
        elif row >= top + height:
            self.scroll_to(y=row - height + 1, animate=False, immediate=True, force=True)

    def action_cursor_down(self) -> None:
        self.move_to(self.cursor + 1)

    def action_cursor_up(self) -> None:
        self.move_to(self.cursor - 1)

    def action_center(self) -> None:
        height = self.scrollable_content_region.height
        self.scroll_to(y=max(0, self.cursor - height // 2), animate=False, force=True)

    def row_matches(self, row: int) -> bool:
        return bool(self.search_term) and self.search_term.lower() in self.row_text(row).lower()


def fits(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells with an ellipsis: for fixed-width columns."""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
