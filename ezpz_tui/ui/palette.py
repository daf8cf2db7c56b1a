"""How actions reach Textual: key bindings and chords from the keymap table, and the palette.

Three pieces, all fed by `ezpz_tui.keymap` so the footer, the help screen and the palette agree:

- `bindings_for(scope)`: Textual `Binding`s for a widget's or screen's `BINDINGS`. They are
  always built from the default table; the user's overrides reach them at run time through
  `app.set_keymap(keymap.textual_overrides())`, which also rebinds screens opened later.
  `global_bindings()` is the main screen's share (the app's own actions prefixed `app.`, so the
  footer keeps the table's order) and `screen_bindings_for` the navigation a list binds for the
  screen (the view history, search).
- `ChordKeys`: runs the chords (`z z`, `z h`, `z j`, ...) that Textual cannot bind, from the
  app's `on_event`.
- `ActionsProvider`: a command palette provider listing the `PaletteCommand`s the screen (or
  else the app) returns from its `palette_commands()` method; `keymap_commands` makes one for
  every action of the key table, found by its description or its name ("relaunch").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from functools import partial
from typing import Protocol, runtime_checkable

from textual import events
from textual.app import App
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.dom import DOMNode
from textual.screen import Screen

from ezpz_tui.keymap.chords import ChordMachine
from ezpz_tui.keymap.table import DEFAULT_KEYMAP, SCOPES, Keymap


def bindings_for(
    scope: str, only: Collection[str] | None = None, exclude: Collection[str] = ()
) -> list[Binding]:
    """The single-key bindings of `scope` (optionally only the actions in `only`, and none
    in `exclude`: keys a widget reads itself, as digits) as Textual
    `Binding`s: footer entries show their short label, the rest stay out of the footer and
    describe themselves in the keys panel. Each carries the table's binding id, so user
    overrides applied with `App.set_keymap` find it."""
    return [
        Binding(
            b.textual_keys,
            b.action,
            b.footer or b.description,
            show=bool(b.footer),
            tooltip=b.description,
            id=b.binding_id,
        )
        for b in DEFAULT_KEYMAP.in_scope(scope)
        if b.single_keys and (only is None or b.action in only) and b.action not in exclude
    ]


SCREEN_NAVIGATION = frozenset({"history_back", "history_forward", "search"})
"""Navigation actions the screen carries out (the view history, the search prompt)."""

APP_ACTIONS = frozenset({"command_palette", "pick_theme", "show_help", "quit"})
"""Global actions of the app itself rather than of the main screen's regions."""


def screen_bindings_for(scope: str, only: Collection[str]) -> list[Binding]:
    """`bindings_for`, with the actions run on the screen whichever widget binds the keys.

    A widget of `scope` binds them so that they act where the scope is active and win over the
    screen's own bindings: Tab goes forward in the view history in a list, while in the launch
    form (no navigation scope) it still moves to the next field.
    """
    return [replace(b, action=f"screen.{b.action}") for b in bindings_for(scope, only)]


def global_bindings() -> list[Binding]:
    """The global scope for the main screen, in table order (the footer's order): the app's own
    actions (`APP_ACTIONS`) run on the app, the others on the screen."""
    return [
        replace(b, action=f"app.{b.action}") if b.action in APP_ACTIONS else b
        for b in bindings_for("global")
    ]


class ChordKeys:
    """Feeds the app's key presses to a `ChordMachine` and runs the chords that complete.

    Call `handle` first thing in `App.on_event`; when it returns True the key was part of a chord
    and must not reach the bindings. Keys typed into a text field and keys in dialogs (modal
    screens) are left alone. A completed chord's action runs on the first node from the focused
    widget up to the app that has `action_<name>`, so `z z` centres whatever list has focus.
    """

    def __init__(self, app: App[object], keymap: Keymap) -> None:
        self._app = app
        self.machine = ChordMachine(keymap.chords())

    async def handle(self, event: events.Event) -> bool:
        """Whether `event` was consumed as (part of) a chord."""
        if not isinstance(event, events.Key) or event.is_forwarded:
            return False
        screen = self._app.screen
        focused = screen.focused
        if screen.is_modal or (focused and focused.check_consume_key(event.key, event.character)):
            return False
        step = self.machine.feed(event.key, time.monotonic())
        if step.kind == "pending":
            return True
        if step.kind == "action":
            nodes = focused.ancestors_with_self if focused else [screen, self._app]
            target = next((n for n in nodes if hasattr(n, f"action_{step.action}")), None)
            if target is None:
                self._app.bell()
            else:
                await self._app.run_action(step.action, target)
            return True
        return False


@dataclass(frozen=True)
class PaletteCommand:
    """One entry of the command palette: what it is called, a line of help, what it does, and
    the keys that do the same (shown so the palette teaches the keys)."""

    title: str
    help: str
    callback: Callable[[], object]
    keys: str = ""
    name: str = ""  # the action's name in words ("rerun doctor"): found by typing it too

    @classmethod
    def for_action(
        cls, keymap: Keymap, action: str, callback: Callable[[], object], help: str = ""
    ) -> PaletteCommand:
        """A command titled with the table's description of `action`, showing its keys."""
        binding = keymap[action]
        return cls(binding.description, help, callback, binding.label, _words(action))

    @property
    def help_line(self) -> str:
        """The line under the title: the action's name, the help text and the keys."""
        keys = f"keys: {self.keys}" if self.keys else ""
        return " · ".join(part for part in (self.name, self.help, keys) if part)


def _words(action: str) -> str:
    return action.replace("_", " ")


PALETTE_LEFT_OUT = frozenset({"command_palette", "type_rank", "count"})
"""Actions of the key table the palette does not offer: itself, and the digits typed in a list
(a rank's number, a count)."""


def action_target(screen: Screen[object], action: str) -> DOMNode | None:
    """Where a key would run `action` now: the first node from the screen's focused widget up
    to the app (the screen, then the app, when nothing has focus) with `action_<name>`; None
    when none has it (a rank list key while the runs list has focus)."""
    focused = screen.focused
    nodes = focused.ancestors_with_self if focused is not None else [screen, screen.app]
    return next((node for node in nodes if hasattr(node, f"action_{action}")), None)


def keymap_commands(keymap: Keymap, screen: Screen[object]) -> list[PaletteCommand]:
    """Every action of the key table (but the dialogs' answers and `PALETTE_LEFT_OUT`), titled
    with its description and found by its name as well. Each runs where its key would run it
    now, or says where it works (a key of the rank list, asked for from the runs list). One its
    node refuses now runs all the same, to say why (the failure keys without a failed run)."""
    app = screen.app
    commands: list[PaletteCommand] = []
    for b in keymap:
        if b.scope == "dialog" or b.action in PALETTE_LEFT_OUT:
            continue
        target = action_target(screen, b.action)
        if target is None:
            where = f"{b.description}: a key of one view ({SCOPES[b.scope]}); focus it first."
            callback: Callable[[], object] = partial(app.notify, where)
        elif target.check_action(b.action, ()) is False:
            callback = getattr(target, f"action_{b.action}")
        else:
            callback = partial(app.run_action, b.action, target)
        commands.append(PaletteCommand.for_action(keymap, b.action, callback))
    return commands


@runtime_checkable
class CommandSource(Protocol):
    """What a screen or the app implements for `ActionsProvider`: the commands to offer now."""

    def palette_commands(self) -> Iterable[PaletteCommand]: ...


class ActionsProvider(Provider):
    """Offers `palette_commands()` in the command palette (`ctrl+p` or `:`).

    Put it in `App.COMMANDS` in place of Textual's system commands, whose Quit would skip the
    confirmation a live run needs and whose Theme would bypass the theme picker.
    """

    async def startup(self) -> None:
        """Ask once per opening, so commands such as "open run X" stay current: the screen the
        palette opened over, or else the app."""
        source = next((s for s in (self.screen, self.app) if isinstance(s, CommandSource)), None)
        self._commands = list(source.palette_commands()) if source is not None else []

    async def discover(self) -> Hits:
        """All commands, in the app's order, before anything is typed."""
        for command in self._commands:
            yield DiscoveryHit(command.title, command.callback, help=command.help_line)

    async def search(self, query: str) -> Hits:
        """The commands whose title or action name fuzzy-matches what was typed."""
        matcher = self.matcher(query)
        for command in self._commands:
            by_title, by_name = matcher.match(command.title), matcher.match(command.name)
            if max(by_title, by_name) > 0:
                yield Hit(
                    max(by_title, by_name),
                    matcher.highlight(command.title) if by_title >= by_name else command.title,
                    command.callback,
                    text=command.title,
                    help=command.help_line,
                )
