"""One log line shown whole and wrapped: for the lines the log view shows cut."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ezpz_tui.ui.palette import bindings_for


class LineScreen(ModalScreen[None]):
    DEFAULT_CSS = """
    LineScreen { align: center middle; }
    LineScreen > VerticalScroll {
        width: 90%; height: 80%; border: thick $accent; background: $surface; padding: 0 1;
    }
    """
    BINDINGS = bindings_for("dialog", only={"close"})

    def __init__(self, title: str, text: Text) -> None:
        super().__init__()
        self._title = title
        self._text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll() as scroll:
            scroll.border_title = self._title
            scroll.border_subtitle = "esc closes"
            yield Static(self._text)

    def action_close(self) -> None:
        self.dismiss(None)
