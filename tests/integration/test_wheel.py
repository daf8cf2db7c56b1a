"""`pip install .` (not only `-e`) gives a working ezpz-tui with every theme of `themes/` and
the peak table of `runtime/efficiency/`.

The repository's top-level `themes/` reaches the wheel only through setup.py's package mapping,
so a checkout's tests alone would never notice it missing: here the project is built from a
copy, installed into a fresh venv, and asked from there. The venv sees this venv's packages
through a `.pth` line, appended after its own site-packages, so dependencies resolve offline
and the installed copy, not the checkout, is what imports.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "setup.py", "README.md", "ezpz_tui", "runtime", "themes")

_LOADER_PROBE = """
import json, ezpz_tui
from ezpz_tui.ui import themes
from runtime.efficiency import peaks
loaded, problems = themes.load_themes(themes.theme_dirs())
print(json.dumps({
    "package": ezpz_tui.__file__,
    "builtin": str(themes.BUILTIN_THEMES_DIR),
    "files": sorted(p.name for p in themes.BUILTIN_THEMES_DIR.glob("*.toml")),
    "themes": sorted(t.name for t in loaded),
    "problems": problems,
    "peaks": [peaks.TABLE.is_file(), len(peaks.table())],
}))
"""


def _run(argv: list[str | Path], cwd: Path, timeout: float = 300) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["EZPZ_TUI_CONFIG_DIR"] = str(cwd / "config")  # no user themes
    args = [str(a) for a in argv]
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.parametrize("editable", [False, True], ids=["wheel", "editable"])
def test_an_installed_ezpz_tui_starts_and_loads_every_theme(tmp_path: Path, editable: bool) -> None:
    src = tmp_path / "src"
    for name in SOURCES:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            src.mkdir(exist_ok=True)
            shutil.copy2(origin, src / name)
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], tmp_path)
    python = venv / "bin" / "python"
    purelib = Path(
        _run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path
        ).strip()
    )
    (purelib / "project-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps"]
    pip += ["--no-index", "--no-build-isolation"]
    if editable:
        _run([*pip, "-e", src], tmp_path)
    else:
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "-q",
                "--no-deps",
                "--no-index",
                "--no-build-isolation",
                "-w",
                tmp_path / "dist",
                src,
            ],
            tmp_path,
        )
        _run([*pip, *sorted((tmp_path / "dist").glob("ezpz_tui-*.whl"))], tmp_path)

    assert "usage: ezpz-tui" in _run([venv / "bin" / "ezpz-tui", "--help"], tmp_path)

    seen = json.loads(_run([python, "-c", _LOADER_PROBE], tmp_path))
    home = src if editable else purelib
    assert Path(seen["package"]).parent == home / "ezpz_tui", "the checkout must not shadow it"
    assert Path(seen["builtin"]) == (src / "themes" if editable else home / "ezpz_tui" / "themes")
    ours = sorted(p.name for p in (REPO / "themes").glob("*.toml"))
    assert ours and seen["files"] == ours
    assert seen["problems"] == []
    assert len(seen["themes"]) == len(ours) and all(n.startswith("ezpz-") for n in seen["themes"])
    assert seen["peaks"] == [True, 12]  # runtime/efficiency/peaks.json ships too
