"""The launch form's fold (``za``): the rarely used fields are not mounted until it is opened,
the plan is the same folded or not, the fold's line names what it hides, the choice is kept
for the next start; and the plan's frame is the first painted after the regions mount."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import Input, Select

from ezpz_tui import config
from ezpz_tui.core.checking.check import Check
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.launch_form import FOLDED, LaunchForm
from tests.envs import JOB_PREFIXES, JOB_VARS
from tests.pilots import FIXED, LOCAL, started, text_of, until, workers_done

SIZE = (120, 40)


def make_app(tmp_path: Path) -> EzpzApp:
    return EzpzApp(outputs=tmp_path / "outputs", alloc=LOCAL, clock=lambda: FIXED, checks=[])


def folded_widgets(form: LaunchForm) -> list[str]:
    return [name for name in FOLDED if form.query(f"#{name}")]


async def test_the_rarely_used_fields_start_folded_and_za_opens_them(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        form = app.query_one(LaunchForm)
        assert folded_widgets(form) == [] and not form.more
        fold = text_of(form.query_one("#more"))
        assert "za" in fold and "env" in fold and "launcher" in fold
        folded_plan = form.plan
        assert folded_plan is not None and folded_plan.launcher == "auto"
        assert folded_plan.stage == "off" and folded_plan.env == ()

        await pilot.press("z", "a")  # the form has the focus after start-up
        assert form.more and folded_widgets(form) == list(FOLDED)
        assert form.query_one("#launcher", Select).value == "auto"
        assert form.read_plan()[0] == folded_plan, "opening the fold changes nothing"
        assert "$ " in text_of(form.query_one("#preview"))

        # A value typed behind the fold is kept when it closes, and named on its line.
        form.query_one("#env", Input).value = "A=1 B=2"
        form.query_one("#stage", Select).value = "keep"
        await pilot.pause()
        await pilot.press("escape")  # back to the form from wherever a change left the focus
        form.focus()
        await pilot.press("z", "a")
        assert not form.more and folded_widgets(form) == []
        plan = form.plan
        assert plan is not None and dict(plan.env) == {"A": "1", "B": "2"}
        assert plan.stage == "keep"
        fold = text_of(form.query_one("#more"))
        assert "stage keep" in fold and "env 2" in fold

        await pilot.press("z", "a")
        assert form.query_one("#env", Input).value == "A=1 B=2"


async def test_six_tabs_from_the_form_reach_the_command(tmp_path: Path) -> None:
    """The end-to-end tests and the bench reach the command with J and six Tabs."""
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await pilot.press("J", *["tab"] * 6)
        assert app.focused is app.query_one("#command", Input)


async def test_a_plan_set_while_folded_keeps_its_folded_values(tmp_path: Path) -> None:
    """A reopened run's plan fills the folded fields without mounting them; one of them wrong
    turns the fold's line red, since the field itself is not on screen."""
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await workers_done(pilot)
        form = app.query_one(LaunchForm)
        assert form.plan is not None and form.alloc is not None
        wanted = replace(form.plan, launcher_args=("--label",), stage="keep")
        form.set_plan(form.alloc, wanted)
        assert folded_widgets(form) == []
        assert form.read_plan()[0] == wanted
        fold = form.query_one("#more")
        assert "flags, stage keep" in text_of(fold)
        assert not fold.has_class("-invalid")

        form.set_plan(form.alloc, replace(wanted, exclude=("vm9",)))  # not in the allocation
        assert [p.field for p in form.problems if p.level == "error"] == ["exclude"]
        assert "exclude 1" in text_of(fold) and fold.has_class("-invalid")


async def test_the_fold_is_kept_for_the_next_start(tmp_path: Path, config_dir: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await pilot.press("z", "a")
        await workers_done(pilot)
    assert config.load_config()[0].launch_more is True
    assert "launch_more = true" in (config_dir / "config.toml").read_text()

    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        form = app.query_one(LaunchForm)
        assert form.more and folded_widgets(form) == list(FOLDED)


@pytest.fixture
def slow_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A GPU node's ``nvidia-smi -L`` that answers (finding no device) only once the file this
    returns exists, or after 20 s: the allocation, and so the plan, comes when the test says."""
    bin_dir, release = tmp_path / "bin", tmp_path / "release"
    bin_dir.mkdir()
    tool = bin_dir / "nvidia-smi"
    tool.write_text(
        f"#!/bin/sh\nfor _ in $(seq 400); do [ -e {release} ] && exit 1; sleep 0.05; done\nexit 1\n"
    )
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    for name in list(os.environ):
        if name.startswith(JOB_PREFIXES) or name in JOB_VARS:
            monkeypatch.delenv(name)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return release


async def test_the_regions_are_painted_with_the_plan_not_before_it(
    tmp_path: Path, slow_nvidia_smi: Path
) -> None:
    """While the allocation is being detected, no frame shows the mounted form empty: the
    regions and the plan filling them are laid out and painted once."""
    app = EzpzApp(outputs=tmp_path / "outputs", checks=[Check("python", "ok", "")])
    frames: list[tuple[bool, bool]] = []  # each paint: form mounted, plan in it
    display = app._display

    def recorded(screen: object, renderable: object) -> None:
        forms = app.query(LaunchForm) if app.is_running else []
        preview = forms[0].query_one("#preview") if forms else None
        frames.append((bool(forms), preview is not None and "$ " in text_of(preview)))
        display(screen, renderable)  # type: ignore[arg-type]

    app._display = recorded  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.main.started, "the regions mounted", 10)
        await pilot.pause(0.3)  # frames enough for a paint of what is mounted
        slow_nvidia_smi.touch()
        await started(pilot)
        assert app.main.session is not None
        assert app.main.session.alloc.accelerator_kind == "cpu", "nvidia-smi found nothing"
    with_form = [plan for mounted, plan in frames if mounted]
    assert with_form and all(with_form), f"paints of the form before its plan: {frames}"
