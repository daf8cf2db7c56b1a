"""The app told to launch into outputs that cannot hold a run, and started with a config.toml
holding typos: it says why (a dialog for the launch, notifications for the config) and keeps
running.

Driven by keys through Pilot with a fixture allocation; the outputs are a real file and a real
read-only tmpfs; the config is a real file in a temporary config directory.
"""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Static

from ezpz_tui.core.checking.check import Check
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.screens.help import HelpScreen
from ezpz_tui.ui.screens.message import MessageScreen
from tests.fixtures.mounts import make_read_only, tmpfs
from tests.pilots import FIXED, LOCAL, started, text_of, until, workers_done

SIZE = (120, 40)
CHECKS = [Check("python", "ok", "3.11 in the venv")]


def make_app(outputs: Path) -> EzpzApp:
    return EzpzApp(outputs=outputs, alloc=LOCAL, clock=lambda: FIXED, checks=CHECKS)


def messages(app: EzpzApp, title: str | None = None) -> list[str]:
    return [n.message for n in app._notifications if title is None or n.title == title]


async def launch_and_read_why(pilot: Pilot[None]) -> str:
    """Press the launch key and read the dialog that says why nothing started; after Esc
    closes it, the app must still answer keys."""
    app = pilot.app
    assert isinstance(app, EzpzApp)
    await started(pilot)
    await pilot.press("r")
    await until(pilot, lambda: isinstance(app.screen, MessageScreen), "the dialog", 20)
    await workers_done(pilot)
    dialog = app.screen
    assert isinstance(dialog, MessageScreen)
    assert text_of(dialog.query_one("#title", Static)) == "Not launched"
    why = text_of(dialog.query_one("#message", Static))
    assert why == dialog.message
    assert text_of(dialog.query_one("#keys", Static)) == "esc: close"
    assert app.is_running and app.return_code is None
    await pilot.press("escape")
    await pilot.pause()
    assert app.screen is app.main, "Esc closes the dialog"
    await pilot.press("question_mark")
    await pilot.pause()
    assert isinstance(app.screen, HelpScreen), "the app still answers keys"
    return why


async def test_launch_into_a_file_says_why_and_keeps_running(tmp_path: Path) -> None:
    outputs = tmp_path / "out"
    outputs.write_text("a file")
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        why = await launch_and_read_why(pilot)
        assert why == f"cannot create a run in {outputs}: not a directory"
        assert app.main.session is not None and app.main.session.current is None
    assert outputs.read_text() == "a file"


async def test_launch_into_a_read_only_dir_says_why(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro") as outputs:
        make_read_only(outputs)
        app = make_app(outputs)
        async with app.run_test(size=SIZE) as pilot:
            why = await launch_and_read_why(pilot)
            assert why == f"cannot create a run in {outputs}: read-only file system"


async def test_config_typos_and_an_unknown_theme_are_notified(
    tmp_path: Path, config_dir: Path
) -> None:
    path = config_dir / "config.toml"
    path.write_text('[ui]\ntheme = "ezpz-nrod"\n\n[keys]\nlanch = "e"\n\n[lanch]\nppn = 2\n')
    app = make_app(tmp_path / "outputs")
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await until(pilot, lambda: len(messages(app)) >= 3, "the config warnings", 10)
        assert messages(app) == [
            f"{path}: unknown section [lanch] (did you mean [launch]?)",
            f"{path}: [keys] lanch: there is no such action (did you mean 'launch'?); ignored.",
            f"{path}: unknown theme [ui] theme = 'ezpz-nrod' (did you mean ezpz-nord?); "
            "using the default theme.",
        ]
        assert app.theme != "ezpz-nrod" and app.is_running
