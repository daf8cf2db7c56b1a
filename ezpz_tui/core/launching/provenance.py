"""Where a run came from, recorded in its ``run.toml``: the code (the git commit of the script's
repository and whether it had uncommitted changes), the software (Python, torch, mpi4py, this
program), and the environment (loaded modules, the conda or venv
prefix, the working directory). "What changed between the run that worked and this one" is
then answered from the records, and Compare shows the differences.

Everything is read without importing torch (package metadata only) and with a time limit on
each command, so a slow filesystem or a hanging launcher costs at most a few seconds, never the
launch. A fact that cannot be had is left out.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

TIMEOUT_S = 3.0
PACKAGES = ("torch", "mpi4py", "ezpz-tui")


def provenance(argv: Sequence[str], cwd: Path) -> dict[str, Any]:
    """The facts about a launch of ``argv`` (the launcher's command line, the rank's command
    after ``--``) from ``cwd``."""
    facts: dict[str, Any] = {
        "cwd": str(cwd),
        "python": platform.python_version(),
        "python_executable": sys.executable,
    }
    for name in PACKAGES:
        try:
            facts[name.replace("-", "_")] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    prefix = os.environ.get("CONDA_PREFIX") or os.environ.get("VIRTUAL_ENV") or sys.prefix
    facts["env_prefix"] = prefix
    modules = [m for m in os.environ.get("LOADEDMODULES", "").split(":") if m]
    if modules:
        facts["modules"] = modules
    git = git_state(_script_dir(argv, cwd))
    if git:
        facts["git"] = git
    return facts


def _script_dir(argv: Sequence[str], cwd: Path) -> Path:
    """The folder of the rank command's script (the first argument after ``--`` that is a
    file), else the working directory (``python -m package`` runs from there)."""
    command = list(argv[list(argv).index("--") + 1 :]) if "--" in argv else []
    for word in command:
        path = Path(word) if os.path.isabs(word) else cwd / word
        if word.endswith(".py") and path.is_file():
            return path.parent
    return cwd


def _run(argv: Sequence[str], cwd: Path | None = None) -> str | None:
    try:
        done = subprocess.run(
            list(argv),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(folder: Path) -> dict[str, Any] | None:
    """The repository holding ``folder``: its root, HEAD commit and whether tracked files
    differ from it; None outside a repository or without git."""
    head = _run(["git", "-C", str(folder), "rev-parse", "--show-toplevel", "HEAD"])
    if head is None or len(head.split()) != 2:
        return None
    root, commit = head.split()
    status = _run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"])
    state: dict[str, Any] = {"root": root, "commit": commit}
    if status is not None:
        state["dirty"] = bool(status.strip())
    return state
