"""The dialogs the main screen's objects open, from whichever thread asks.

A worker that must ask the person (a relaunch's question, an error to fix, the sweep's prompt)
runs off the UI thread, where Textual may not push a screen; each method here goes through the
screen's ``on_ui`` first, so a controller never has to know where it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.screen import Screen

    from ezpz_tui.core.watching.failure import Failure
    from ezpz_tui.keymap.table import Keymap


class ScreenDialogs:
    """:class:`~ezpz_tui.ui.main.host.Dialogs` over ``screen``'s app; ``on_ui(call, *args)``
    runs ``call`` on the UI thread from whichever thread asks."""

    def __init__(self, screen: Screen[None], keymap: Keymap, on_ui: Callable[..., None]) -> None:
        self.screen = screen
        self.keymap = keymap
        self.on_ui = on_ui

    def confirm(
        self,
        question: str,
        on_yes: Callable[[], None],
        lines: Sequence[str] = (),
        refused: str | None = None,
    ) -> None:
        from ezpz_tui.ui.screens.confirm import ConfirmScreen

        def answered(yes: bool | None) -> None:
            if yes:
                on_yes()

        dialog = ConfirmScreen(question, self.keymap, list(lines) or None, refused)
        self.on_ui(self.screen.app.push_screen, dialog, answered)

    def confirm_relaunch(
        self,
        question: str,
        resumes: str,
        on_yes: Callable[[bool], None],
        lines: Sequence[str] = (),
        refused: str | None = None,
    ) -> None:
        from ezpz_tui.ui.screens.confirm import RelaunchScreen

        dialog = RelaunchScreen(question, resumes, self.keymap, list(lines) or None, refused)

        def answered(yes: bool | None) -> None:
            if yes:
                on_yes(dialog.resuming)

        self.on_ui(self.screen.app.push_screen, dialog, answered)

    def show_error(self, title: str, message: str) -> None:
        from ezpz_tui.ui.screens.message import MessageScreen

        self.on_ui(self.screen.app.push_screen, MessageScreen(title, message, self.keymap))

    def prompt(
        self,
        prompt: str,
        value: str,
        on_answer: Callable[[str | None], None],
        allow_empty: bool = False,
    ) -> None:
        from ezpz_tui.ui.screens.search import SearchScreen

        dialog = SearchScreen(prompt, value=value, allow_empty=allow_empty)
        self.on_ui(self.screen.app.push_screen, dialog, on_answer)

    def show_failure(self, failure: Failure, on_exclude: Callable[[], None]) -> None:
        from ezpz_tui.ui.screens.failure import EXCLUDE, FailureScreen

        def closed(answer: str | None) -> None:
            if answer == EXCLUDE:
                on_exclude()

        self.on_ui(self.screen.app.push_screen, FailureScreen(failure, self.keymap), closed)

    def show_lines(self, title: str, lines: list[str]) -> None:
        from ezpz_tui.ui.screens.stacks import StacksScreen

        self.on_ui(self.screen.app.push_screen, StacksScreen(title, lines, self.keymap))

    def copy_to_clipboard(self, text: str) -> None:
        self.on_ui(self.screen.app.copy_to_clipboard, text)
