"""Themes as data: TOML files turned into Textual `Theme`s.

The built-in files (catppuccin, everforest, gruvbox, nord and vitesse, each light and dark) live
in the repository's top-level `themes/`, which the wheel installs as `ezpz_tui/themes/`. They
are named `ezpz-*`, because Textual's theme names are global and its own `nord` or `gruvbox`
must stay untouched.
The user's `themes/` directory in the config directory is read afterwards: a file there may
replace one of ours by using its name, and a broken file is reported and skipped, never fatal.
A theme file holds the fields of `textual.theme.Theme`:

    name = "my-theme"          # optional, defaults to the file name without .toml
    primary = "#88c0d0"        # required; the other colours are optional
    background = "#2e3440"
    dark = true
    [variables]
    "footer-key-foreground" = "#88c0d0"
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

from textual.app import App
from textual.color import Color, ColorParseError
from textual.theme import BUILTIN_THEMES, Theme

from ezpz_tui import config

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


def _builtin_themes_dir() -> Path:
    """`ezpz_tui/themes/` where the wheel installed them (setup.py maps the repository's
    `themes/` there); the repository's `themes/` beside the package in a checkout or an editable
    install, which import the package from the repository."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "themes"
    return installed if installed.is_dir() else package.parent / "themes"


BUILTIN_THEMES_DIR = _builtin_themes_dir()
"""Our theme files: each palette in a light and a dark variant (catppuccin latte / mocha)."""

RENAMED = {
    "ezpz-catppuccin": "ezpz-catppuccin-mocha",
    "ezpz-everforest": "ezpz-everforest-dark",
    "ezpz-gruvbox": "ezpz-gruvbox-dark",
    "ezpz-nord": "ezpz-nord-dark",
    "ezpz-vitesse": "ezpz-vitesse-dark",
}
"""Our themes' names before each came in light and dark: a config.toml that remembers one
still loads, as its dark variant."""


def current_name(theme: str, available: Iterable[str]) -> str:
    """The theme a remembered `theme` name means now: itself, or the dark variant it became
    (unless a user's theme file took the old name)."""
    return RENAMED.get(theme, theme) if theme not in available else theme


COLOURS = (
    "primary",
    "secondary",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
    "success",
    "warning",
    "error",
)
"""The colours a theme file may set: the colour fields of Textual's `Theme`."""
_NUMBERS = ("luminosity_spread", "text_alpha")
_FIELDS = frozenset({"name", "dark", "variables", *COLOURS, *_NUMBERS})


def theme_dirs() -> list[Path]:
    """Where themes come from, in load order: ours, then the user's (which may replace ours)."""
    return [BUILTIN_THEMES_DIR, config.user_themes_dir()]


def _colour_problem(value: object) -> str:
    """Why `value` is not a colour Textual accepts ("" when it is). A variable may add an alpha
    percentage after the colour, as Textual's own themes do: "#81a1c1 35%"."""
    if not isinstance(value, str):
        return f"{value!r} is not a string"
    colour, _, alpha = value.strip().partition(" ")
    try:
        Color.parse(colour)
    except ColorParseError as err:
        return str(err)
    if alpha and not (alpha.endswith("%") and alpha[:-1].replace(".", "", 1).isdigit()):
        return f"{alpha!r} after the colour should be a percentage such as 30%"
    return ""


def load_theme_file(path: Path) -> tuple[Theme | None, list[str]]:
    """The theme in one file (None when it cannot be used) and a sentence per problem."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        return None, [f"Theme file {path} cannot be read ({err}); skipped."]
    problems: list[str] = []
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        problems.append(f"Theme file {path}: unknown field(s) {', '.join(unknown)} ignored.")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not name.strip():
        return None, [*problems, f"Theme file {path}: name should be a string; skipped."]
    if name in BUILTIN_THEMES:
        return None, [
            *problems,
            f"Theme file {path}: {name!r} is a Textual built-in theme name; "
            "give the theme another name. Skipped.",
        ]
    if "primary" not in data:
        return None, [*problems, f"Theme file {path}: primary colour missing; skipped."]
    for colour in COLOURS:
        why = _colour_problem(data[colour]) if colour in data else ""
        if why:
            return None, [*problems, f"Theme file {path}: {colour}: {why}; skipped."]
    variables = data.get("variables", {})
    if not isinstance(variables, dict):
        return None, [*problems, f"Theme file {path}: [variables] should be a table; skipped."]
    for var, value in variables.items():
        why = (
            "" if var.endswith("text-style") and isinstance(value, str) else _colour_problem(value)
        )
        if why:
            return None, [*problems, f"Theme file {path}: variable {var}: {why}; skipped."]
    if not isinstance(data.get("dark", True), bool):
        return None, [*problems, f"Theme file {path}: dark should be true or false; skipped."]
    for number in _NUMBERS:
        if number in data and not isinstance(data[number], (int, float)):
            return None, [*problems, f"Theme file {path}: {number} should be a number; skipped."]
    fields = {k: v for k, v in data.items() if k in _FIELDS and k != "name"}
    theme = Theme(name=name, **fields)
    try:
        theme.to_color_system().generate()
    except Exception as err:  # Textual's colour maths is the final judge of a usable theme
        return None, [*problems, f"Theme file {path}: Textual rejects it ({err}); skipped."]
    return theme, problems


def load_themes(dirs: Iterable[Path]) -> tuple[list[Theme], list[str]]:
    """Every usable theme in `dirs` (missing directories are fine) and a sentence per problem.

    Files are read in name order, directory by directory; a theme in a later directory replaces
    an earlier one of the same name, two files with one name in the same directory keep the first.
    """
    themes: dict[str, Theme] = {}
    problems: list[str] = []
    for directory in dirs:
        seen_here: dict[str, Path] = {}
        for path in sorted(directory.glob("*.toml")) if directory.is_dir() else []:
            theme, file_problems = load_theme_file(path)
            problems.extend(file_problems)
            if theme is None:
                continue
            if theme.name in seen_here:
                problems.append(
                    f"Theme file {path}: {theme.name!r} is also defined in "
                    f"{seen_here[theme.name].name}; skipped."
                )
                continue
            seen_here[theme.name] = path
            themes[theme.name] = theme
    return list(themes.values()), problems


def register_themes(app: App[object], dirs: Iterable[Path] | None = None) -> list[str]:
    """Load ours and the user's themes (or those in `dirs`) into `app`; returns the problems.

    Call it before setting `app.theme` to a remembered name, which may be one of these.
    """
    themes, problems = load_themes(theme_dirs() if dirs is None else dirs)
    for theme in themes:
        app.register_theme(theme)
    return problems
