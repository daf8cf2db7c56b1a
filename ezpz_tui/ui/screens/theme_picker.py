"""The `ctrl+x` theme picker: every registered theme, previewed live as the highlight moves.

Enter keeps the highlighted theme and remembers it in config.toml; Esc puts back the theme that
was in force when the picker opened. Dismisses with the kept theme's name, or None.
"""

from __future__ import annotations

from textual import on
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ezpz_tui import config
from ezpz_tui.keymap.table import DEFAULT_KEYMAP, Keymap
from ezpz_tui.ui.palette import bindings_for


def keep_theme(app: App[object], name: str) -> None:
    """Use theme `name` and remember it in config.toml (a problem saving it is told, not
    raised): what Enter in the picker and the palette's "Theme …" do."""
    app.theme = name
    for sentence in config.save_theme(name):
        app.notify(sentence, severity="warning", timeout=10)


class _ThemeList(OptionList):
    """An OptionList that also moves with the table's navigation keys (j/k, g/G)."""

    BINDINGS = bindings_for("navigation", only={"cursor_down", "cursor_up", "first", "last"})


class ThemePicker(ModalScreen[str | None]):
    """Lists `app.available_themes` (Textual's, ours and the user's) and previews each."""

    DEFAULT_CSS = """
    ThemePicker {
        align: right middle;
        background: $background 0%;
    }
    ThemePicker > Vertical {
        width: 34;
        height: 100%;
        max-height: 30;
        border: round $primary;
        border-subtitle-color: $text-muted;
        background: $surface;
    }
    ThemePicker OptionList, ThemePicker OptionList:focus {
        height: 1fr;
        border: none;
        background: $surface;
    }
    """

    BINDINGS = bindings_for("dialog", only={"confirm", "close"})

    def __init__(self, keymap: Keymap = DEFAULT_KEYMAP) -> None:
        """`keymap` is the one in force, used only for the key hints."""
        super().__init__()
        self._keymap = keymap
        self._original = ""

    def compose(self) -> ComposeResult:
        names = sorted(self.app.available_themes)
        box = Vertical()
        box.border_title = "Theme"
        keep, revert = self._keymap["confirm"].label, self._keymap["close"].first_label
        box.border_subtitle = f"{keep} keep · {revert} revert"
        with box:
            yield _ThemeList(*(Option(name, id=name) for name in names))

    def on_mount(self) -> None:
        self._original = self.app.theme
        themes = self.query_one(_ThemeList)
        themes.highlighted = sorted(self.app.available_themes).index(self._original)
        themes.focus()

    @on(OptionList.OptionHighlighted)
    def _preview(self, event: OptionList.OptionHighlighted) -> None:
        if event.option.id is not None:
            self.app.theme = event.option.id

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            self._keep(event.option.id)

    def _keep(self, name: str) -> None:
        keep_theme(self.app, name)
        self.dismiss(name)

    def action_confirm(self) -> None:
        """Keep the highlighted theme and remember it."""
        self._keep(self.app.theme)

    def action_close(self) -> None:
        """Put back the theme in force at opening, save nothing."""
        self.app.theme = self._original
        self.dismiss(None)
