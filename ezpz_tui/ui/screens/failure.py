"""The failure on one screen: why the opened run failed, as ``ezpz-tui why`` tells it.

A dialog rather than a panel of the Run tab: at 80x24 the tab holds a few ranks and a few log
lines, and a traceback, the launcher's messages and the advice need the whole screen to be read
at once. It opens on ``w`` (the keymap's ``show_failure``) and once by itself when a run being
watched fails; the Run tab keeps a one-line summary. From here the exclude key closes it with
``"exclude"``, and the screen asks before it excludes the host and relaunches.

The text is :func:`format_failure`'s, so the dialog and the CLI say the same words.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ezpz_tui.core.watching.failure import Failure, format_failure
from ezpz_tui.keymap.table import DEFAULT_KEYMAP, Keymap
from ezpz_tui.ui.palette import bindings_for

EXCLUDE = "exclude"
"""What the dialog closes with when the person asked to exclude the host and relaunch."""

_SCROLL = ("cursor_down", "cursor_up", "first", "last", "half_page_down", "half_page_up")


def failure_text(failure: Failure) -> Text:
    """The failure in words, its headings bold and its first line red."""
    text = Text()
    for i, line in enumerate(format_failure(failure).splitlines()):
        if i:
            text.append("\n")
        if i == 0:
            text.append(line, "bold red")
        elif line.startswith(" "):
            text.append(line)
        else:
            heading, colon, rest = line.partition(":")
            text.append(heading + colon, "bold")
            text.append(rest)
    return text


class FailureScreen(ModalScreen[str | None]):
    """Shows ``failure``; closes with ``EXCLUDE`` on the exclude key, None on Esc."""

    DEFAULT_CSS = """
    FailureScreen {
        align: center middle;
    }
    FailureScreen > Vertical {
        width: 96%;
        max-width: 120;
        height: auto;
        padding: 0 1;
        border: thick $error;
        background: $surface;
        border-title-color: $error;
        border-title-style: bold;
        border-subtitle-color: $text-muted;
    }
    FailureScreen #failure-body {
        height: auto;
        max-height: 80vh;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        *bindings_for("dialog", only={"close", "confirm"}),
        *bindings_for("global", only={"exclude_and_relaunch"}),
        *bindings_for("navigation", only=_SCROLL),
    ]

    def __init__(self, failure: Failure, keymap: Keymap = DEFAULT_KEYMAP) -> None:
        """``keymap`` is the one in force, used only to show the right keys."""
        super().__init__()
        self.failure = failure
        self._keymap = keymap

    def compose(self) -> ComposeResult:
        km = self._keymap
        keys = (
            f"{km['exclude_and_relaunch'].label}: exclude host and relaunch · "
            f"{km['cursor_down'].label} / {km['cursor_up'].label}: scroll · "
            f"{km['close'].first_label}: close"
        )
        with Vertical() as box:
            box.border_title = "why the run failed"
            box.border_subtitle = keys
            with VerticalScroll(id="failure-body"):
                yield Static(failure_text(self.failure), id="failure-text")

    @property
    def _body(self) -> VerticalScroll:
        return self.query_one("#failure-body", VerticalScroll)

    def action_exclude_and_relaunch(self) -> None:
        self.dismiss(EXCLUDE)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_confirm(self) -> None:
        """Enter closes it too: there is nothing to answer."""
        self.dismiss(None)

    def action_cursor_down(self) -> None:
        self._body.scroll_down(animate=False)

    def action_cursor_up(self) -> None:
        self._body.scroll_up(animate=False)

    def action_first(self) -> None:
        self._body.scroll_home(animate=False)

    def action_last(self) -> None:
        self._body.scroll_end(animate=False)

    def action_half_page_down(self) -> None:
        body = self._body
        body.scroll_relative(y=body.size.height // 2, animate=False)

    def action_half_page_up(self) -> None:
        body = self._body
        body.scroll_relative(y=-(body.size.height // 2), animate=False)
