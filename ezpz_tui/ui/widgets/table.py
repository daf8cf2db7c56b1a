"""A DataTable that speaks the navigation keys of the keymap table.

Every list in the UI (doctor checks, runs) is one of these, so j/k, g/G, zz, ]/[ (next item that
needs attention), }/{ (blocks of rows), ctrl+d/ctrl+u and / n N search behave the same
everywhere.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.widgets import DataTable

from ezpz_tui.ui.widgets.cursor import NAVIGATION, CursorKeys


class VimTable(CursorKeys, DataTable[object]):
    BINDINGS = NAVIGATION

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=False)
        # Rows that ]/[ stop at: the app says which (a failed run, a check that is not ok).
        self.is_heading: Callable[[int], bool] = lambda _row: False  # type: ignore[method-assign]

    def move_to(self, row: int) -> None:
        if self.row_count:
            self.move_cursor(row=max(0, min(row, self.row_count - 1)), scroll=True)

    def action_center(self) -> None:
        """Scroll so the cursor row sits in the middle of the view."""
        self.scroll_to(y=max(0, self.cursor_row - self.scrollable_content_region.height // 2))

    def row_matches(self, row: int) -> bool:
        cells = self.get_row_at(row)
        needle = self.search_term.lower()
        return bool(needle) and any(needle in str(cell).lower() for cell in cells)
