"""The footer: Textual's, rebuilt only when the keys it shows change.

Textual's footer throws its key widgets away and builds them again on every change of the
screen's bindings: every focus move and every ``refresh_bindings``, a dozen times while the main
screen starts. With some forty keys, each styled on its own, that was the largest cost between
the first frame and the prefilled plan (bench/tui_bench.py). What the keys say changes far less
often: the footer compares it first.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class KeyHints(Footer):
    _shown: tuple[object, ...] | None = None

    def on_mount(self) -> None:
        """The keys from the first frame on: Textual's footer stays empty until the bindings
        first change."""
        super().on_mount()
        self._bindings_ready = True
        self.call_later(self._recompose_if_changed)

    def bindings_changed(self, screen: Screen[object]) -> None:
        self._bindings_ready = True  # what Footer.compose waits for
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            self.call_after_refresh(self._recompose_if_changed)

    async def _recompose_if_changed(self) -> None:
        shown = tuple(
            (b.key, b.key_display, b.action, b.description, b.group, enabled, tooltip)
            for _, b, enabled, tooltip in self.screen.active_bindings.values()
            if b.show
        )
        if shown != self._shown:
            self._shown = shown
            await self.recompose()
