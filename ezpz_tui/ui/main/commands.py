"""What the command palette offers over the main screen (``ctrl+p`` or ``:``).

Every action of the key table, by its description and its name, with its keys (``palette``'s
``keymap_commands``); then, for the runs of the outputs directory, "Open run …", "Attach to
run …" and "Compare with run …"; then "Theme …" for every theme, kept as the ``ctrl+x`` picker
keeps one (and remembered in config.toml).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ezpz_tui.ui.palette import PaletteCommand, keymap_commands
from ezpz_tui.ui.screens.theme_picker import keep_theme
from ezpz_tui.ui.widgets.runs import RunsPanel

if TYPE_CHECKING:
    from textual.screen import Screen

    from ezpz_tui.core.runs.store import RunSummary
    from ezpz_tui.keymap.table import Keymap

RUNS_OFFERED = 50
"""The newest runs the palette names (open, attach, compare); older ones are in the runs list."""


def main_commands(
    screen: Screen[None],
    keymap: Keymap,
    listed: Sequence[RunSummary],
    open_run: Callable[[Path], Awaitable[None]],
) -> Iterator[PaletteCommand]:
    """The palette's commands over ``screen`` (which ``open_run`` opens runs in) with the runs
    ``listed``, in the order it lists them before typing."""
    yield from keymap_commands(keymap, screen)
    runs = listed[:RUNS_OFFERED]
    for run in runs:
        yield PaletteCommand(f"Open run {run.run_id}", run.state, partial(open_run, run.path))
    for run in runs:
        yield PaletteCommand(
            f"Attach to run {run.run_id}",
            f"{run.state}; follow its logs and metrics, read-only",
            partial(open_run, run.path),
        )
    for run in runs:
        yield PaletteCommand(
            f"Compare with run {run.run_id}",
            "overlay its metrics on the plots (again: remove it)",
            partial(screen.post_message, RunsPanel.Compare(run.path)),
        )
    for name in sorted(screen.app.available_themes):
        yield PaletteCommand(
            f"Theme {name}", "use it and remember it", partial(keep_theme, screen.app, name)
        )
