"""Chords (`z z`, `z h`, ...): key sequences Textual cannot bind, run by a small machine."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple

from ezpz_tui.keymap.keys import canonical_key, conflict_form

CHORD_TIMEOUT_S = 1.0
"""How long the first key of a chord waits for the second (vim's default is one second)."""


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
        self._chords = {tuple(conflict_form(k) for k in c): a for c, a in chords.items()}
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
        form = conflict_form(canonical_key(key) or key)
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
