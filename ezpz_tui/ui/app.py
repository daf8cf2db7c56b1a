"""The ezpz-tui application: the process-wide pieces, and the screens it shows.

The app holds what outlives any one screen: the user's settings, the keymap in force (with the
chords Textual cannot bind) and the themes. It shows the main screen (``screens.main``: the
regions, the launches, the opened run) and puts the help screen, the theme picker and the
dialogs over it. Quitting is the app's: it asks first while a run of this process is alive, and
stops the runs before it exits.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import events
from textual.actions import SkipAction
from textual.app import App
from textual.binding import Binding
from textual.command import CommandPalette, Provider
from textual.dom import DOMNode
from textual.screen import Screen

from ezpz_tui import config
from ezpz_tui.keymap.overrides import apply_overrides
from ezpz_tui.keymap.table import DEFAULT_KEYMAP
from ezpz_tui.ui.digest_ahead import read_ahead
from ezpz_tui.ui.main.screen import MainScreen, StartUp
from ezpz_tui.ui.palette import ActionsProvider, ChordKeys, bindings_for
from ezpz_tui.ui.typeahead import HOLD_LIMIT_S, TypeAhead

if TYPE_CHECKING:
    from ezpz_tui.core.checking.check import Check
    from ezpz_tui.core.launching.allocation import Allocation


class EzpzApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "ezpz-tui"
    COMMANDS: ClassVar[set[type[Provider]]] = {ActionsProvider}  # type: ignore[assignment]
    # The main screen binds every global key. The palette's is here too because Textual adds its
    # own ctrl+p (a priority binding, out of the footer) to an app that does not bind it; and
    # the dialogs' close keys, for Textual's palette (see action_close_palette).
    BINDINGS: ClassVar[list[Binding]] = [  # type: ignore[assignment]
        *bindings_for("global", only={"command_palette"}),
        *(
            replace(b, action="close_palette", priority=True)
            for b in bindings_for("dialog", only={"close"})
        ),
    ]

    def __init__(
        self,
        outputs: Path | None = None,
        alloc: Allocation | None = None,
        clock: Callable[[], float] = time.time,
        checks: list[Check] | None = None,
        attach: Path | None = None,
    ) -> None:
        """``alloc``, ``clock`` and ``checks`` replace detection, time and the doctor's probes
        (fixtures for snapshots and tests); by default all three are real. ``attach`` opens a
        run at start, read-only unless this process started it."""
        super().__init__()
        settings, self.problems = config.load_config()
        self.keymap, more = apply_overrides(DEFAULT_KEYMAP, settings.keys)
        self.problems += [f"{config.config_path()}: {problem}" for problem in more]
        self.chords = ChordKeys(self, self.keymap)
        self._wanted_theme = settings.theme
        self._themes_loaded = False
        start = StartUp(clock, settings, outputs, alloc, checks, attach)
        if attach is not None:  # read while the screen starts: the rows need nothing else
            read_ahead(attach)
        # Keys typed from the first frame on wait for the main screen's start-up (its Ready).
        self.typeahead = TypeAhead(self.post_message, self.set_timer, self._after_queues)
        self.typeahead.hold(MainScreen.Ready, limit_s=None)  # its limit starts on_mount
        self.main = MainScreen(start, self.keymap, self.typeahead)

    def get_default_screen(self) -> MainScreen:
        return self.main

    def on_mount(self) -> None:
        self.set_timer(HOLD_LIMIT_S, self.on_main_screen_ready)
        self.set_keymap(self.keymap.textual_overrides())
        if self._wanted_theme:  # the first frame is painted in it: load the themes first
            self._load_themes()

    def _load_themes(self) -> None:
        """Ours and the user's theme files, with a chosen one in force. With the default
        theme they wait for the main screen's start-up: nothing before the plan needs them,
        and the theme picker's key is held until then."""
        from ezpz_tui.ui.themes import RENAMED, current_name, register_themes

        if self._themes_loaded:
            return
        self._themes_loaded = True
        self.problems += register_themes(self)
        wanted = current_name(self._wanted_theme, self.available_themes)
        if wanted in self.available_themes:
            self.theme = wanted
        elif wanted:
            known = [*self.available_themes, *RENAMED]
            self.problems.append(config.unknown_theme(wanted, known))
        for problem in self.problems:
            self.notify(problem, severity="warning", timeout=8)

    async def on_event(self, event: events.Event) -> None:
        typeahead = self.typeahead
        if typeahead.keep(event):
            return
        if not isinstance(event, events.Key):
            await super().on_event(event)
            if isinstance(event, events.Paste):
                typeahead.landed(event)
            return
        if event.is_forwarded:  # back up from the focused widget: the bindings run now
            await super().on_event(event)
            typeahead.landed(event)
            return
        to = self.focused or self.screen  # where Textual sends it
        typeahead.sending(event, to)
        if not await self.chords.handle(event):
            await super().on_event(event)
        if event.is_forwarded:
            to.call_later(typeahead.reached, event)
        else:  # a chord or a priority binding acted on it here
            typeahead.landed(event)

    def _after_queues(self, node: object, call: Callable[[], None]) -> None:
        """``call`` once ``node`` and each node above it up to this app has worked through
        its queue as it stands (a callback handed up from each to the next)."""
        chain = list(node.ancestors_with_self) if isinstance(node, DOMNode) else [self]

        def hop(at: int) -> None:
            if at == len(chain):
                call()
            elif not chain[at].call_later(hop, at + 1):  # a node gone: on to the next
                hop(at + 1)

        hop(0)

    def on_main_screen_ready(self) -> None:
        if not gc.isenabled():  # ``ezpz-tui`` turned it off for the start-up
            gc.freeze()  # what start-up made lives as long as the app: no pass need walk it
            gc.enable()
        self._load_themes()
        self.typeahead.release(MainScreen.Ready)

    def push_screen(self, screen: Screen | str, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        """Keys typed while a dialog or the palette opens are its own: they wait until it is
        composed and focused."""
        pushed = super().push_screen(screen, *args, **kwargs)  # type: ignore[call-overload]
        self._hold_until_settled()
        return pushed

    def pop_screen(self) -> object:  # type: ignore[override]
        """Keys typed as a dialog closes wait for what its answer does: the answer's callback
        runs on the screen below before anything queued there after it."""
        popped = super().pop_screen()
        self._hold_until_settled()
        return popped

    def _hold_until_settled(self) -> None:
        """Hold the keys until the screen now on top has worked through its queue as it stands
        (a new screen composes and focuses before it reads its queue) and painted once: what
        that queue deferred to after a refresh (a search result centred) is done by then."""
        why = object()
        self.typeahead.hold(why)
        if not self.screen.call_later(self.call_after_refresh, self.typeahead.release, why):
            self.typeahead.release(why)

    async def action_close_palette(self) -> None:
        """The keymap's ``close`` (Esc, ctrl+c) in Textual's command palette too: a modal screen
        hides the app's keys and the palette binds only Esc, hence a priority binding that
        steps aside everywhere else (ctrl+c then keeps Textual's meaning: copy, or the hint
        that q quits)."""
        if not isinstance(self.screen, CommandPalette):
            raise SkipAction()
        await self.screen.run_action("escape")  # its own Esc: stops the search, closes

    async def action_quit(self) -> None:
        from ezpz_tui.ui.screens.confirm import QuitScreen

        session = self.main.session
        alive = session.alive() if session else []
        if not alive:
            self.exit()
            return

        def answered(answer: bool | str | None) -> None:
            if answer == QuitScreen.LEAVE and session is not None:
                session.supervisor.detach_all()
                self.exit()
            elif answer:
                self.notify("Stopping runs before quitting …")
                self.main.launches.stop_runs(alive, then_exit=True)

        question = f"{len(alive)} run(s) still running. Stop them and quit?"
        self.push_screen(QuitScreen(question, self.keymap), answered)

    def action_show_help(self) -> None:
        from ezpz_tui.ui.screens.help import HelpScreen

        self.push_screen(HelpScreen(self.keymap))

    def action_pick_theme(self) -> None:
        from ezpz_tui.ui.screens.theme_picker import ThemePicker

        self.push_screen(ThemePicker(self.keymap))


def run_app(outputs: Path | None = None, attach: Path | None = None) -> int:
    EzpzApp(outputs=outputs, attach=attach).run()
    return 0
