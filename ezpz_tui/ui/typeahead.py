"""Keys typed ahead: each acts where the keys before it left the screen, none is lost.

A vim user types ``ezpz-tui attach RUN`` and ``t`` in one breath, ``R`` and ``y`` before the
question shows, ``i`` and a number into the form. Textual hands every key to the focused widget
as it reads it, while the bindings run only when the key comes back up to the app unhandled:
in a burst, ``y`` is already with the main screen when ``R`` pushes its question, and the
number with the form before ``i`` has focused a field. Before the main screen has mounted its
regions a key finds no binding at all, and a tab chosen a moment later (the attached run's Run
tab) undoes what it did.

So the app sends one key at a time: the next goes once the one before has landed (a widget took
it, or it came back up and its binding ran, or a moment has passed) and the widgets it went
through, up to the screen, have read what it made them post (Enter in a field submits it with a
message: the next key goes after the field's screen has taken the answer), and while something the
person is waiting for is still on its way (start-up, a dialog being pushed, a worker whose
answer opens a dialog or a run) the keys are kept. Every hold is released by whoever took it or
by its time limit, so a hold that is never released costs a delay, never the keyboard.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import events

Typed = events.Key | events.Paste
HOLD_LIMIT_S = 10.0  # longer than any start-up or dialog takes; a lost release costs this
FLIGHT_LIMIT_S = 1.0  # a key stopped on its way up (a container handled it) lands by then


class TypeAhead:
    """The holds in force, the key in flight and the keys kept meanwhile.

    ``post`` hands a key back to the app (its message queue, behind anything already there);
    ``later(seconds, call)`` runs ``call`` after ``seconds`` (the app's timer);
    ``settle(node, call)`` runs ``call`` once ``node`` and each node above it, up to the app,
    has read what is queued for it now (a message a binding posted, a focus it moved)."""

    def __init__(
        self,
        post: Callable[[Typed], object],
        later: Callable[[float, Callable[[], None]], object],
        settle: Callable[[object, Callable[[], None]], object],
    ) -> None:
        self._post = post
        self._later = later
        self._settle = settle
        self._holds: set[object] = set()
        self._kept: list[Typed] = []
        self._flying: events.Key | None = None  # sent to a widget, not landed yet
        self._sent_to: object = None  # where the last key went
        self._next_up: Typed | None = None  # the kept key posted again, on its way in

    @property
    def holding(self) -> bool:
        return bool(self._holds)

    def hold(self, why: object, limit_s: float | None = HOLD_LIMIT_S) -> None:
        """Keep the keys that arrive from now on until ``why`` is released, or ``limit_s``
        (None: no limit yet, for a hold taken before the app's timers run)."""
        self._holds.add(why)
        if limit_s is not None:
            self._later(limit_s, lambda: self.release(why))

    def release(self, why: object) -> None:
        """``why`` has arrived; when nothing else is on its way the kept keys go, in order,
        one at a time. Releasing twice, or what was never held, does nothing."""
        self._holds.discard(why)
        self._advance()

    def keep(self, event: events.Event) -> bool:
        """Whether ``event`` is kept for later: a key or a paste while something is held, or
        while keys before it have not landed."""
        if not isinstance(event, (events.Key, events.Paste)):
            return False
        if self._holds:
            if event is self._flying:  # back up during a hold: its binding waits too
                self._flying = None
            if event is self._next_up:
                self._next_up = None
                self._kept.insert(0, event)
            else:
                self._kept.append(event)
            return True
        if event is self._next_up:
            self._next_up = None
            return False
        if event.is_forwarded:
            return False  # the key in flight, back up for its bindings
        if self._flying is not None or self._next_up is not None or self._kept:
            self._kept.append(event)
            return True
        return False

    def sending(self, key: events.Key, to: object) -> None:
        """``key`` goes to ``to`` (the focused widget) now: the next waits until it lands."""
        self._flying = key
        self._sent_to = to
        self._later(FLIGHT_LIMIT_S, lambda: self.landed(key))

    def reached(self, key: events.Key) -> None:
        """The widget ``key`` was sent to has read it: it lands here if the widget took it,
        else on its way up (:meth:`landed`, called by the app after its bindings)."""
        if key._stop_propagation:
            self.landed(key)

    def landed(self, typed: Typed) -> None:
        """``typed`` has done what it does; the next kept key goes after what that queued."""
        if typed is self._flying or isinstance(typed, events.Paste):
            self._flying = None
            self._settle(self._sent_to, self._advance)

    def _advance(self) -> None:
        if self._holds or self._flying or self._next_up or not self._kept:
            return
        self._next_up = _fresh(self._kept.pop(0))
        self._post(self._next_up)


def _fresh(typed: Typed) -> Typed:
    """A new event for ``typed``: a kept key may have been sent down already (it came back up
    unhandled); the copy starts again from whatever is focused now.

    Sent by nobody, as the terminal's keys are: a message made while a widget's callback runs
    names that widget its sender, and Textual stops a message from bubbling past its sender's
    child, so the key would never come back up to the app, where the bindings are looked up."""
    fresh: Typed
    if isinstance(typed, events.Key):
        fresh = events.Key(typed.key, typed.character)
    else:
        fresh = events.Paste(typed.text)
    fresh._sender = None
    return fresh
