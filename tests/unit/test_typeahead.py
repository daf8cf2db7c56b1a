"""The type-ahead keeper on its own: what it keeps, the order it gives keys back (one at a time,
each once the one before has landed), its limits."""

from __future__ import annotations

from collections.abc import Callable

from textual import events

from ezpz_tui.ui.typeahead import FLIGHT_LIMIT_S, HOLD_LIMIT_S, TypeAhead


class Keeper:
    def __init__(self) -> None:
        self.posted: list[events.Key | events.Paste] = []
        self.timers: list[tuple[float, Callable[[], None]]] = []
        self.soon: list[Callable[[], None]] = []
        self.typeahead = TypeAhead(
            self.posted.append,
            lambda s, c: self.timers.append((s, c)),
            lambda node, call: self.soon.append(call),
        )

    def arrive(self, typed: events.Key | events.Paste) -> bool:
        """What the app does with ``typed`` coming in: False when kept; else it is sent to a
        widget that takes it, and lands."""
        if self.typeahead.keep(typed):
            return False
        if isinstance(typed, events.Key):
            self.typeahead.sending(typed, None)
            typed.stop()
            self.typeahead.reached(typed)
        else:
            self.typeahead.landed(typed)
        while self.soon:
            self.soon.pop(0)()
        return True

    def deliver(self) -> None:
        """Let every key posted back arrive, as the app's queue does."""
        done = 0
        while done < len(self.posted):
            assert self.arrive(self.posted[done]), "a key given back was kept again"
            done += 1

    def keys(self) -> list[str]:
        return [e.key if isinstance(e, events.Key) else f"paste:{e.text}" for e in self.posted]


def key(name: str) -> events.Key:
    return events.Key(name, name)


def test_nothing_is_kept_without_a_hold() -> None:
    k = Keeper()
    assert not k.typeahead.keep(key("t"))
    assert k.posted == []


def test_kept_keys_come_back_in_order_when_the_last_hold_ends() -> None:
    k = Keeper()
    k.typeahead.hold("start-up")
    k.typeahead.hold("dialog")
    for typed in (key("j"), key("t"), events.Paste("train.py")):
        assert k.typeahead.keep(typed)
    assert not k.typeahead.keep(events.Focus())  # not typed: not kept
    k.typeahead.release("start-up")
    assert k.posted == [], "one hold is still on"
    k.typeahead.release("dialog")
    assert k.keys() == ["j"], "one at a time: t waits for j to land"
    k.deliver()
    assert k.keys() == ["j", "t", "paste:train.py"]
    assert not k.typeahead.holding
    k.typeahead.release("dialog")  # twice: nothing more
    assert len(k.posted) == 3


def test_a_key_waits_for_the_one_in_flight_to_land() -> None:
    """``i`` then ``3``: the 3 goes only once ``i`` has come back up and its binding ran."""
    k = Keeper()
    i, three = key("i"), key("3")
    assert not k.typeahead.keep(i)
    k.typeahead.sending(i, None)
    k.typeahead.reached(i)  # not taken by the widget: on its way up
    assert k.typeahead.keep(three), "3 must wait while i is in flight"
    assert not k.typeahead.keep(_up(i)), "i itself comes back up, for its bindings"
    k.typeahead.landed(i)
    assert k.posted == [], "the next key goes after what i's binding queued"
    k.soon.pop()()
    assert k.keys() == ["3"]


def test_a_key_that_never_lands_lets_the_next_go_after_its_limit() -> None:
    k = Keeper()
    lost, after = key("x"), key("y")
    k.typeahead.keep(lost)
    k.typeahead.sending(lost, None)
    assert k.typeahead.keep(after)
    (limit_s, expire), *_ = k.timers
    assert limit_s == FLIGHT_LIMIT_S
    expire()
    k.soon.pop()()
    assert k.keys() == ["y"]


def _up(typed: events.Key) -> events.Key:
    """``typed`` as it comes back up to the app from the widget it was sent to."""
    typed._forwarded = True
    return typed


def test_keys_given_back_are_fresh_events() -> None:
    """A kept key may have bubbled already; its copy starts from the focused widget again."""
    k = Keeper()
    k.typeahead.hold("x")
    typed = key("t")
    k.typeahead.keep(typed)
    k.typeahead.release("x")
    (again,) = k.posted
    assert again is not typed and (again.key, again.character) == ("t", "t")


def test_every_hold_has_a_limit_unless_taken_before_timers_run() -> None:
    k = Keeper()
    k.typeahead.hold("dialog")
    k.typeahead.hold("start-up", limit_s=None)
    assert [s for s, _ in k.timers] == [HOLD_LIMIT_S]
    k.typeahead.keep(key("q"))
    k.typeahead.release("start-up")
    (_, expire) = k.timers[0]
    expire()  # the dialog's hold was never released: its limit lets the keys go
    assert k.keys() == ["q"]
