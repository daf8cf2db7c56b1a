"""The whole ezpz-tui app driven through Pilot: every key of the keymap, the launch form's
validation, user key overrides, and launch / relaunch / stop / quit of real local runs.

The app gets a fixture allocation (this host, no scheduler, two CPU slots), a frozen clock and
fixed doctor checks; runs on screen are fixture run directories (tests/fixtures/runs.py) or real
runs of the demo started through the real Session and mpiexec. Only keys drive the app; what is
asserted is what the person would see (focus, screens, widget state, files on disk, processes).
"""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from textual.command import CommandList, CommandPalette
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import Footer, Input, Static, TabbedContent, Tabs

from ezpz_tui import config
from ezpz_tui.core.checking.check import Check
from ezpz_tui.core.launching.plan import LaunchPlan
from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.core.session import Preview, Session
from ezpz_tui.keymap.table import DEFAULT_KEYMAP
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.messages import PreviewReady, RunsStopped
from ezpz_tui.ui.screens.confirm import ConfirmScreen
from ezpz_tui.ui.screens.help import HelpScreen
from ezpz_tui.ui.screens.search import SearchScreen
from ezpz_tui.ui.screens.theme_picker import ThemePicker
from ezpz_tui.ui.widgets.launch_form import FOLDED, LaunchForm
from ezpz_tui.ui.widgets.logview import LogView
from ezpz_tui.ui.widgets.panels import SummaryBar
from ezpz_tui.ui.widgets.runs import RunsPanel
from ezpz_tui.ui.widgets.table import VimTable
from ezpz_tui.ui.widgets.topology import TopologyGrid
from tests.fixtures.runs import make_run
from tests.pilots import FIXED, HOST, LOCAL, started, text_of, until, workers_done
from tests.procs import processes_of

SIZE = (120, 40)
FEW_CHECKS = [
    Check("python", "ok", "3.11 in the venv"),
    Check("mpi4py", "warning", "mpi4py is not installed", "pip install mpi4py"),
    Check("outputs", "error", "outputs/ is not writable", "chmod u+w outputs"),
]
# A long doctor list, so the table scrolls: not-ok checks at known rows.
NOT_OK = {7: "error", 15: "warning", 33: "warning"}
MANY_CHECKS = [
    Check(f"probe-{i:02d}", NOT_OK.get(i, "ok"), f"reason {i}", f"remedy {i}") for i in range(40)
]
DEMO = f"{sys.executable} -m runtime.examples.train"


@pytest.fixture
def outputs(tmp_path: Path) -> Path:
    return tmp_path / "outputs"


def make_app(outputs: Path, checks: list[Check] = FEW_CHECKS) -> EzpzApp:
    return EzpzApp(outputs=outputs, alloc=LOCAL, clock=lambda: FIXED, checks=checks)


def many_runs(outputs: Path, count: int = 40) -> list[str]:
    """``count`` finished local runs, newest first: every 5th with tp=2, failed ones at rows
    4, 13, 22 and 31 (rank 1 failing), some stopped, the rest succeeded."""
    ids = []
    for i in range(count):
        created = FIXED - 3600.0 * (i + 1)
        tp = 2 if i % 5 == 0 else 1
        stamp = datetime.fromtimestamp(created, timezone.utc).strftime("%Y%m%d-%H%M%S")
        run_id = f"{stamp}-000-tp{tp}pp1cp1"
        state = "failed" if i % 9 == 4 else "stopped" if i % 11 == 6 else "succeeded"
        make_run(
            outputs,
            run_id=run_id,
            state=state,
            exit_code={"failed": 1, "stopped": 130, "succeeded": 0}[state],
            sizes={"tp": tp},
            ranks=2,
            steps=8,
            created=created,
            failing_rank=1 if state == "failed" else None,
            hosts=(HOST,),
            scheduler="none",
            job_id=None,
            machine=LOCAL.machine,
        )
        ids.append(run_id)
    return ids


async def settle(pilot: Pilot[None]) -> None:
    await started(pilot)
    await workers_done(pilot)
    await pilot.pause()


def inside(widget: Widget | None, region: Widget) -> bool:
    return widget is not None and region in widget.ancestors_with_self


async def walk(pilot: Pilot[None], regions: dict[str, Widget], steps: list[str]) -> None:
    """Each step is keys then a region (``"ctrl+o ctrl+o left"``): press the keys, and the
    focus must land in that region."""
    for step in steps:
        *keys, region = step.split(" ")
        await pilot.press(*keys)
        assert inside(pilot.app.focused, regions[region]), step


def regions_of(app: EzpzApp) -> dict[str, Widget]:
    return {name: app.query_one(f"#{name}") for name in ("left", "main", "right", "topology")}


def run_dirs(outputs: Path) -> list[Path]:
    return sorted(p for p in outputs.iterdir() if p.is_dir()) if outputs.exists() else []


async def focus_field(pilot: Pilot[None], field: str) -> Input:
    """Reach a launch form field with keys: J (main region), back to the Launch tab if another
    one is showing (shift+Tab to the tab strip, then left), j (first field), za when the field
    is folded away, then Tab."""
    app = pilot.app
    await pilot.press("escape", "J")
    main = app.query_one(TabbedContent)
    if main.active != "tab-launch":
        await pilot.press("shift+tab")
        assert isinstance(app.focused, Tabs), app.focused
        await pilot.press("left")
        assert main.active == "tab-launch"
        await pilot.press("tab")
    await pilot.press("j")
    if field in FOLDED and not app.query_one(LaunchForm).more:
        await pilot.press("z", "a")
    target = app.query_one(f"#{field}", Input)
    for _ in range(len(app.query("LaunchForm Input, LaunchForm Select")) + 1):
        if app.focused is target:
            return target
        await pilot.press("tab")
    raise AssertionError(f"Tab never reached #{field}; focus is on {app.focused}")


async def type_into(pilot: Pilot[None], field: str, text: str, append: bool = False) -> None:
    """Replace (Tab selects the whole value) or extend a field's text, then leave the field."""
    await focus_field(pilot, field)
    await pilot.press(*(["end"] if append else []), *text, "escape")
    await settle(pilot)


# --- navigation in lists ---------------------------------------------------------------------


async def test_runs_table_keys(outputs: Path) -> None:
    ids = many_runs(outputs)
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("L")
        table = app.query_one("#runs-table", VimTable)
        assert app.focused is table and table.row_count == 40
        await pilot.press("j", "j", "down")
        assert table.cursor_row == 3
        await pilot.press("k", "up")
        assert table.cursor_row == 1
        await pilot.press("G")
        assert table.cursor_row == 39
        await pilot.press("g")
        assert table.cursor_row == 0
        # ] / [: the next / previous failed run, wrapping round.
        seen = []
        for _ in range(5):
            await pilot.press("]")
            seen.append(table.cursor_row)
        assert seen == [4, 13, 22, 31, 4]
        await pilot.press("[")
        assert table.cursor_row == 31
        await pilot.press("[", "[")
        assert table.cursor_row == 13
        assert app.query_one(RunsPanel).runs[13].state == "failed"
        # } / {: blocks of five rows.
        await pilot.press("g", "}", "}")
        assert table.cursor_row == 10
        await pilot.press("{")
        assert table.cursor_row == 5
        # ctrl+d / ctrl+u: half of the visible rows.
        half = table.scrollable_content_region.height // 2
        assert half > 5
        await pilot.press("g", "ctrl+d")
        assert table.cursor_row == half
        await pilot.press("ctrl+d", "ctrl+d")
        assert table.cursor_row == 39, "clamped at the last run"
        await pilot.press("ctrl+u")
        assert table.cursor_row == 39 - half
        # / searches the row texts from the cursor on; n / N go to the next / previous match.
        await pilot.press("g", "j", "slash")
        assert isinstance(app.screen, SearchScreen)
        await pilot.press(*"tp2pp", "enter")
        assert not isinstance(app.screen, SearchScreen) and app.focused is table
        assert table.cursor_row == 5 and "tp2pp" in ids[5], "the first match after the cursor"
        await pilot.press("n")
        assert table.cursor_row == 10
        await pilot.press("N", "N")
        assert table.cursor_row == 0
        await pilot.press("N")
        assert table.cursor_row == 35, "N wraps round"
        await pilot.press("slash", *"tp1", "escape")
        assert not isinstance(app.screen, SearchScreen)
        assert table.cursor_row == 35, "Esc cancels the search"
        # Enter opens the highlighted run in the Run tab.
        await pilot.press("g", "]", "enter")
        await settle(pilot)
        assert app.query_one(TabbedContent).active == "tab-run"
        assert text_of(app.query_one("#run-header")).startswith(ids[4])
        log = app.query_one(LogView)
        await until(pilot, lambda: log.rank == 1, "the failed rank's log", 10)
        rows = [log.render_row(i).plain for i in range(log.row_count)]
        assert any("returned nan values" in r for r in rows), "rank 1's own error"
        assert not any("\x1b" in r for r in rows), "colour codes are parsed, not printed"
        assert "loading data: 100% |##########|" in rows, "a \\r rewrite shows once"


async def test_doctor_table_keys(outputs: Path) -> None:
    app = make_app(outputs, checks=MANY_CHECKS)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("H")
        table = app.query_one("#doctor-table", VimTable)
        remedy = app.query_one("#doctor-remedy", Static)
        assert app.focused is table
        assert table.row_count == 40 and table.max_scroll_y > 0, "the list must scroll"
        await pilot.press("j", "down", "k")
        assert table.cursor_row == 1
        # ] / [: the next check that is not ok, and its remedy below the list.
        await pilot.press("]")
        assert table.cursor_row == 7
        assert "probe-07" in text_of(remedy) and "remedy 7" in text_of(remedy)
        await pilot.press("]", "]")
        assert table.cursor_row == 33
        await pilot.press("]")
        assert table.cursor_row == 7, "wraps round"
        await pilot.press("[")
        assert table.cursor_row == 33
        await pilot.press("G")
        assert table.cursor_row == 39 and table.scroll_y == table.max_scroll_y
        await pilot.press("g")
        assert table.cursor_row == 0 and table.scroll_y == 0
        await pilot.press("}", "}", "{")
        assert table.cursor_row == 5
        half = table.scrollable_content_region.height // 2
        await pilot.press("ctrl+d")
        assert table.cursor_row == 5 + half
        await pilot.press("ctrl+u", "ctrl+u")
        assert table.cursor_row == 0
        # z z: the cursor row moves to the middle of the view.
        await pilot.press("G", "{", "{", "{", "{")
        assert table.cursor_row == 19
        before = table.scroll_y
        await pilot.press("z", "z")
        await pilot.wait_for_scheduled_animations()
        await pilot.pause()
        rows = table.scrollable_content_region.height - table.header_height
        assert table.scroll_y != before
        assert abs((table.cursor_row - table.scroll_y) - rows // 2) <= 1
        assert table.cursor_row == 19, "zz scrolls, it does not move the cursor"
        # D re-runs the doctor; with fixture checks there are no probes: the list stays.
        await pilot.press("D")
        await settle(pilot)
        assert app.main.doctor_checks == MANY_CHECKS and table.row_count == 40
        assert text_of(app.query_one("#doctor-title")) == "Doctor: 37 ok 2 warn 1 fail"
        assert "doctor: 1 error(s)" in text_of(app.query_one(SummaryBar))


# --- regions, sidebars, history --------------------------------------------------------------


async def test_regions_focus_and_sidebars(outputs: Path) -> None:
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        regions = regions_of(app)
        left, right, main = regions["left"], regions["right"], regions["main"]
        assert isinstance(app.focused, LaunchForm), "starts in the launch form"
        await walk(pilot, regions, ["H left", "L right", "K topology", "J main"])
        # h / l: one region to the left / right, stopping at the edges.
        await walk(pilot, regions, ["h left", "h left", "l main", "l right", "l right"])
        # z h / z l: hide and show the sidebars; focus leaves a sidebar that goes.
        await pilot.press("z", "l")
        assert right.display is False
        assert inside(app.focused, main)
        await pilot.press("z", "h")
        assert left.display is False
        await pilot.press("h")
        assert inside(app.focused, main), "no region left of main while the sidebar is hidden"
        await pilot.press("z", "h", "z", "l")
        assert left.display is True and right.display is True
        # H / L show a hidden sidebar and focus it.
        await pilot.press("z", "l", "L")
        assert right.display is True and inside(app.focused, right)


async def test_focus_history_back_and_forward(outputs: Path) -> None:
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # tab is the same key as ctrl+i in a terminal; a second finds nothing further forward.
        there_and_back = ["H K L right", "ctrl+o topology", "ctrl+o left", "ctrl+i topology"]
        await walk(pilot, regions_of(app), [*there_and_back, "tab right", "tab right"])
        # A new move drops the forward history.
        await walk(pilot, regions_of(app), ["ctrl+o ctrl+o left", "L ctrl+i right", "ctrl+o left"])


# --- dialogs ---------------------------------------------------------------------------------


async def test_command_palette_lists_the_run_commands(outputs: Path) -> None:
    ids = many_runs(outputs, 3)
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("colon")
        assert CommandPalette.is_open(app)
        commands = app.screen.query_one(CommandList)
        await until(pilot, lambda: commands.option_count > 0, "the palette's commands", 5)
        titles = [
            str(commands.get_option_at_index(i).prompt).split("\n")[0]
            for i in range(commands.option_count)
        ]
        for action in ("launch", "relaunch", "stop_run"):
            assert DEFAULT_KEYMAP[action].description in titles
        assert [t for t in titles if t.startswith("Open run")] == [f"Open run {i}" for i in ids]
        await pilot.press("escape")
        assert not CommandPalette.is_open(app)
        # ctrl+p opens it too; typing narrows the list and Enter runs the command.
        await pilot.press("ctrl+p")
        assert CommandPalette.is_open(app)
        hour = ids[1][9:13]  # HHMM, unique among the three runs
        await pilot.press(*f"open {hour}")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await settle(pilot)
        assert not CommandPalette.is_open(app)
        assert app.query_one(TabbedContent).active == "tab-run"
        assert text_of(app.query_one("#run-header")).startswith(ids[1])


async def test_theme_picker_reverts_on_escape_and_keeps_on_enter(
    outputs: Path, config_dir: Path
) -> None:
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        before = app.theme
        await pilot.press("ctrl+x")
        assert isinstance(app.screen, ThemePicker)
        await pilot.press("j")
        previewed = app.theme
        assert previewed != before, "the highlighted theme is previewed"
        await pilot.press("escape")
        assert not isinstance(app.screen, ThemePicker)
        assert app.theme == before
        assert not (config_dir / "config.toml").exists(), "Esc saves nothing"
        await pilot.press("ctrl+x", "j", "enter")
        assert not isinstance(app.screen, ThemePicker)
        assert app.theme == previewed
    settings, problems = config.load_config(config_dir / "config.toml")
    assert problems == [] and settings.theme == previewed, "Enter keeps and remembers it"


async def test_help_opens_and_escape_closes(outputs: Path) -> None:
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = text_of(app.screen.query_one("#bindings"))
        assert all(b.description in text for b in DEFAULT_KEYMAP)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        assert isinstance(app.focused, LaunchForm), "focus comes back where it was"


async def test_t_and_shift_t_switch_the_main_tabs(outputs: Path) -> None:
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tabs = app.query_one(TabbedContent)
        app.query_one("#runs-table").focus()
        await pilot.press("t")
        assert tabs.active == "tab-run" and inside(app.focused, tabs)
        await pilot.press("t", "t")
        assert tabs.active == "tab-compare"
        await pilot.press("t")
        assert tabs.active == "tab-heatmap"
        await pilot.press("t")
        assert tabs.active == "tab-launch", "wraps round after Heatmap"
        await pilot.press("T")
        assert tabs.active == "tab-heatmap"


# --- keys of single regions ------------------------------------------------------------------


def grid_text(grid: TopologyGrid) -> list[str]:
    return [strip.text.strip() for strip in grid.render_lines(Region(0, 0, *grid.outer_size))]


async def test_o_cycles_the_topology_colour(outputs: Path) -> None:
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        grid = app.query_one(TopologyGrid)
        await pilot.press("K")
        assert app.focused is grid and grid.colour_by == "tp"
        assert any(line.startswith("no colours: tp = 1") for line in grid_text(grid))
        await pilot.press("o")
        await pilot.pause()
        assert grid.colour_by == "dp", "tp, pp and cp are 1: DP is the only grouping"
        assert any(line.startswith("colour = DP group") for line in grid_text(grid))
        await pilot.press("o")
        assert grid.colour_by == "dp", "o skips the sizes that group nothing"


async def test_keys_of_other_views_do_no_harm(outputs: Path) -> None:
    """f (follow), m / M (metric) belong to the log and plot views: pressed in the runs list,
    the grid or the form they change nothing; c in the runs list only overlays a run."""
    many_runs(outputs, 6)
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        form = app.query_one(LaunchForm)
        values = {w.id: w.value for w in form.query(Input)}
        table = app.query_one("#runs-table", VimTable)
        for keys in (("L", "j"), ("K",), ("J",)):
            region = keys[0]
            await pilot.press(*keys)
            focused, cursor = app.focused, table.cursor_row
            await pilot.press("f", "m", "M", "c")
            await pilot.pause()
            assert app.screen is app.main, region
            assert app.focused is focused, region
            assert table.cursor_row == cursor, region
        assert len(run_dirs(outputs)) == 6, "nothing was launched"
        assert {w.id: w.value for w in form.query(Input)} == values
        assert app.query_one(TopologyGrid).colour_by == "tp"
        assert app.query_one(TabbedContent).active == "tab-launch"
        assert app.query_one("#left").display and app.query_one("#right").display
        assert app.is_running


async def test_q_quits_at_once_without_a_live_run(outputs: Path) -> None:
    many_runs(outputs, 2)
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("q")
        assert not app.is_running
    assert app.return_code == 0


async def test_reports_reach_the_screen_only_while_it_runs(outputs: Path) -> None:
    """Workers report with messages to the main screen; once the app has quit the screen takes
    none, so no handler runs against removed widgets (no "app is closing" guard needed)."""
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.main.post_message(RunsStopped(then_exit=False))
        await pilot.press("q")
    assert not app.main.post_message(RunsStopped(then_exit=False))


# --- the launch form ---------------------------------------------------------------------------


async def test_invalid_sizes_block_the_launch(outputs: Path) -> None:
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tp = app.query_one("#tp", Input)
        problems, preview = app.query_one("#problems", Static), app.query_one("#preview", Static)
        assert "-genv EZPZ_TP 1" in text_of(preview)
        assert await focus_field(pilot, "tp") is tp
        await pilot.press("3")
        await settle(pilot)
        assert app.focused is tp and tp.value == "3"
        assert "World size 2 is not divisible by tp*pp*cp = 3." in text_of(problems)
        assert tp.has_class("-invalid")
        await pilot.press("escape")
        assert isinstance(app.focused, LaunchForm), "Esc leaves the field"
        assert tp.has_class("-invalid"), "the mark stays after leaving the field"
        assert "launch disabled until the plan is valid" in text_of(preview)
        await pilot.press("r")
        await settle(pilot)
        assert run_dirs(outputs) == [], "r launches nothing while the plan has errors"
        assert app.main.session is not None and app.main.session.current is None
        await type_into(pilot, "tp", "2")
        assert not tp.has_class("-invalid")
        assert "✗" not in text_of(problems)
        assert "-genv EZPZ_TP 2" in text_of(preview)
        assert "DP 1 · world 2" in text_of(app.query_one("#dp"))


async def test_start_up_fills_the_form_with_one_preview(
    outputs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's worker previews the default plan once; filling the form's fields asks for
    no preview of its own (it asked one per field, each of a half-filled plan)."""
    asked: list[LaunchPlan] = []
    preview = Session.preview

    def counted(session: Session, plan: LaunchPlan) -> Preview:
        asked.append(plan)
        return preview(session, plan)

    monkeypatch.setattr(Session, "preview", counted)
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        # The demo's ranks are the launch's own Python, watched in their own interpreter.
        assert f"{sys.executable} -m runtime.examples.train" in text_of(app.query_one("#preview"))
        assert asked == [app.main.form.plan]


async def test_a_preview_of_a_plan_edited_away_is_not_shown(outputs: Path) -> None:
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        session, form = app.main.session, app.main.form
        assert session is not None and form.plan is not None
        old = form.plan
        await type_into(pilot, "launcher_args", "-prepend-rank")
        shown = text_of(app.query_one("#preview"))
        assert "-prepend-rank" in shown
        app.main.post_message(PreviewReady(old, session.preview(old)))  # a worker's late answer
        await settle(pilot)
        assert text_of(app.query_one("#preview")) == shown


async def test_typed_launcher_flags_change_the_preview(outputs: Path) -> None:
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        preview = app.query_one("#preview", Static)
        before = text_of(preview)
        assert "-prepend-rank" not in before
        await type_into(pilot, "launcher_args", "-prepend-rank")  # behind the fold: za first
        flags = app.query_one("#launcher_args", Input)
        assert flags.value == "-prepend-rank" and not flags.has_class("-invalid")
        shown = text_of(preview)
        # Hydra's flag, right after the launcher's own and before the ranks' program.
        assert f"-prepend-rank {sys.executable} -m runtime.examples.train" in shown, shown
        assert app.main.form.plan is not None
        assert app.main.form.plan.launcher_args == ("-prepend-rank",)

        await type_into(pilot, "launcher_args", "'unclosed")
        assert flags.has_class("-invalid")
        assert "The launcher flags cannot be split: No closing quotation." in text_of(
            app.query_one("#problems", Static)
        )
        assert "launch disabled until the plan is valid" in text_of(preview)


# --- real runs ---------------------------------------------------------------------------------


async def test_launch_relaunch_and_stop_a_real_run(outputs: Path) -> None:
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        try:
            await settle(pilot)
            panel = app.query_one(RunsPanel)
            summary = app.query_one(SummaryBar)
            command = app.query_one("#command", Input)
            assert command.value == DEMO
            await type_into(pilot, "command", " --sleep 0.1 --steps 10000", append=True)
            assert command.value == f"{DEMO} --sleep 0.1 --steps 10000"

            await pilot.press("r")
            await settle(pilot)
            [first] = run_dirs(outputs)
            assert app.query_one(TabbedContent).active == "tab-run"

            def first_is_running() -> bool:
                return [(r.path, r.state) for r in panel.runs] == [(first, "running")]

            await until(pilot, first_is_running, "the runs list to show the run", 30)
            await until(pilot, lambda: " step " in text_of(summary), "a step in the summary", 90)
            assert f"{first.name} ● running" in text_of(summary)
            assert "loss " in text_of(summary)

            # TP 1 -> 2 and relaunch in four keys, each shown in the footer or the dialog.
            footer = {key for key, b in app.screen.active_bindings.items() if b.binding.show}
            assert {"e", "R"} <= footer
            await pilot.press("e", "+")
            await settle(pilot)
            assert app.query_one("#tp", Input).value == "2"
            assert "-genv EZPZ_TP 2" in text_of(app.query_one("#preview"))
            await pilot.press("R")  # the question comes after the new layout's preflight
            await until(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question", 120)
            await settle(pilot)  # the question composed
            question = text_of(app.screen.query_one("#question"))
            assert question.startswith(
                f"Relaunch? {first.name} is running: it saves at the step it is at and stops first"
            )
            details = text_of(app.screen.query_one("#details")).splitlines()
            assert details[:2] == ["TP 1 → 2", "DP 2 → 1"]
            assert "argv: -genv EZPZ_TP 1 → 2" in details
            assert details[-2].startswith("Preflight passed: rank 0 of 2 ran a step alone in ")
            assert details[-1].startswith("peak memory ")
            await pilot.press("y")
            await settle(pilot)
            assert run_state(first).state == "stopped"
            assert processes_of(first) == []
            [second] = [d for d in run_dirs(outputs) if d != first]
            record = read_run_toml(second)
            assert record["parent"] == first.name
            assert record["sizes"]["tp"] == 2 and record["plan"]["tp"] == 2

            def both_listed() -> bool:
                return {(r.path, r.state) for r in panel.runs} == {
                    (first, "stopped"),
                    (second, "running"),
                }

            await until(pilot, both_listed, "both runs in the list", 30)
            assert text_of(app.query_one("#run-header")).startswith(second.name)

            # q with a run alive asks first; n keeps everything going.
            await pilot.press("q")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("n")
            await pilot.pause()
            assert app.is_running and run_state(second).state == "running"

            await pilot.press("X")
            assert isinstance(app.screen, ConfirmScreen)
            assert text_of(app.screen.query_one("#question")) == f"Stop {second.name}?"
            await pilot.press("y")
            await settle(pilot)
            assert run_state(second).state == "stopped"
            assert processes_of(first, second) == []
            await until(
                pilot,
                lambda: {r.state for r in panel.runs} == {"stopped"},
                "the list to show both stopped",
                10,
            )
            await pilot.press("q")
            assert not app.is_running, "no run alive: q quits at once"
        finally:
            if app.main.session is not None:
                app.main.session.supervisor.stop_all(grace_s=(1.0, 1.0))
    assert processes_of(*run_dirs(outputs)) == []


async def test_user_launch_key_and_quit_with_a_live_run(outputs: Path, config_dir: Path) -> None:
    """A [keys] override from config.toml rebinds launch (footer included); q with a live run
    asks, and yes stops the run before the app exits."""
    (config_dir / "config.toml").write_text('[keys]\nlaunch = "ctrl+t"\n')
    app = make_app(outputs)
    async with app.run_test(size=SIZE) as pilot:
        try:
            await settle(pilot)
            footer = {k.key: k.description for k in app.query_one(Footer).query("FooterKey")}
            assert footer.get("ctrl+t") == "launch" and "r" not in footer
            await type_into(pilot, "command", "sleep 300")
            await pilot.press("r")
            await settle(pilot)
            assert run_dirs(outputs) == [], "r is no longer the launch key"
            await pilot.press("ctrl+t")
            await settle(pilot)
            [run] = run_dirs(outputs)
            assert read_run_toml(run)["plan"]["command"] == ["sleep", "300"]
            await until(
                pilot,
                lambda: len(list((run / "status").glob("b0000/rank-*.json"))) == 2,
                "both ranks to start",
                30,
            )
            assert processes_of(run)
            await pilot.press("q")
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press("y")
            await until(pilot, lambda: not app.is_running, "the app to exit", 30)
        finally:
            if app.main.session is not None:
                app.main.session.supervisor.stop_all(grace_s=(1.0, 1.0))
    assert run_state(run).state == "stopped"
    assert processes_of(run) == []


# --- start-up cost -------------------------------------------------------------------------------

_HEAVY_PROBE = """
import asyncio, sys, tempfile
from pathlib import Path
from ezpz_tui.core.checking.check import Check
from ezpz_tui.core.launching.plan import LaunchPlan
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.messages import PreviewReady, RunsStopped

async def main():
    # The allocation is detected for real; only the doctor's probes (subprocesses that import
    # torch on purpose, for up to 30 s) are replaced.
    app = EzpzApp(Path(tempfile.mkdtemp()), checks=[Check("python", "ok", "")])
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(300):  # the preview follows detection and its own worker: under load, late
            await pilot.pause(0.1)
            if "runtime.examples.train" in " ".join(str(p.render()) for p in app.query("#preview")):
                break
        await app.workers.wait_for_complete()
        assert app.main.session is not None
        assert "runtime.examples.train" in str(app.query_one("#preview").render())

asyncio.run(main())
print(" ".join(m for m in ("torch", "numpy", "pandas", "xarray", "mpi4py") if m in sys.modules))
"""


def test_startup_does_not_import_torch(tmp_path: Path) -> None:
    """The TUI process never imports torch (docs/architecture.md); checked in a fresh
    interpreter, since this pytest process has imported torch for other tests."""
    env = {**os.environ, config.ENV_CONFIG_DIR: str(tmp_path), "EZPZ_ACCELERATORS_PER_HOST": "2"}
    done = subprocess.run(
        [sys.executable, "-c", _HEAVY_PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "", f"heavy modules loaded at start-up: {done.stdout}"
