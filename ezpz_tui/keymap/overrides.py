"""The user's `[keys]` table applied to the default keymap, and the conflicts it must not create.

Never raises: an unknown action, a bad key name or a key that would collide with another binding
becomes one plain sentence for the user, and the affected action keeps its default keys.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from ezpz_tui import config
from ezpz_tui.keymap.keys import canonical_key, conflict_form, key_label
from ezpz_tui.keymap.table import CONTEXTS, DEFAULT_KEYMAP, SCOPES, KeyBinding, Keymap


class Conflict(NamedTuple):
    """Two bindings that would fight over a key in the same context."""

    first: KeyBinding
    second: KeyBinding
    key: str


def _shares_context(a: str, b: str) -> bool:
    return any(a in ctx and b in ctx for ctx in CONTEXTS)


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
    a_keys = {tuple(map(conflict_form, k.split(" "))): k for k in a.keys}
    for other in b.keys:
        steps = tuple(map(conflict_form, other.split(" ")))
        for length in range(1, len(steps) + 1):
            if steps[:length] in a_keys:
                return a_keys[steps[:length]]
    return ""


def _parse_keys(
    action: str, value: object, kinds: frozenset[str]
) -> tuple[tuple[str, ...], list[str]]:
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
        if ("chord" if len(steps) > 1 else "single") not in kinds:
            kind = "two-key chords such as 'z z'" if "chord" in kinds else "single keys"
            problems.append(f"[keys] {action}: {text.strip()!r} ignored; this action takes {kind}.")
            continue
        key = " ".join(c for c in canon if c)
        if key not in keys:
            keys.append(key)
    return tuple(keys), problems


def apply_overrides(base: Keymap, overrides: Mapping[str, object]) -> tuple[Keymap, list[str]]:
    """`base` with the user's `[keys]` table applied, and a plain sentence for every problem.

    An action takes the kinds of key its default row holds (single keys, chords, or both),
    because Textual can only rebind a single-key binding to single keys.
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
        keys, bad = _parse_keys(action, value, default.kinds)
        problems.extend(bad)
        if keys and default.single_keys and all(" " in k for k in keys):
            # Textual cannot unbind a binding's keys (an empty keymap entry keeps them).
            problems.append(
                f"[keys] {action}: give a single key as well as chords; kept {default.label!r}."
            )
        elif keys:
            changed[action] = replace(default, keys=keys)
        elif not bad:
            problems.append(f"[keys] {action}: no keys given; kept {default.label!r}.")
    if not changed:  # nothing to check for clashes (most configs have no [keys] at all)
        return base, problems
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
