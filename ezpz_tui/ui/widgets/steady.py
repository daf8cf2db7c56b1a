"""A line of text that repaints only when what it says changes.

The summary bar, the run's header and the log's status line are told what to show again on
every tick, every runs listing (2 s) and every batch, mostly with the same words. Textual's
``Static.update`` repaints whatever it is given, and by default lays out the whole screen
again: on an idle attached run that was most of the app's CPU (a layout of every widget each
2 s, a repaint of the bar each second), and a layout after each key's new status line.
"""

from __future__ import annotations

from rich.text import Text
from textual.visual import VisualType
from textual.widgets import Static


def said(content: VisualType) -> object:
    """What ``content`` shows, comparable: rich's ``Text`` compares its letters alone, so its
    styles are compared as markup; anything else that is not a string never compares equal."""
    if isinstance(content, Text):
        return (content.markup, content.justify, content.no_wrap, content.overflow)
    return content if isinstance(content, str) else object()


class SteadyStatic(Static):
    """A ``Static`` whose ``update`` with the words it already shows does nothing."""

    _said: object = None

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        now = said(content)
        if now == self._said:
            return
        self._said = now
        super().update(content, layout=layout)
