"""The help screen, theme picker, confirm dialog, palette and chords, driven through Pilot.

`Host` is a tiny stand-in for the real app that wires the pieces the way app.py is meant to:
bindings from the table, user overrides via `set_keymap`, chords via `ChordKeys` in `on_event`,
`ActionsProvider` as the palette's provider.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

import pytest
from textual import events
from textual.app import App, ComposeResult
from textual.command import CommandPalette, Provider
from textual.widgets import Input, Static

from ezpz_tui import config
from ezpz_tui.keymap.overrides import apply_overrides
from ezpz_tui.keymap.table import DEFAULT_KEYMAP, Keymap
from ezpz_tui.ui.palette import ActionsProvider, ChordKeys, PaletteCommand, bindings_for
from ezpz_tui.ui.screens.confirm import ConfirmScreen
from ezpz_tui.ui.screens.help import HelpScreen
from ezpz_tui.ui.screens.theme_picker import ThemePicker
from ezpz_tui.ui.themes import BUILTIN_THEMES_DIR, register_themes

SIZE = (120, 40)


class Region(Static, can_focus=True):
    """A focusable region with the navigation bindings, recording what it was asked to do."""

    BINDINGS = bindings_for("navigation")

    def __init__(self) -> None:
        super().__init__("region")
        self.done: list[str] = []

    def action_cursor_down(self) -> None:
        self.done.append("cursor_down")

    def action_center(self) -> None:
        self.done.append("center")


class Host(App[None]):
    BINDINGS = bindings_for("global")
    COMMANDS: ClassVar[set[type[Provider]]] = {ActionsProvider}

    def __init__(self, keymap: Keymap = DEFAULT_KEYMAP) -> None:
        super().__init__()
        self.keymap = keymap
        self.chords = ChordKeys(self, keymap)
        self.done: list[str] = []

    def compose(self) -> ComposeResult:
        yield Region()
        yield Input(id="field")

    def on_mount(self) -> None:
        self.set_keymap(self.keymap.textual_overrides())
        register_themes(self, [BUILTIN_THEMES_DIR])
        self.query_one(Region).focus()

    async def on_event(self, event: events.Event) -> None:
        if await self.chords.handle(event):
            return
        await super().on_event(event)

    def palette_commands(self) -> Iterable[PaletteCommand]:
        yield PaletteCommand.for_action(self.keymap, "launch", self.action_launch)
        yield PaletteCommand("Open run", "Show an earlier run", lambda: self.done.append("open"))

    def action_launch(self) -> None:
        self.done.append("launch")

    def action_toggle_left_sidebar(self) -> None:
        self.done.append("toggle_left_sidebar")

    def action_show_help(self) -> None:
        self.push_screen(HelpScreen(self.keymap))

    def action_pick_theme(self) -> None:
        self.push_screen(ThemePicker(self.keymap))


@pytest.fixture(autouse=True)
def cfg_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(config.ENV_CONFIG_DIR, str(tmp_path))
    return tmp_path


def _help_text(app: App[object]) -> str:
    return str(app.screen.query_one("#bindings", Static).render())


async def test_help_lists_every_binding_and_closes_on_escape() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = _help_text(app)
        for binding in DEFAULT_KEYMAP:
            assert f"{binding.label} " in text and binding.description in text, binding.action
        assert text.index("Everywhere") < text.index("Dialogs")
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark", "question_mark")
        assert not isinstance(app.screen, HelpScreen), "? toggles the help"


async def test_help_shows_the_users_keys() -> None:
    keymap, _ = apply_overrides(DEFAULT_KEYMAP, {"launch": "u", "show_help": "f1"})
    app = Host(keymap)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert not isinstance(app.screen, HelpScreen), "? was rebound"
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        assert "u   " in _help_text(app) and "Launch the plan" in _help_text(app)


async def test_help_scrolls_with_the_navigation_keys() -> None:
    app = Host()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("question_mark")
        scroller = app.screen.query_one("VerticalScroll")
        await pilot.press("j", "j")
        assert scroller.scroll_y == 2
        await pilot.press("G")
        assert scroller.scroll_y == scroller.max_scroll_y > 0
        await pilot.press("g")
        assert scroller.scroll_y == 0


async def test_theme_picker_previews_and_reverts_on_escape(cfg_dir: Path) -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        app.theme = "ezpz-nord-dark"
        await pilot.press("ctrl+x")
        assert isinstance(app.screen, ThemePicker)
        names = sorted(app.available_themes)
        await pilot.press("j")
        assert app.theme == names[names.index("ezpz-nord-dark") + 1]
        await pilot.press("k", "k")
        assert app.theme == names[names.index("ezpz-nord-dark") - 1]
        await pilot.press("escape")
        assert not isinstance(app.screen, ThemePicker)
        assert app.theme == "ezpz-nord-dark"
    assert not (cfg_dir / "config.toml").exists(), "Esc saves nothing"


async def test_theme_picker_keeps_and_saves_on_enter(cfg_dir: Path) -> None:
    app = Host()
    kept: list[str | None] = []
    async with app.run_test(size=SIZE) as pilot:
        app.theme = "ezpz-catppuccin-mocha"
        app.push_screen(ThemePicker(), kept.append)
        await pilot.pause()
        await pilot.press("down")
        await pilot.press("enter")
        await pilot.pause()
        assert app.theme == "ezpz-everforest-dark"
        assert kept == ["ezpz-everforest-dark"]
    settings, problems = config.load_config(cfg_dir / "config.toml")
    assert problems == [] and settings.theme == "ezpz-everforest-dark"


@pytest.mark.parametrize(
    ("keys", "answer"),
    [(("y",), True), (("enter",), True), (("n",), False), (("escape",), False)],
)
async def test_confirm_answers(keys: tuple[str, ...], answer: bool) -> None:
    app = Host()
    answers: list[bool | None] = []
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(ConfirmScreen("Stop run 20261122-103105?"), answers.append)
        await pilot.pause()
        assert "Stop run 20261122-103105?" in str(app.screen.query_one("#question").render())
        await pilot.press(*keys)
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
    assert answers == [answer]


async def test_colon_opens_the_palette_with_the_apps_commands() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("colon")
        assert CommandPalette.is_open(app)
        await pilot.press(*"launch")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        assert not CommandPalette.is_open(app)
        assert app.done == ["launch"]


def test_palette_commands_show_their_keys() -> None:
    command = PaletteCommand.for_action(DEFAULT_KEYMAP, "stop_run", lambda: None, "Ask first")
    assert command.title == DEFAULT_KEYMAP["stop_run"].description
    assert command.help_line == "stop run · Ask first · keys: X", "found by its name too"
    assert PaletteCommand("Open run", "", lambda: None).help_line == ""


async def test_chords_run_on_the_focused_region_or_the_app() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        region = app.query_one(Region)
        await pilot.press("z", "z")
        assert region.done == ["center"]
        await pilot.press("z", "h")
        assert app.done == ["toggle_left_sidebar"]
        await pilot.press("z", "down")
        assert region.done == ["center", "cursor_down"], "a broken chord lets the key through"


async def test_chord_keys_leave_text_fields_alone() -> None:
    app = Host()
    async with app.run_test(size=SIZE) as pilot:
        app.query_one(Input).focus()
        await pilot.press("z", "z", "r")
        assert app.query_one(Input).value == "zzr"
        assert app.done == [], "r typed into a field does not launch"


async def test_overrides_rebind_through_set_keymap() -> None:
    keymap, problems = apply_overrides(DEFAULT_KEYMAP, {"launch": "u", "cursor_down": "ctrl+y"})
    assert problems == []
    app = Host(keymap)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r", "u", "j", "ctrl+y")
        assert app.done == ["launch"]
        assert app.query_one(Region).done == ["cursor_down"]


async def test_the_footer_bindings_carry_short_labels() -> None:
    app = Host()
    async with app.run_test(size=SIZE):
        shown = {
            active.binding.action: active.binding.description
            for active in app.screen.active_bindings.values()
            if active.binding.show
        }
    assert shown == {
        "command_palette": "palette",
        "show_help": "keys",
        "launch": "launch",
        "relaunch": "relaunch",
        "stop_run": "stop",
        # Bound here; the main screen keeps it out of the footer while no failed run is open.
        "exclude_and_relaunch": "exclude",
        "edit_sizes": "sizes",
        "quit": "quit",
    }


class HelpSnapshot(App[None]):
    """Only the help screen, at a fixed size, with nothing that blinks or moves."""

    def on_mount(self) -> None:
        self.push_screen(HelpScreen())


def test_help_snapshot(snap_compare: object) -> None:
    assert snap_compare(HelpSnapshot(), terminal_size=(80, 24))  # type: ignore[operator]
