"""The `/` prompt: one line at the bottom, Enter searches, Esc cancels."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import ModalScreen
from textual.widgets import Input

from ezpz_tui.ui.palette import bindings_for


class SearchScreen(ModalScreen[str | None]):
    DEFAULT_CSS = """
    SearchScreen { align: left bottom; background: $background 0%; }
    SearchScreen > Input { width: 100%; border: tall $accent; }
    """
    BINDINGS = bindings_for("dialog", only={"close"})

    def compose(self) -> ComposeResult:
        yield Input(placeholder="search (Enter; then n / N for next / previous)")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or None)

    def action_close(self) -> None:
        self.dismiss(None)
