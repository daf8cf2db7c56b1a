"""Keys typed ahead through Pilot: posted to the app in one go, none waiting for the one
before, as a terminal delivers a burst of keys (Pilot's ``press`` waits after each key, which
would hide the race)."""

from __future__ import annotations

from pathlib import Path

from textual import events
from textual.command import CommandPalette
from textual.widgets import Input, TabbedContent

from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.launch_form import LaunchForm
from tests.functional.test_app import SIZE, make_app, settle
from tests.pilots import until


def burst(app: EzpzApp, *keys: str) -> None:
    for key in keys:
        app.post_message(events.Key(key, key if len(key) == 1 else None))


async def test_a_key_typed_before_start_up_acts(tmp_path: Path) -> None:
    """``t`` before the regions exist: once start-up is over it shows the next tab (the Run
    tab, mounted for it) instead of finding no binding and being dropped."""
    app = make_app(tmp_path / "outputs")
    async with app.run_test(size=SIZE) as pilot:
        assert not app.main.started, "the test must type before start-up is over"
        burst(app, "t")
        await settle(pilot)
        await until(pilot, lambda: app.main.query_one(TabbedContent).active == "tab-run", "t", 30)


async def test_the_palette_gets_what_is_typed_right_after_opening_it(tmp_path: Path) -> None:
    app = make_app(tmp_path / "outputs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        burst(app, "colon", *"relaunch")
        await until(pilot, lambda: CommandPalette.is_open(app), "the palette", 30)
        field = app.screen.query_one(Input)
        await until(
            pilot, lambda: field.value == "relaunch", f"the query (now {field.value!r})", 30
        )


async def test_text_typed_into_the_form_before_the_plan_is_there_is_kept(tmp_path: Path) -> None:
    """The prefilled plan arrives with the allocation; what was typed first is applied after
    it, not overwritten by it."""
    app = make_app(tmp_path / "outputs")
    async with app.run_test(size=SIZE) as pilot:
        assert not app.main.started
        burst(app, "J", "i", "ctrl+e", "ctrl+u", "3", "escape")  # i: edit TP, the form's cursor
        await settle(pilot)
        form = app.main.query_one(LaunchForm)
        await until(pilot, lambda: form.query_one("#tp", Input).value == "3", "TP 3", 30)
