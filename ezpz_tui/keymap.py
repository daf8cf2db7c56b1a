"""The one table of key bindings, and the small pieces of logic around it.

The footer, the help screen, the command palette hints and the docs are all generated from
`DEFAULT_KEYMAP` (or from the user's version of it), so a key never means one thing on screen and
another in the docs. This module is plain data and logic and must not import textual: it is
tested without a terminal, and the docs are generated from it without starting the UI.

Key notation (what the table and the user's `[keys]` table use):

- a printable character is written as itself: `j`, `G`, `?`, `:`, `]`;
- other keys use Textual's names: `down`, `escape`, `enter`, `tab`, `pageup`, `space`, `comma`;
- modifiers are joined with `+`: `ctrl+d`, `shift+tab`, `alt+j`;
- a chord (keys pressed one after the other) separates its steps with a space: `z z`, `z h`.

Textual's own names for punctuation (`question_mark`, `colon`, ...) are accepted too.
"""

from __future__ import annotations

import difflib
import string
import unicodedata
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal, NamedTuple

from ezpz_tui import config

CHORD_TIMEOUT_S = 1.0
"""How long the first key of a chord waits for the second (vim's default is one second)."""

SCOPES: dict[str, str] = {
    "global": "Everywhere",
    "navigation": "In lists, logs and plots",
    "ranks": "Rank list",
    "log": "Rank logs",
    "runs": "Runs",
    "plot": "Metrics",
    "form": "Launch form",
    "topology": "Topology grid",
    "dialog": "Dialogs",
}
"""Where a binding applies, in the order the help screen and the docs list them, with a title."""

_CONTEXTS: tuple[frozenset[str], ...] = (
    frozenset({"global", "navigation", "log"}),
    frozenset({"global", "navigation", "ranks"}),
    frozenset({"global", "navigation", "runs"}),
    frozenset({"global", "navigation", "plot"}),
    frozenset({"global", "form"}),
    frozenset({"global", "navigation", "topology"}),
    frozenset({"dialog"}),
)
"""Scopes that are active at the same time. A focused log sees global + navigation + log keys;
a dialog (a modal screen) sees only its own. Two bindings conflict only when some context holds
both of their scopes."""

_NAMED_KEYS = frozenset(
    {
        "up",
        "down",
        "left",
        "right",
        "home",
        "end",
        "pageup",
        "pagedown",
        "insert",
        "delete",
        "backspace",
        "tab",
        "enter",
        "escape",
        "space",
        *(f"f{n}" for n in range(1, 25)),
    }
)
_MODIFIERS = ("shift", "alt", "ctrl", "super", "hyper", "meta")
_SPELLINGS = {"esc": "escape", "return": "enter", "pgup": "pageup", "pgdn": "pagedown"}
_TEXTUAL_REPLACEMENTS = {
    "solidus": "slash",
    "reverse_solidus": "backslash",
    "commercial_at": "at",
    "hyphen_minus": "minus",
    "plus_sign": "plus",
    "low_line": "underscore",
}


def _textual_name(character: str) -> str:
    """Textual's key name for a punctuation character (mirrors textual.keys._character_to_key)."""
    name = unicodedata.name(character).lower().replace("-", "_").replace(" ", "_")
    return _TEXTUAL_REPLACEMENTS.get(name, name)


_PUNCTUATION_BY_NAME = {_textual_name(c): c for c in string.punctuation}
"""`question_mark` -> `?`: Textual reports punctuation keys by name; the table writes the
character, and both must compare equal."""

_TERMINAL_ALIASES = {"ctrl+i": "tab", "ctrl+m": "enter", "ctrl+[": "escape"}
"""Keys a terminal cannot tell apart (ctrl+i sends the same byte as Tab, also inside tmux), so
binding both to different actions is a conflict even though they are spelled differently."""


def canonical_key(key: str) -> str | None:
    """One spelling for a single key (not a chord), or None when it is not a key at all.

    Used on the table, on the user's overrides and on the keys Textual reports, so that `?`,
    `question_mark`, `Esc` and `escape` compare equal where they must.
    """
    key = key.strip()
    if len(key) == 1:
        return key if key.isprintable() and not key.isspace() else None
    *modifiers, base = key.split("+")
    modifiers = [m.strip().lower() for m in modifiers]
    if any(m not in _MODIFIERS for m in modifiers) or len(set(modifiers)) != len(modifiers):
        return None
    if len(base) == 1:
        if not base.isprintable() or base.isspace():
            return None
        if modifiers == ["shift"] and base.isalpha():
            return base.upper()  # Textual reports shift+g as "G"
        if modifiers and base.isalpha():
            base = base.lower()
    else:
        base = base.strip().lower()
        base = _SPELLINGS.get(base, base)
        if base in _PUNCTUATION_BY_NAME:
            base = _PUNCTUATION_BY_NAME[base]
        elif base not in _NAMED_KEYS:
            return None
    return "+".join([*modifiers, base])


def key_label(key: str) -> str:
    """How a key or chord is shown to people: `escape` as `esc`, the chord `z z` as `zz`."""
    steps = [("esc" if step == "escape" else step) for step in key.split(" ")]
    return "".join(steps) if all(len(step) == 1 for step in steps) else " ".join(steps)


def _conflict_form(key: str) -> str:
    return _TERMINAL_ALIASES.get(key, key)


@dataclass(frozen=True)
class KeyBinding:
    """One row of the table: the keys that run one action in one scope.

    `keys` holds canonical keys; a chord's steps are separated by a space (`"z z"`). `footer` is
    the short label shown in the footer; an empty footer keeps the binding out of it. Every
    binding is listed on the help screen and in the docs with its `description`.
    """

    keys: tuple[str, ...]
    action: str
    description: str
    scope: str
    footer: str = ""

    @property
    def single_keys(self) -> tuple[str, ...]:
        """The keys that act on their own; these become Textual bindings."""
        return tuple(k for k in self.keys if " " not in k)

    @property
    def chords(self) -> tuple[tuple[str, ...], ...]:
        """The multi-key sequences; Textual cannot bind these, `ChordMachine` handles them."""
        return tuple(tuple(k.split(" ")) for k in self.keys if " " in k)

    @property
    def is_chord(self) -> bool:
        """Whether this action is reached by chords (its keys are all chords or all single)."""
        return bool(self.chords)

    @property
    def label(self) -> str:
        """The keys as people read them: `j, down`."""
        return ", ".join(key_label(k) for k in self.keys)

    @property
    def binding_id(self) -> str:
        """The Textual binding id, the handle `App.set_keymap` uses to rebind this action."""
        return f"ezpz.{self.action}"

    @property
    def textual_keys(self) -> str:
        """The comma-separated key string a Textual `Binding` takes (empty for chords)."""
        return ",".join(self.single_keys)


def _kb(keys: str, action: str, description: str, scope: str, footer: str = "") -> KeyBinding:
    return KeyBinding(tuple(keys.split(",")), action, description, scope, footer)


@dataclass(frozen=True)
class Keymap:
    """The whole table. Immutable: overrides make a new one."""

    bindings: tuple[KeyBinding, ...]

    def __iter__(self) -> Iterator[KeyBinding]:
        return iter(self.bindings)

    def __getitem__(self, action: str) -> KeyBinding:
        """The binding of `action` (each action has exactly one row); KeyError if unknown."""
        for binding in self.bindings:
            if binding.action == action:
                return binding
        raise KeyError(action)

    def in_scope(self, scope: str) -> tuple[KeyBinding, ...]:
        """The bindings of one scope, in table order (what a widget of that scope binds)."""
        return tuple(b for b in self.bindings if b.scope == scope)

    def chords(self) -> dict[tuple[str, ...], str]:
        """Every chord and its action: the input of `ChordMachine`."""
        return {chord: b.action for b in self.bindings for chord in b.chords}

    def textual_overrides(self) -> dict[str, str]:
        """`{binding id: "key,key"}` for the single-key bindings that differ from the defaults.

        Widgets declare their Textual `BINDINGS` from `DEFAULT_KEYMAP` at class level (with
        `binding_id` as the id); passing this to `App.set_keymap` applies the user's overrides to
        all of them at once, including screens opened later.
        """
        return {
            b.binding_id: b.textual_keys
            for b in self.bindings
            if b.single_keys and b.keys != DEFAULT_KEYMAP[b.action].keys
        }


DEFAULT_KEYMAP = Keymap(
    (
        # DESIGN.md section 5, meanings kept as the author's site gives them.
        _kb("j,down", "cursor_down", "Next item", "navigation"),
        _kb("k,up", "cursor_up", "Previous item", "navigation"),
        _kb("g", "first", "First item in the region", "navigation"),
        _kb("G", "last", "Last item in the region", "navigation"),
        _kb("z z", "center", "Centre the focused item", "navigation"),
        _kb("h", "region_left", "Move to the region on the left", "global"),
        _kb("l", "region_right", "Move to the region on the right", "global"),
        _kb("]", "next_heading", "Next heading (section, error, run)", "navigation"),
        _kb("[", "previous_heading", "Previous heading (section, error, run)", "navigation"),
        _kb("}", "next_block", "Next block", "navigation"),
        _kb("{", "previous_block", "Previous block", "navigation"),
        _kb("ctrl+d", "half_page_down", "Half a page down", "navigation"),
        _kb("ctrl+u", "half_page_up", "Half a page up", "navigation"),
        _kb("z h", "toggle_left_sidebar", "Show or hide the left sidebar", "global"),
        _kb("z l", "toggle_right_sidebar", "Show or hide the right sidebar", "global"),
        _kb("H", "focus_left", "Focus the left region", "global"),
        _kb("J", "focus_main", "Focus the main region", "global"),
        _kb("K", "focus_top", "Focus the top region", "global"),
        _kb("L", "focus_right", "Focus the right region", "global"),
        _kb("ctrl+p,:", "command_palette", "Command palette", "global", "palette"),
        _kb("ctrl+x", "pick_theme", "Pick a theme", "global"),
        _kb("?", "show_help", "Show the key bindings", "global", "keys"),
        _kb("escape", "close", "Close the dialog", "dialog"),
        _kb("ctrl+o", "history_back", "Back in the view history", "navigation"),
        # Terminals (and tmux) send ctrl+i as Tab; listing both makes it work everywhere, and the
        # navigation scope keeps Tab free for moving between fields of the launch form.
        _kb("ctrl+i,tab", "history_forward", "Forward in the view history", "navigation"),
        _kb("/", "search", "Search", "navigation"),
        _kb("n", "next_match", "Next match", "navigation"),
        _kb("N", "previous_match", "Previous match", "navigation"),
        # The builders' keys: one key each for launch and relaunch, shown in the footer.
        _kb("r", "launch", "Launch the plan as a new run", "global", "launch"),
        _kb("R", "relaunch", "Stop the run, launch the edited plan", "global", "relaunch"),
        _kb("X", "stop_run", "Stop the run (asks first)", "global", "stop"),
        _kb("D", "rerun_doctor", "Run the doctor checks again", "global"),
        # vim's gt / gT without the g, which already means "first item".
        _kb("t", "next_tab", "Next tab of the main region (Launch, Run, Metrics)", "global"),
        _kb("T", "previous_tab", "Previous tab of the main region", "global"),
        _kb("q", "quit", "Quit (asks first while a run is alive)", "global", "quit"),
        _kb("F", "toggle_fullscreen", "Full screen the focused view, or back", "global"),
        # Typing a rank's number in the rank list selects it (digits within a second add up).
        _kb(",".join("0123456789"), "type_rank", "Go to the rank with this number", "ranks"),
        _kb("enter", "choose", "Read the selected rank's log", "ranks"),
        _kb("f", "toggle_follow", "Follow the log end on or off (G resumes)", "log", "follow"),
        _kb("a", "toggle_all_ranks", "All ranks interleaved, or the selected rank", "log", "all"),
        # less's & : keep only the lines that match (here: "@0,3-5 text" = ranks and text).
        _kb("&", "filter", "Filter lines by rank (@0,3-5) and text", "log"),
        _kb("enter", "show_line", "Show the line under the cursor whole", "log"),
        _kb("m", "next_metric", "Plot the next metric", "plot"),
        _kb("M", "previous_metric", "Plot the previous metric", "plot"),
        _kb("v", "cycle_view", "One rank, all ranks, or mean with min/max band", "plot"),
        _kb("s", "cycle_smoothing", "Smoothing off / 0.6 / 0.9 / 0.99 (EMA)", "plot"),
        _kb("y", "toggle_log_scale", "log10 y axis on or off", "plot"),
        _kb("x", "toggle_x_axis", "x axis: step or time", "plot"),
        _kb("c", "compare_run", "Overlay this run on the plots, or remove it", "runs"),
        _kb(
            "o",
            "cycle_colour",
            "Colour ranks by the next group (TP, PP, CP, DP)",
            "topology",
            "colour",
        ),
        # In a form field letters are typed; Esc (or Enter) leaves the field so keys act again.
        _kb("escape", "leave_field", "Leave the field (single keys act again)", "form"),
        # The answers in a dialog (ConfirmScreen, theme picker).
        _kb("y,enter", "confirm", "Yes / keep the choice", "dialog"),
        _kb("n", "cancel", "No", "dialog"),
    )
)
"""The default bindings: every key the UI knows, exactly once."""


class Conflict(NamedTuple):
    """Two bindings that would fight over a key in the same context."""

    first: KeyBinding
    second: KeyBinding
    key: str


def _shares_context(a: str, b: str) -> bool:
    return any(a in ctx and b in ctx for ctx in _CONTEXTS)


def conflicts(keymap: Keymap) -> list[Conflict]:
    """Every pair of bindings that cannot both work: the same key (or a key a terminal cannot
    tell apart), or a single key that is also the first key of a chord, in scopes active
    together."""
    found: list[Conflict] = []
    bindings = list(keymap)
    for i, a in enumerate(bindings):
        for b in bindings[i + 1 :]:
            if not _shares_context(a.scope, b.scope):
                continue
            key = _clash(a, b) or _clash(b, a)
            if key:
                found.append(Conflict(a, b, key))
    return found


def _clash(a: KeyBinding, b: KeyBinding) -> str:
    """The key `a` takes from `b`: a shared key, or a key (or chord) of `a` that starts a longer
    chord of `b`, which would then never complete. Empty when none."""
    a_keys = {tuple(map(_conflict_form, k.split(" "))): k for k in a.keys}
    for other in b.keys:
        steps = tuple(map(_conflict_form, other.split(" ")))
        for length in range(1, len(steps) + 1):
            if steps[:length] in a_keys:
                return a_keys[steps[:length]]
    return ""


def _parse_keys(action: str, value: object, want_chords: bool) -> tuple[tuple[str, ...], list[str]]:
    """The user's keys for one action, canonical and in order, plus a sentence per bad key."""
    if isinstance(value, str):
        raw = value.split(",")
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        raw = value
    else:
        return (), [f'[keys] {action}: write the keys as a string such as "j,down"; ignored.']
    keys: list[str] = []
    problems: list[str] = []
    for text in raw:
        steps = text.split()
        canon = [canonical_key(step) for step in steps]
        if not steps:
            continue
        if any(c is None for c in canon):
            bad = steps[canon.index(None)]
            hint = " (a chord is written with spaces: 'z z')" if bad.isalnum() else ""
            problems.append(f"[keys] {action}: {bad!r} is not a key name{hint}; ignored.")
            continue
        if (len(steps) > 1) != want_chords:
            kind = "two-key chords such as 'z z'" if want_chords else "single keys"
            problems.append(f"[keys] {action}: {text.strip()!r} ignored; this action takes {kind}.")
            continue
        key = " ".join(c for c in canon if c)
        if key not in keys:
            keys.append(key)
    return tuple(keys), problems


def apply_overrides(base: Keymap, overrides: Mapping[str, object]) -> tuple[Keymap, list[str]]:
    """`base` with the user's `[keys]` table applied, and a plain sentence for every problem.

    Never raises: an unknown action, a bad key name or a key that would collide with another
    binding is reported and the affected action keeps its default keys. An action that is a chord
    by default takes chords and the others take single keys, because Textual can only rebind a
    single-key binding to single keys.
    """
    problems: list[str] = []
    actions = [b.action for b in base]
    changed: dict[str, KeyBinding] = {}
    for action, value in overrides.items():
        if action not in actions:
            close = difflib.get_close_matches(action, actions, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"[keys] {action}: there is no such action{hint}; ignored.")
            continue
        default = base[action]
        keys, bad = _parse_keys(action, value, default.is_chord)
        problems.extend(bad)
        if keys:
            changed[action] = replace(default, keys=keys)
        elif not bad:
            problems.append(f"[keys] {action}: no keys given; kept {default.label!r}.")
    while True:
        keymap = Keymap(tuple(changed.get(b.action, b) for b in base))
        clash = next(
            (c for c in conflicts(keymap) if {c.first.action, c.second.action} & set(changed)), None
        )
        if clash is None:
            return keymap, problems
        # The override given last loses; a default never loses to an override.
        order = [*changed]
        pair = sorted(
            (clash.first, clash.second),
            key=lambda b: order.index(b.action) if b.action in changed else -1,
        )
        other, loser = pair
        del changed[loser.action]
        problems.append(
            f"[keys] {loser.action}: {key_label(_clash(loser, other) or clash.key)!r} is already "
            f"used by {other.action} "
            f"({SCOPES[other.scope].lower()}); kept {base[loser.action].label!r}."
        )


def load_overrides(path: Path | None = None) -> tuple[Keymap, list[str]]:
    """The default keymap with the `[keys]` table of the config file at `path` applied (the
    user's config.toml when None).

    A missing or unreadable file gives the defaults; every problem is a sentence to show the user.
    """
    settings, problems = config.load_config(path)
    keymap, key_problems = apply_overrides(DEFAULT_KEYMAP, settings.keys)
    return keymap, problems + key_problems


def grouped(keymap: Keymap) -> list[tuple[str, tuple[KeyBinding, ...]]]:
    """`(scope title, bindings)` for each scope that has bindings, in `SCOPES` order: the layout
    of the help screen and of the docs."""
    groups = ((title, keymap.in_scope(scope)) for scope, title in SCOPES.items())
    return [(title, bindings) for title, bindings in groups if bindings]


def markdown_table(keymap: Keymap) -> str:
    """The keymap as a Markdown table for the docs, grouped by scope in `SCOPES` order."""
    lines = ["| keys | action | meaning | where |", "| --- | --- | --- | --- |"]
    for title, bindings in grouped(keymap):
        for b in bindings:
            keys = " / ".join(_code(key_label(k)) for k in b.keys)
            lines.append(f"| {keys} | `{b.action}` | {b.description} | {title} |")
    return "\n".join(lines) + "\n"


def _code(text: str) -> str:
    text = text.replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


class ChordStep(NamedTuple):
    """What one key did to the chord machine."""

    kind: Literal["action", "pending", "passthrough"]
    action: str = ""


PENDING = ChordStep("pending")
PASSTHROUGH = ChordStep("passthrough")


class ChordMachine:
    """Turns key presses into chord actions (`z z`, `z h`, ...), which Textual cannot bind.

    Feed it every key the app would otherwise handle as a binding. `pending` means the key
    started (or continued) a chord and must be swallowed; `action` means a chord completed;
    `passthrough` means the key is not part of a chord and should be handled normally. A chord
    whose next key does not arrive within `timeout` seconds is dropped. A key that breaks a
    pending chord is judged afresh, so a stray `z` never eats the next key.
    """

    def __init__(
        self, chords: Mapping[tuple[str, ...], str], timeout: float = CHORD_TIMEOUT_S
    ) -> None:
        self._chords = {tuple(_conflict_form(k) for k in c): a for c, a in chords.items()}
        self._prefixes = {c[:i] for c in self._chords for i in range(1, len(c))}
        self._timeout = timeout
        self._pending: tuple[str, ...] = ()
        self._last = 0.0

    @property
    def pending(self) -> tuple[str, ...]:
        """The keys of a started chord (empty when none is waiting), e.g. for a status hint."""
        return self._pending

    def feed(self, key: str, now: float) -> ChordStep:
        """Take one key (Textual's `event.key` or table notation) pressed at `now` seconds."""
        if self._pending and now - self._last > self._timeout:
            self._pending = ()
        form = _conflict_form(canonical_key(key) or key)
        candidates = [(*self._pending, form), (form,)] if self._pending else [(form,)]
        for sequence in candidates:
            if sequence in self._chords:
                self._pending = ()
                return ChordStep("action", self._chords[sequence])
            if sequence in self._prefixes:
                self._pending, self._last = sequence, now
                return PENDING
        self._pending = ()
        return PASSTHROUGH
