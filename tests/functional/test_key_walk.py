"""The key walk: every row of the design's key table, pressed in a Pilot session, with its effect.

The table is read from ``docs/keymap.md`` ("The design's keys"), so the page cannot promise a key
the app does not keep. ``ROWS`` says, for each
of its rows, which action of the one key table each key runs, and how to see it happen: a walk
step presses the row's keys in a state where they mean something and asserts what changed
(the focus moved, a sidebar went, a dialog closed, a cursor moved, another log shows). A design
row without a step, a key of a row that a step never pressed, or a key the key table does not
bind to the row's action fails.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import TabbedContent

from ezpz_tui.keymap.keys import canonical_key
from ezpz_tui.keymap.table import DEFAULT_KEYMAP
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.screens.help import HelpScreen
from ezpz_tui.ui.screens.search import SearchScreen
from ezpz_tui.ui.screens.theme_picker import ThemePicker
from ezpz_tui.ui.widgets.logview import LogView
from ezpz_tui.ui.widgets.ranks import RankList
from ezpz_tui.ui.widgets.runs import RunsPanel
from ezpz_tui.ui.widgets.table import VimTable
from tests.fixtures.runs import POLARIS_HOSTS, make_run
from tests.pilots import FIXED, LOCAL, started, until, workers_done

KEYMAP_DOC = Path(__file__).parents[2] / "docs" / "keymap.md"


def design_rows() -> list[str]:
    """The keys cell of every row of the design's table in ``docs/keymap.md`` (the header and
    rule left out)."""
    section = KEYMAP_DOC.read_text().split("## The design's keys", 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("| ")][2:]
    return [line.split("|")[1].strip() for line in lines]


# keys cell -> {key as the key table writes it (a chord with a space): action}
ROWS: dict[str, dict[str, str]] = {
    "`j` / `k`, arrows": {
        "j": "cursor_down",
        "k": "cursor_up",
        "down": "cursor_down",
        "up": "cursor_up",
    },
    "`g` / `G`": {"g": "first", "G": "last"},
    "`zz`": {"z z": "center"},
    "`h` / `l`": {"h": "region_left", "l": "region_right"},
    "`]` / `[`": {"]": "next_heading", "[": "previous_heading"},
    "`}` / `{`": {"}": "next_block", "{": "previous_block"},
    "`ctrl+d` / `ctrl+u`": {"ctrl+d": "half_page_down", "ctrl+u": "half_page_up"},
    "`zh` / `zl`": {"z h": "toggle_left_sidebar", "z l": "toggle_right_sidebar"},
    "`H` `J` `K` `L`": {"H": "focus_left", "J": "focus_main", "K": "focus_top", "L": "focus_right"},
    "`ctrl+p` or `:`": {"ctrl+p": "command_palette", ":": "command_palette"},
    "`ctrl+x`": {"ctrl+x": "pick_theme"},
    "`?`": {"?": "show_help"},
    "`esc`": {"escape": "close"},
    "`ctrl+o` / `ctrl+i`": {"ctrl+o": "history_back", "ctrl+i": "history_forward"},
    "`/`, `n` / `N`": {"/": "search", "n": "next_match", "N": "previous_match"},
    "`zj` / `zk`": {"z j": "focus_main", "z k": "focus_top"},
    # ctrl+h reaches Textual as backspace from most terminals: both are walked.
    "`ctrl+h` / `ctrl+l`": {
        "ctrl+h": "focus_left",
        "backspace": "focus_left",
        "ctrl+l": "focus_right",
    },
    "`ctrl+j` / `ctrl+k`": {"ctrl+j": "focus_main", "ctrl+k": "focus_top"},
    "`C` / `E` (shift)": {"C": "collapse_all", "E": "expand_all"},
    "`ctrl+n` / `ctrl+b`": {"ctrl+n": "next_document", "ctrl+b": "previous_document"},
    "`esc`, `ctrl+c`": {"escape": "close", "ctrl+c": "close"},
}

SIZE = (120, 40)
# Newest first in the runs list: failed runs (the list's headings) at rows 1 and 3.
RUNS = [("succeeded", None), ("failed", 1), ("succeeded", None), ("failed", 3)]


def test_every_design_row_has_a_walk_step_and_its_keys_are_bound() -> None:
    assert list(ROWS) == design_rows(), "one walk step per row of docs/keymap.md's table, in order"
    for row, keys in ROWS.items():
        for key, action in keys.items():
            assert all(canonical_key(s) == s for s in key.split(" ")), key
            assert key in DEFAULT_KEYMAP[action].keys, f"{row}: {key} does not run {action}"
    walked = {row for row in ROWS if row in STEPS}
    assert walked == set(ROWS), f"rows without a walk step: {set(ROWS) - walked}"


class Walk:
    """The app under the walk, and the keys pressed so far in the current step."""

    def __init__(self, pilot: Pilot[None]) -> None:
        self.pilot = pilot
        self.app: EzpzApp = pilot.app  # type: ignore[assignment]
        self.pressed: set[str] = set()

    async def press(self, *keys: str) -> None:
        """Press ``keys`` one after the other; a chord is two keys (``"z", "j"``)."""
        for before, key in zip(("", *keys), keys, strict=False):
            self.pressed.update({key, f"{before} {key}"})
        await self.pilot.press(*keys)
        await self.pilot.pause()

    def region(self, name: str) -> Widget:
        return self.app.query_one(f"#{name}")

    def focus_in(self, name: str) -> bool:
        focused = self.app.focused
        return focused is not None and self.region(name) in focused.ancestors_with_self

    async def reset(self) -> None:
        """Back to the main screen, the Launch tab, both sidebars shown, the form focused."""
        while self.app.screen is not self.app.main:
            self.app.pop_screen()
            await self.pilot.pause()
        self.app.query_one(TabbedContent).active = "tab-launch"
        for side in ("left", "right"):
            self.region(side).display = True
        self.app.main.form.focus()
        await self.pilot.pause()

    @property
    def runs(self) -> VimTable:
        return self.app.query_one("#runs-table", VimTable)

    async def open_run(self, row: int) -> tuple[RankList, LogView]:
        """Open the run at ``row`` of the runs list; focus its log, rank 0's lines shown."""
        await self.press("L", "g")
        for _ in range(row):
            await self.pilot.press("j")
        await self.pilot.press("enter")
        panel = self.app.main.run_panel
        await until(self.pilot, lambda: bool(panel.log.lines), "the run's log", 10)
        panel.log.focus()
        await self.pilot.pause()
        return panel.ranks, panel.log


Step = Callable[[Walk], Awaitable[None]]


async def arrows_and_jk(w: Walk) -> None:
    await w.press("L", "g")
    for down, up in (("j", "k"), ("down", "up")):
        await w.press(down)
        assert w.runs.cursor_row == 1, down
        await w.press(up)
        assert w.runs.cursor_row == 0, up


async def first_and_last(w: Walk) -> None:
    await w.press("L", "G")
    assert w.runs.cursor_row == len(RUNS) - 1
    await w.press("g")
    assert w.runs.cursor_row == 0


async def centre(w: Walk) -> None:
    _, log = await w.open_run(0)
    await w.pilot.press("g", *["}"] * 8)  # row 40: the view scrolled just enough to show it
    before = log.scroll_y
    assert log.cursor == 40 and before > 0, f"{len(log.lines)} lines in {log.size.height} rows"
    await w.press("z", "z")
    assert log.scroll_y > before, "the line moved up to the middle of the view"
    assert abs(log.cursor - log.scroll_y - log.size.height // 2) <= 1


async def left_and_right(w: Walk) -> None:
    await w.press("J", "h")
    assert w.focus_in("left")
    await w.press("l")
    assert w.focus_in("main")
    await w.press("l")
    assert w.focus_in("right")


async def headings(w: Walk) -> None:
    await w.press("L", "g", "]")
    assert w.runs.cursor_row == 1, "the first failed run"
    await w.press("]")
    assert w.runs.cursor_row == 3
    await w.press("[")
    assert w.runs.cursor_row == 1


async def blocks(w: Walk) -> None:
    _, log = await w.open_run(0)
    await w.pilot.press("g")
    await w.press("}")
    assert log.cursor == 5
    await w.press("{")
    assert log.cursor == 0


async def half_pages(w: Walk) -> None:
    _, log = await w.open_run(0)
    await w.pilot.press("g")
    await w.press("ctrl+d")
    half = log.cursor
    assert half >= 3
    await w.press("ctrl+u")
    assert log.cursor == 0


async def sidebars(w: Walk) -> None:
    for chord, side in (("h", "left"), ("l", "right")):
        await w.press("z", chord)
        assert not w.region(side).display, f"z {chord} hides"
        await w.press("z", chord)
        assert w.region(side).display, f"z {chord} shows"


async def focus_letters(w: Walk) -> None:
    for key, region in (("H", "left"), ("K", "topology"), ("L", "right"), ("J", "main")):
        await w.press(key)
        assert w.focus_in(region), key


async def palette(w: Walk) -> None:
    for key in ("ctrl+p", ":"):
        await w.press(key)
        assert CommandPalette.is_open(w.app), key
        await w.pilot.press("escape")
        assert not CommandPalette.is_open(w.app)


async def theme_picker(w: Walk) -> None:
    await w.press("ctrl+x")
    assert isinstance(w.app.screen, ThemePicker)


async def show_help(w: Walk) -> None:
    await w.press("?")
    assert isinstance(w.app.screen, HelpScreen)


async def escape_closes(w: Walk) -> None:
    await w.pilot.press("?")
    await w.press("escape")
    assert w.app.screen is w.app.main


async def history(w: Walk) -> None:
    await w.pilot.press("H", "L")
    await w.press("ctrl+o")
    assert w.focus_in("left")
    await w.press("ctrl+i")
    assert w.focus_in("right")


async def search(w: Walk) -> None:
    await w.pilot.press("L", "g")
    await w.press("/")
    assert isinstance(w.app.screen, SearchScreen)
    await w.pilot.press(*"failed", "enter")
    assert w.runs.cursor_row == 1
    await w.press("n")
    assert w.runs.cursor_row == 3
    await w.press("N")
    assert w.runs.cursor_row == 1


async def z_focus(w: Walk) -> None:
    await w.pilot.press("L")
    await w.press("z", "j")
    assert w.focus_in("main")
    await w.press("z", "k")
    assert w.focus_in("topology")


async def ctrl_sidebars(w: Walk) -> None:
    for key, region in (("ctrl+h", "left"), ("ctrl+l", "right"), ("backspace", "left")):
        await w.press(key)
        assert w.focus_in(region), key
    w.region("right").display = False
    await w.press("ctrl+l")
    assert w.region("right").display and w.focus_in("right"), "a hidden sidebar shows"


async def ctrl_focus(w: Walk) -> None:
    await w.pilot.press("L")
    await w.press("ctrl+j")
    assert w.focus_in("main")
    await w.press("ctrl+k")
    assert w.focus_in("topology")


async def collapse_expand(w: Walk) -> None:
    ranks, _ = await w.open_run(0)
    ranks.focus()
    await w.press("C")
    assert ranks.collapsed == {host.split(".")[0] for host in POLARIS_HOSTS}
    await w.press("E")
    assert ranks.collapsed == set()


async def documents(w: Walk) -> None:
    _, log = await w.open_run(0)
    assert log.rank == 0
    await w.press("ctrl+n")
    assert log.rank == 1, "the next rank's log"
    await w.press("ctrl+b", "ctrl+b")
    assert log.rank == 3, "before rank 0 comes the last rank"
    # Outside the Run tab's views a document is a run: the next run of the list, same tab.
    main = w.app.main
    first = main.opened.path if main.opened else None
    await w.pilot.press("t", "J")  # the Metrics tab
    await w.press("ctrl+n")
    await until(w.pilot, lambda: main.opened is not None and main.opened.path != first, "run", 5)
    assert main.opened is not None and main.opened.path == main.query_one(RunsPanel).runs[1].path
    assert w.app.query_one(TabbedContent).active == "tab-metrics"
    await w.press("ctrl+b")
    assert main.opened.path == first


async def ctrl_c_closes(w: Walk) -> None:
    """Every kind of dialog: ours (the help, the theme picker, a prompt), Textual's palette."""
    theme = w.app.theme
    for opener in ("?", "ctrl+x", "/", ":"):
        await w.pilot.press("L", opener)
        assert w.app.screen is not w.app.main, opener
        if opener == "ctrl+x":
            await w.pilot.press("j")  # a theme previewed
        await w.press("ctrl+c")
        assert w.app.screen is w.app.main, f"ctrl+c closes what {opener} opened"
    assert w.app.theme == theme, "closing the picker put the theme back"
    await w.pilot.press("?")
    await w.press("escape")
    assert w.app.screen is w.app.main
    # Outside a dialog ctrl+c keeps Textual's meaning: nothing closes, the app runs on.
    await w.press("ctrl+c")
    assert w.app.is_running and w.app.screen is w.app.main


STEPS: dict[str, Step] = dict(
    zip(
        ROWS,
        (
            arrows_and_jk,
            first_and_last,
            centre,
            left_and_right,
            headings,
            blocks,
            half_pages,
            sidebars,
            focus_letters,
            palette,
            theme_picker,
            show_help,
            escape_closes,
            history,
            search,
            z_focus,
            ctrl_sidebars,
            ctrl_focus,
            collapse_expand,
            documents,
            ctrl_c_closes,
        ),
        strict=True,
    )
)
"""The walk step of each row of ``ROWS``, in its order."""


@pytest.fixture
def outputs(tmp_path: Path) -> Path:
    outputs = tmp_path / "outputs"
    for i, (state, failing) in enumerate(RUNS):
        make_run(
            outputs,
            run_id=f"20261122-1{5 - i}0000-000-tp1pp1cp1",
            state=state,
            exit_code=0 if state == "succeeded" else 1,
            sizes={"tp": 1},
            ranks=4,
            steps=60,
            created=FIXED - 3600.0 * (i + 1),
            failing_rank=failing,
        )
    newest = sorted(outputs.iterdir())[-1] / "logs" / "b0000" / "rank-00000.log"
    with newest.open("a") as log:  # more lines than the log view's rows: zz has to scroll
        log.writelines(f"note {i}\n" for i in range(80))
    return outputs


async def test_walk_every_row_of_the_design_key_table(outputs: Path) -> None:
    app = EzpzApp(outputs=outputs, alloc=LOCAL, clock=lambda: FIXED, checks=[])
    failures: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await workers_done(pilot)
        # Up to 0.7 s on a loaded machine.
        await until(pilot, lambda: len(app.main.query_one(RunsPanel).runs) == 4, "runs", 10)
        walk = Walk(pilot)
        for row, keys in ROWS.items():
            await walk.reset()
            walk.pressed.clear()
            try:
                await STEPS[row](walk)
            except AssertionError as err:
                failures.append(f"{row}: {err}")
                continue
            unpressed = set(keys) - walk.pressed
            if unpressed:
                failures.append(f"{row}: never pressed {sorted(unpressed)}")
    assert failures == [], "\n".join(failures)
