"""The `/` and `&` prompts: one line at the bottom, Enter submits, Esc cancels."""

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

    def __init__(
        self,
        placeholder: str = "search (Enter; then n / N for next / previous)",
        value: str = "",
        allow_empty: bool = False,
    ) -> None:
        """``allow_empty``: an empty answer means something (clear a filter), not "cancel"."""
        super().__init__()
        self._placeholder = placeholder
        self._value = value
        self._allow_empty = allow_empty

    def compose(self) -> ComposeResult:
        yield Input(value=self._value, placeholder=self._placeholder)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        self.dismiss(value if value or self._allow_empty else None)

    def action_close(self) -> None:
        self.dismiss(None)
