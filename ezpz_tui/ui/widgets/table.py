"""A DataTable that speaks the navigation keys of the keymap table.

Every list in the UI (doctor checks, runs) is one of these, so j/k, g/G, zz, ]/[ (next item that
needs attention), }/{ (blocks of rows), ctrl+d/ctrl+u and / n N search behave the same
everywhere.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.widgets import DataTable

from ezpz_tui.ui.widgets.linelist import BLOCK, NAVIGATION


class VimTable(DataTable[object]):
    BINDINGS = NAVIGATION

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=False)
        self.search_term = ""
        # Rows that ]/[ stop at: the app says which (a failed run, a check that is not ok).
        self.is_heading: Callable[[int], bool] = lambda _row: False

    def _move_to(self, row: int) -> None:
        if self.row_count:
            self.move_cursor(row=max(0, min(row, self.row_count - 1)), scroll=True)

    def action_first(self) -> None:
        self._move_to(0)

    def action_last(self) -> None:
        self._move_to(self.row_count - 1)

    def action_center(self) -> None:
        """Scroll so the cursor row sits in the middle of the view."""
        self.scroll_to(y=max(0, self.cursor_row - self.scrollable_content_region.height // 2))

    def action_next_block(self) -> None:
        self._move_to(self.cursor_row + BLOCK)

    def action_previous_block(self) -> None:
        self._move_to(self.cursor_row - BLOCK)

    def action_half_page_down(self) -> None:
        self._move_to(self.cursor_row + max(1, self.scrollable_content_region.height // 2))

    def action_half_page_up(self) -> None:
        self._move_to(self.cursor_row - max(1, self.scrollable_content_region.height // 2))

    def _find(self, step: int, match: Callable[[int], bool]) -> None:
        for offset in range(1, self.row_count + 1):
            row = (self.cursor_row + step * offset) % self.row_count
            if match(row):
                self._move_to(row)
                return
        self.app.bell()

    def action_next_heading(self) -> None:
        self._find(1, self.is_heading)

    def action_previous_heading(self) -> None:
        self._find(-1, self.is_heading)

    def _row_matches(self, row: int) -> bool:
        cells = self.get_row_at(row)
        needle = self.search_term.lower()
        return bool(needle) and any(needle in str(cell).lower() for cell in cells)

    def search(self, term: str) -> None:
        """Go to the first row from the cursor on whose text contains ``term``."""
        self.search_term = term
        if self.row_count and not self._row_matches(self.cursor_row):
            self._find(1, self._row_matches)

    def action_next_match(self) -> None:
        self._find(1, self._row_matches)

    def action_previous_match(self) -> None:
        self._find(-1, self._row_matches)
