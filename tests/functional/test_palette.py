"""The command palette finds every action of the key table by name, shows its keys and runs it;
and offers the runs of the outputs directory (open, attach, compare) and every theme."""

from __future__ import annotations

from pathlib import Path

from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input, TabbedContent

from ezpz_tui import config
from ezpz_tui.keymap.table import DEFAULT_KEYMAP
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.palette import PALETTE_LEFT_OUT, keymap_commands
from ezpz_tui.ui.widgets.runs import RunsPanel
from tests.functional.test_app import SIZE, make_app, many_runs, settle, type_into
from tests.pilots import until


def prompts(app: EzpzApp) -> list[str]:
    commands = app.screen.query_one(CommandList)
    return [str(commands.get_option_at_index(i).prompt) for i in range(commands.option_count)]


async def search(pilot: Pilot[None], text: str) -> list[str]:
    """Open the palette, type ``text``; the prompts of the hits (title, then the help line)."""
    app: EzpzApp = pilot.app  # type: ignore[assignment]
    if not CommandPalette.is_open(app):
        await pilot.press("colon")
    palette_input = app.screen.query_one(Input)
    palette_input.value = ""
    await pilot.press(*text)
    await pilot.pause(0.3)  # the search has finished, the last query's hits are gone
    commands = app.screen.query_one(CommandList)
    await until(pilot, lambda: commands.option_count > 0, f"hits for {text!r}", 5)
    return prompts(app)


async def test_relaunch_typed_is_found_with_its_key_and_enter_runs_it(tmp_path: Path) -> None:
    app = make_app(tmp_path / "outputs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await type_into(pilot, "tp", "3")  # relaunch then refuses, saying why: a visible effect
        hits = await search(pilot, "relaunch")
        relaunch = DEFAULT_KEYMAP["relaunch"]
        assert hits[0].startswith(relaunch.description), hits[0]
        assert "relaunch" in hits[0] and f"keys: {relaunch.label}" in hits[0]
        await pilot.press("enter")
        await settle(pilot)
        assert not CommandPalette.is_open(app)
        said = [n.message for n in app._notifications]
        assert any(m.startswith("Fix the plan first") for m in said), said


async def test_every_action_of_the_key_table_is_offered(tmp_path: Path) -> None:
    app = make_app(tmp_path / "outputs")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        offered = {c.name for c in keymap_commands(app.main.keymap, app.main)}
        wanted = {
            b.action.replace("_", " ")
            for b in DEFAULT_KEYMAP
            if b.scope != "dialog" and b.action not in PALETTE_LEFT_OUT
        }
        assert offered == wanted


async def test_words_find_their_actions_runs_and_themes(tmp_path: Path, config_dir: Path) -> None:
    outputs = tmp_path / "outputs"
    ids = many_runs(outputs, 2)
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await until(pilot, lambda: len(app.query_one(RunsPanel).runs) == 2, "the runs", 5)
        for word, action in (
            ("stop", "stop_run"),
            ("compare", "compare_run"),
            ("doctor", "rerun_doctor"),
        ):
            hits = await search(pilot, word)
            binding = DEFAULT_KEYMAP[action]
            assert any(
                h.startswith(binding.description) and f"keys: {binding.label}" in h for h in hits
            ), (word, hits)
        assert sum(h.startswith("Compare with run") for h in await search(pilot, "compare")) == 2
        assert sum(h.startswith("Attach to run") for h in await search(pilot, "attach")) == 2
        hits = await search(pilot, "open run")
        assert [h.split("\n")[0] for h in hits[:2]] == [f"Open run {i}" for i in ids]
        # Enter on "Theme …" uses the theme and remembers it, as the picker does.
        hits = await search(pilot, "theme ezpz-latte")
        assert hits[0].startswith("Theme ezpz-catppuccin-latte")
        await pilot.press("enter")
        await settle(pilot)
        assert app.theme == "ezpz-catppuccin-latte"
        # An action run from the palette acts where its key would: the runs list's compare.
        await pilot.press("L")
        hits = await search(pilot, "overlay this run")
        await pilot.press("enter")
        runs = app.query_one(RunsPanel)
        await until(pilot, lambda: len(runs.compared) == 1, "the run overlaid", 10)
        assert app.query_one(TabbedContent).active == "tab-launch"
    settings, _ = config.load_config(config_dir / "config.toml")
    assert settings.theme == "ezpz-catppuccin-latte"
