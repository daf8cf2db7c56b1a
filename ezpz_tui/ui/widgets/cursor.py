"""The navigation keys every list shares, whatever draws its rows.

The log and the rank list (``LineList``, rows drawn on demand) and the doctor and runs lists
(``VimTable``, a DataTable) move the same way on j/k, g/G, ]/[, }/{, ctrl+d/ctrl+u and / n N;
this mixin holds what those keys do once (each list still declares ``BINDINGS = NAVIGATION``:
Textual reads bindings and CSS only from widget classes). A list says where its cursor is
(``cursor_row``), how to put it on a row (``move_to``), which rows are headings
(``is_heading``) and which match a search (``row_matches``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.widget import Widget

from ezpz_tui.ui.palette import SCREEN_NAVIGATION, bindings_for, screen_bindings_for

BLOCK = 5
"""Rows one `}` / `{` moves."""

NAVIGATION = bindings_for(
    "navigation",
    only={
        "cursor_down",
        "cursor_up",
        "first",
        "last",
        "next_heading",
        "previous_heading",
        "next_block",
        "previous_block",
        "half_page_down",
        "half_page_up",
        "next_match",
        "previous_match",
    },
) + screen_bindings_for("navigation", SCREEN_NAVIGATION)


if TYPE_CHECKING:
    _Widget = Widget
else:
    _Widget = object  # a plain mixin: Textual follows only the first widget base for CSS


class CursorKeys(_Widget):
    """What the navigation keys do in a list with a row cursor; put it before the widget base."""

    search_term = ""
    """What `/` last searched for (any case); `n` / `N` go on with it."""

    if TYPE_CHECKING:  # what the list provides; declared here for the type checker only

        @property
        def row_count(self) -> int: ...

        @property
        def cursor_row(self) -> int: ...

        def move_to(self, row: int) -> None:
            """Put the cursor on ``row`` (clamped) and scroll it into view."""

        def row_matches(self, row: int) -> bool:
            """Whether ``row`` holds the search term."""

    def is_heading(self, row: int) -> bool:
        """Rows ``]`` / ``[`` stop at."""
        return False

    def action_first(self) -> None:
        self.move_to(0)

    def action_last(self) -> None:
        self.move_to(self.row_count - 1)

    def action_next_block(self) -> None:
        self.move_to(self.cursor_row + BLOCK)

    def action_previous_block(self) -> None:
        self.move_to(self.cursor_row - BLOCK)

    def _half_page(self) -> int:
        return max(1, self.scrollable_content_region.height // 2)

    def action_half_page_down(self) -> None:
        self.move_to(self.cursor_row + self._half_page())

    def action_half_page_up(self) -> None:
        self.move_to(self.cursor_row - self._half_page())

    def find(self, step: int, match: Callable[[int], bool]) -> bool:
        """Move to the next row (``step`` 1) or previous (-1) that ``match`` accepts, wrapping;
        rings the bell and returns False when none does."""
        count = self.row_count
        for offset in range(1, count + 1):
            row = (self.cursor_row + step * offset) % count
            if match(row):
                self.move_to(row)
                return True
        self.app.bell()
        return False

    def action_next_heading(self) -> None:
        self.find(1, self.is_heading)

    def action_previous_heading(self) -> None:
        self.find(-1, self.is_heading)

    def search(self, term: str) -> None:
        """Go to the first row from the cursor on that contains ``term`` (any case)."""
        self.search_term = term
        self.refresh()
        if self.row_count and not self.row_matches(self.cursor_row):
            self.find(1, self.row_matches)

    def action_next_match(self) -> None:
        if self.row_count:
            self.find(1, self.row_matches)

    def action_previous_match(self) -> None:
        if self.row_count:
            self.find(-1, self.row_matches)
