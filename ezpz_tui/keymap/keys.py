"""Key notation: one canonical spelling per key, so the table, the user's overrides and the keys
Textual reports compare equal where they must.

- a printable character is written as itself: `j`, `G`, `?`, `:`, `]`;
- other keys use Textual's names: `down`, `escape`, `enter`, `tab`, `pageup`, `space`, `comma`;
- modifiers are joined with `+`: `ctrl+d`, `shift+tab`, `alt+j`;
- a chord (keys pressed one after the other) separates its steps with a space: `z z`, `z h`.

Textual's own names for punctuation (`question_mark`, `colon`, ...) are accepted too.
"""

from __future__ import annotations

import string
import unicodedata

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

_TERMINAL_ALIASES = {
    "ctrl+i": "tab",
    "ctrl+m": "enter",
    "ctrl+[": "escape",
    "ctrl+h": "backspace",
}
"""Keys a terminal cannot tell apart (ctrl+i sends the same byte as Tab, also inside tmux;
ctrl+h the byte of Backspace, which Textual reports as `backspace`), so binding both to
different actions is a conflict even though they are spelled differently."""


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


def conflict_form(key: str) -> str:
    """The key as the terminal sends it: keys it cannot tell apart share one form."""
    return _TERMINAL_ALIASES.get(key, key)
