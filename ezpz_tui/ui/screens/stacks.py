"""Where every rank of a hung job waits: their Python stacks, ranks with the same stack folded
together (:mod:`ezpz_tui.core.watching.stacks` asks the ranks and groups the answers)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ezpz_tui.keymap.table import DEFAULT_KEYMAP, Keymap
from ezpz_tui.ui.palette import bindings_for


class StacksScreen(ModalScreen[None]):
    """The grouped stacks of one run as plain lines, scrollable, until closed."""

    DEFAULT_CSS = """
    StacksScreen { align: center middle; }
    StacksScreen > Vertical {
        width: 90%;
        height: 80%;
        padding: 0 1;
        border: thick $accent;
        background: $surface;
    }
    StacksScreen #title { text-style: bold; }
    StacksScreen #keys { color: $text-muted; }
    """

    BINDINGS = bindings_for("dialog", only={"confirm", "close"})

    def __init__(self, title: str, lines: list[str], keymap: Keymap = DEFAULT_KEYMAP) -> None:
        super().__init__()
        self.title_text = title
        self.lines = lines
        self._keymap = keymap

    def compose(self) -> ComposeResult:
        keys = self._keymap["close"].first_label
        with Vertical():
            yield Static(self.title_text, id="title", markup=False)
            with VerticalScroll():
                yield Static("\n".join(self.lines), id="stacks", markup=False)
            yield Static(f"{keys} closes", id="keys", markup=False)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_confirm(self) -> None:
        self.dismiss(None)
