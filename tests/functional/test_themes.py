"""Theme files: ours load with unique names, the user's are optional and never fatal."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App
from textual.color import Color
from textual.theme import BUILTIN_THEMES

from ezpz_tui import config
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.themes import (
    BUILTIN_THEMES_DIR,
    COLOURS,
    RENAMED,
    current_name,
    load_theme_file,
    load_themes,
    register_themes,
    theme_dirs,
)
from ezpz_tui.ui.widgets.metric_plot import PlotColours
from ezpz_tui.ui.widgets.topology import MIN_CONTRAST, contrast, group_palette
from tests.pilots import FIXED, LOCAL

PALETTES = ("catppuccin", "everforest", "gruvbox", "nord", "vitesse")
VARIANTS = {"catppuccin": ("latte", "mocha")}  # light, dark; the others are named so
OURS = {
    f"ezpz-{palette}-{variant}"
    for palette in PALETTES
    for variant in VARIANTS.get(palette, ("light", "dark"))
}
REPO = Path(__file__).resolve().parents[2]


def test_every_palette_loads_in_light_and_dark_without_problems() -> None:
    themes, problems = load_themes([BUILTIN_THEMES_DIR])
    assert problems == []
    names = [t.name for t in themes]
    assert set(names) == OURS and len(names) == len(set(names)) == 10
    assert not set(names) & set(BUILTIN_THEMES), "Textual's built-in themes stay untouched"
    for theme in themes:
        light = theme.name.endswith(("-light", "-latte"))
        assert theme.dark is not light, theme.name
        background = Color.parse(theme.background or "")
        assert (background.brightness > 0.5) is light, f"{theme.name}: a light ground"
        assert all(getattr(theme, f) for f in COLOURS if f != "boost"), theme.name
        assert theme.variables


def test_a_checkout_reads_the_top_level_themes_folder() -> None:
    """The wheel installs the same files as ezpz_tui/themes/ (tests/integration/test_wheel.py)."""
    assert BUILTIN_THEMES_DIR == REPO / "themes"
    assert sorted(p.stem for p in BUILTIN_THEMES_DIR.glob("*.toml")) == sorted(
        name.removeprefix("ezpz-") for name in OURS
    )


def test_the_names_before_light_and_dark_mean_the_dark_variant() -> None:
    assert set(RENAMED.values()) <= OURS
    assert current_name("ezpz-nord", OURS) == "ezpz-nord-dark"
    assert current_name("ezpz-nord-light", OURS) == "ezpz-nord-light"
    assert current_name("ezpz-nord", {*OURS, "ezpz-nord"}) == "ezpz-nord", "a user's file wins"


async def test_a_saved_old_name_still_loads(config_dir: Path) -> None:
    (config_dir / "config.toml").write_text('[ui]\ntheme = "ezpz-gruvbox"\n')
    app = EzpzApp(outputs=config_dir / "outputs", alloc=LOCAL, clock=lambda: FIXED, checks=[])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == "ezpz-gruvbox-dark"
        assert app.problems == []


@pytest.mark.parametrize("name", sorted(OURS))
def test_plot_lines_and_rank_names_stand_out_in_light_themes(name: str) -> None:
    """The plot's lines, the rank names of the log and the grid's groups share one palette; on a
    light ground every colour of it reaches a 3:1 contrast (WCAG for graphics)."""
    themes, _ = load_themes([BUILTIN_THEMES_DIR])
    theme = {t.name: t for t in themes}[name]
    variables = theme.to_color_system().generate()
    palette = group_palette(variables)
    assert len({c.hex for c in palette}) == len(palette) == 8
    if not theme.dark:
        surface = Color.parse(variables["surface"])
        assert min(contrast(c, surface) for c in palette) >= MIN_CONTRAST
        assert PlotColours.from_theme(variables).lines == tuple(c.rgb for c in palette)


def test_theme_dirs_are_ours_then_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(config.ENV_CONFIG_DIR, str(tmp_path))
    assert theme_dirs() == [BUILTIN_THEMES_DIR, tmp_path / "themes"]


def _user(tmp_path: Path, name: str, text: str) -> Path:
    directory = tmp_path / "themes"
    directory.mkdir(exist_ok=True)
    (directory / name).write_text(text)
    return directory


def test_a_user_theme_is_added(tmp_path: Path) -> None:
    user = _user(tmp_path, "mine.toml", 'primary = "#ff0000"\ndark = false\n')
    themes, problems = load_themes([BUILTIN_THEMES_DIR, user, tmp_path / "absent"])
    assert problems == []
    mine = {t.name: t for t in themes}["mine"]
    assert mine.primary == "#ff0000" and mine.dark is False


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('primary = "#ff0000"\nbackground = ', "cannot be read"),
        ('background = "#000000"\n', "primary colour missing"),
        ('primary = "bleu"\n', "primary"),
        ('primary = "#ff0000"\nsurface = 12\n', "surface"),
        ('name = "nord"\nprimary = "#ff0000"\n', "Textual built-in theme name"),
        ('primary = "#ff0000"\nvariables = "x"\n', "[variables] should be a table"),
        ('primary = "#ff0000"\n[variables]\nborder = "#12 half"\n', "variable border"),
        ('primary = "#ff0000"\n[variables]\nborder = "#123456 lots"\n', "percentage"),
        ('primary = "#ff0000"\ndark = "yes"\n', "dark should be true or false"),
        ('primary = "#ff0000"\ntext_alpha = "high"\n', "text_alpha should be a number"),
        ("name = 3\nprimary = '#ff0000'\n", "name should be a string"),
    ],
)
def test_a_broken_user_theme_is_a_problem(tmp_path: Path, text: str, why: str) -> None:
    user = _user(tmp_path, "broken.toml", text)
    themes, problems = load_themes([BUILTIN_THEMES_DIR, user])
    assert {t.name for t in themes} == OURS, "the good themes still load"
    assert len(problems) == 1, problems
    assert "broken.toml" in problems[0] and why in problems[0]


def test_unknown_fields_are_reported_but_the_theme_loads(tmp_path: Path) -> None:
    path = _user(tmp_path, "typo.toml", 'primary = "#ff0000"\nacent = "#00ff00"\n') / "typo.toml"
    theme, problems = load_theme_file(path)
    assert theme is not None and theme.name == "typo"
    assert problems == [f"Theme file {path}: unknown field(s) acent ignored."]


def test_a_user_file_may_replace_one_of_ours(tmp_path: Path) -> None:
    user = _user(tmp_path, "nord.toml", 'name = "ezpz-nord-dark"\nprimary = "#123456"\n')
    themes, problems = load_themes([BUILTIN_THEMES_DIR, user])
    assert problems == []
    assert {t.name: t for t in themes}["ezpz-nord-dark"].primary == "#123456"


def test_two_files_with_one_name_in_one_dir_keep_the_first(tmp_path: Path) -> None:
    _user(tmp_path, "a.toml", 'name = "same"\nprimary = "#111111"\n')
    user = _user(tmp_path, "b.toml", 'name = "same"\nprimary = "#222222"\n')
    themes, problems = load_themes([user])
    assert [(t.name, t.primary) for t in themes] == [("same", "#111111")]
    assert len(problems) == 1 and "also defined in a.toml" in problems[0]


async def test_every_theme_applies_in_an_app() -> None:
    app: App[None] = App()
    async with app.run_test(size=(40, 10)) as pilot:
        assert register_themes(app, [BUILTIN_THEMES_DIR]) == []
        for name in sorted(OURS):
            app.theme = name
            await pilot.pause()
            assert app.current_theme.name == name
            variables = app.get_css_variables()
            assert variables["border"] == app.current_theme.variables["border"]
