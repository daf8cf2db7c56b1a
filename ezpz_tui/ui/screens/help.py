"""The `?` screen: every key binding, generated from the keymap in force and grouped by scope.

Because it is generated from the same table as the footer and the docs, a user override shows
up here as soon as it is loaded. `esc` (or `?` again) closes it; the navigation keys scroll it.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from ezpz_tui.keymap.keys import key_label
from ezpz_tui.keymap.table import DEFAULT_KEYMAP, Keymap, grouped
from ezpz_tui.ui.palette import bindings_for

_SCROLL_ACTIONS = {"cursor_down", "cursor_up", "first", "last", "half_page_down", "half_page_up"}
"""The navigation actions the help screen honours: they scroll the list of bindings."""


def help_text(keymap: Keymap) -> Content:
    """The bindings as aligned text: a heading per scope, then `keys  description` lines."""
    width = max(len(b.label) for b in keymap) + 2
    parts: list[str | tuple[str, str]] = []
    for number, (title, bindings) in enumerate(grouped(keymap)):
        parts.append((("\n" if number else "") + title + "\n", "bold $accent"))
        for b in bindings:
            parts.append((f"  {b.label:<{width}}", "bold $primary"))
            parts.append(f"{b.description}\n")
    return Content.assemble(*parts).rstrip()


class HelpScreen(ModalScreen[None]):
    """Lists the key bindings of `keymap` (the one in force, overrides included)."""

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > Vertical {
        width: 76;
        max-width: 100%;
        height: 100%;
        max-height: 44;
        border: round $primary;
        border-title-style: bold;
        border-subtitle-color: $text-muted;
        background: $surface;
    }
    HelpScreen VerticalScroll {
        padding: 0 1;
        scrollbar-size-vertical: 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        *bindings_for("dialog", only={"close"}),
        *bindings_for("global", only={"show_help"}),
        *bindings_for("navigation", only=_SCROLL_ACTIONS),
    ]

    def __init__(self, keymap: Keymap = DEFAULT_KEYMAP) -> None:
        super().__init__()
        self._keymap = keymap

    def compose(self) -> ComposeResult:
        box = Vertical()
        box.border_title = "Key bindings"
        close, down, up = (
            key_label(self._keymap[a].keys[0]) for a in ("close", "cursor_down", "cursor_up")
        )
        box.border_subtitle = f"{close} close · {down}/{up} scroll"
        with box, VerticalScroll(can_focus=False):
            yield Static(help_text(self._keymap), id="bindings")

    @property
    def _scroller(self) -> VerticalScroll:
        return self.query_one(VerticalScroll)

    def action_close(self) -> None:
        """Back to where `?` was pressed."""
        self.dismiss()

    def action_show_help(self) -> None:
        """`?` toggles: pressed again, it closes the help."""
        self.dismiss()

    def action_cursor_down(self) -> None:
        """Scroll one line down."""
        self._scroller.scroll_down(animate=False)

    def action_cursor_up(self) -> None:
        """Scroll one line up."""
        self._scroller.scroll_up(animate=False)

    def action_first(self) -> None:
        """Scroll to the top."""
        self._scroller.scroll_home(animate=False)

    def action_last(self) -> None:
        """Scroll to the bottom."""
        self._scroller.scroll_end(animate=False)

    def action_half_page_down(self) -> None:
        """Scroll half a page down."""
        self._scroller.scroll_relative(y=self._scroller.size.height // 2, animate=False)

    def action_half_page_up(self) -> None:
        """Scroll half a page up."""
        self._scroller.scroll_relative(y=-(self._scroller.size.height // 2), animate=False)
