"""The layering of docs/architecture.md, as import-linter contracts (pyproject.toml) and as what a
fresh TUI process has imported.

The contracts see every import statement; the subprocess sees what actually loads, which is
what the lazy imports the contracts ignore must never turn into.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """lint-imports with the project's contracts on the packages found from ``cwd``."""
    argv = [LINT_IMPORTS, "--no-cache", "--no-logo", "--config", REPO / "pyproject.toml"]
    return subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_contracts_hold() -> None:
    done = _lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 6 kept, 0 broken." in done.stdout


def _with_import(tmp_path: Path, module: str, imported: str) -> tuple[str, int]:
    """lint-imports on a copy of the packages where ``module`` (a path below the repository)
    ends with ``import imported``: its report, and the line that import is on."""
    for package in ("runtime", "ezpz_tui"):
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("*.pyc"))
    source = tmp_path / module
    lines = source.read_text().splitlines()
    source.write_text("\n".join([*lines, f"import {imported}"]) + "\n")
    done = _lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout, len(lines) + 1


def test_a_forbidden_import_breaks_a_contract(tmp_path: Path) -> None:
    said, line = _with_import(tmp_path, "runtime/env.py", "textual")
    assert "runtime never imports ezpz_tui, textual or rich BROKEN" in said
    assert f"runtime.env -> textual (l.{line})" in said


def test_watching_importing_launching_breaks_the_layers(tmp_path: Path) -> None:
    """What a run's watcher reads about runs lives in core/runs: the moment watching reaches
    for launching again, the two packages are one tangle again."""
    said, line = _with_import(
        tmp_path, "ezpz_tui/core/watching/monitor.py", "ezpz_tui.core.launching.plan"
    )
    assert "core is layered, ui above it and runs at its bottom BROKEN" in said
    assert "ezpz_tui.core.watching is not allowed to import ezpz_tui.core.launching" in said
    assert f"ezpz_tui.core.watching.monitor -> ezpz_tui.core.launching.plan (l.{line})" in said


def test_the_runs_list_importing_launching_breaks_the_read_side(tmp_path: Path) -> None:
    """The runs list, the palette, compare and naming a run only read runs (core/runs): the
    moment one reaches for the code that makes and drives them, a contract says so."""
    said, line = _with_import(
        tmp_path, "ezpz_tui/ui/widgets/runs.py", "ezpz_tui.core.launching.supervisor"
    )
    assert "what only reads runs never imports the code that makes and drives them" in said
    assert "ezpz_tui.ui.widgets.runs is not allowed to import ezpz_tui.core.launching" in said
    assert f"ezpz_tui.ui.widgets.runs -> ezpz_tui.core.launching.supervisor (l.{line})" in said


def test_a_widget_importing_a_screen_breaks_a_contract(tmp_path: Path) -> None:
    """A widget that opened a dialog itself would tie it to one screen: it posts a Message."""
    said, line = _with_import(
        tmp_path, "ezpz_tui/ui/widgets/run_panel.py", "ezpz_tui.ui.screens.search"
    )
    assert "widgets never import a screen" in said
    assert f"ezpz_tui.ui.widgets.run_panel -> ezpz_tui.ui.screens.search (l.{line})" in said


_IMPORT_THE_TUI = """
import importlib, pkgutil, sys
import ezpz_tui
from ezpz_tui import cli
names = [
    m.name for m in pkgutil.walk_packages(ezpz_tui.__path__, "ezpz_tui.")
    if not m.name.endswith("__main__")
]
for name in names:
    importlib.import_module(name)
cli.build_parser()
assert "ezpz_tui.ui.app" in sys.modules and "textual" in sys.modules
print(" ".join(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "mpi4py"))))
"""


def test_the_tui_process_imports_no_torch() -> None:
    """Every module of ezpz_tui (the app, the CLI, the core) imported in a fresh interpreter,
    since this pytest process has imported torch for other tests."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_THE_TUI],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "", f"imported by the TUI: {done.stdout}"
