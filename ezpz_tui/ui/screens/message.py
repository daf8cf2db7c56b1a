"""A dialog that says why something could not be done, and stays until it is read.

For errors a person must act on before trying again (an outputs directory that cannot hold a
run): a notification fades after seconds and may be missed while the user looks elsewhere.
The dialog closes with the dialog keys of the keymap (`esc`, or `enter`), and the app goes on.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from ezpz_tui.keymap.table import DEFAULT_KEYMAP, Keymap
from ezpz_tui.ui.palette import bindings_for


class MessageScreen(ModalScreen[None]):
    """Shows `title` and `message` (plain text, never markup) until closed."""

    DEFAULT_CSS = """
    MessageScreen {
        align: center middle;
    }
    MessageScreen > Vertical {
        width: auto;
        max-width: 84;
        min-width: 36;
        height: auto;
        padding: 1 2;
        border: thick $error;
        background: $surface;
    }
    MessageScreen #title {
        text-style: bold;
        color: $error;
    }
    MessageScreen #message {
        width: auto;
        max-width: 80;
        margin-top: 1;
    }
    MessageScreen #keys {
        width: auto;
        margin-top: 1;
        color: $text-muted;
    }
    """

    BINDINGS = bindings_for("dialog", only={"confirm", "close"})

    def __init__(self, title: str, message: str, keymap: Keymap = DEFAULT_KEYMAP) -> None:
        """`keymap` is the one in force, used only to show the right keys to close it."""
        super().__init__()
        self.title_text = title
        self.message = message
        self._keymap = keymap

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(self.title_text, id="title", markup=False)
            yield Static(self.message, id="message", markup=False)
            yield Static(f"{self._keymap['close'].first_label}: close", id="keys", markup=False)

    def action_confirm(self) -> None:
        """Enter closes it too: there is nothing to answer."""
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
