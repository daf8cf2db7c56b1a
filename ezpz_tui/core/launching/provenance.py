"""Where a run came from, recorded in its ``run.toml``: the code (the git commit of the script's
repository and whether it had uncommitted changes), the software (Python, torch, mpi4py, this
program, the launcher's version line), and the environment (loaded modules, the conda or venv
prefix, the working directory). "What changed between the run that worked and this one" is
then answered from the records, and Compare shows the differences.

Everything is read without importing torch (package metadata only) and with a time limit on
each command, so a slow filesystem or a hanging launcher costs at most a few seconds, never the
launch. A fact that cannot be had is left out. A launch gathers them once its launcher has
started (:class:`~ezpz_tui.core.launching.making.Provenance`), beside its ranks' start rather
than before it, and the three commands (the launcher's ``--version``, two of git) run side by
side, and the versions are read from the distributions' own folders on ``sys.path`` as
``importlib.metadata`` finds them, without importing it (and the email parser behind it).
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

TIMEOUT_S = 3.0
PACKAGES = ("torch", "mpi4py", "ezpz-tui")
_VERSION = re.compile(r"\d+\.\d+")
_LAUNCHER_VERSIONS: dict[str, str | None] = {}  # launcher -> its version line, asked once


def provenance(argv: Sequence[str], cwd: Path) -> dict[str, Any]:
    """The facts about a launch of ``argv`` (the launcher's command line, the rank's command
    after ``--``) from ``cwd``."""
    # Started first, read last: the three commands run while the rest is gathered.
    launcher = argv[0] if argv else None
    version = None
    if launcher is not None and launcher not in _LAUNCHER_VERSIONS:
        version = _Started([launcher, "--version"])
    git = _started_git(_script_dir(argv, cwd))
    facts: dict[str, Any] = {
        "cwd": str(cwd),
        "python": platform.python_version(),
        "python_executable": sys.executable,
    }
    for name in PACKAGES:
        found = installed_version(name)
        if found is not None:
            facts[name.replace("-", "_")] = found
    prefix = os.environ.get("CONDA_PREFIX") or os.environ.get("VIRTUAL_ENV") or sys.prefix
    facts["env_prefix"] = prefix
    modules = [m for m in os.environ.get("LOADEDMODULES", "").split(":") if m]
    if modules:
        facts["modules"] = modules
    if version is not None:
        _LAUNCHER_VERSIONS[launcher] = _version_line(version.output())
    line = _LAUNCHER_VERSIONS.get(launcher) if launcher is not None else None
    if line:
        facts["launcher_version"] = line
    state = _git_answer(*git)
    if state:
        facts["git"] = state
    return facts


def _name_key(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``ezpz-tui``, ``ezpz_tui``)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def installed_version(name: str) -> str | None:
    """The version of the distribution ``name`` that ``importlib.metadata.version`` would give:
    the first ``*.dist-info`` or ``*.egg-info`` folder of that name on ``sys.path``, its
    ``METADATA`` (``PKG-INFO``) ``Version:`` header; None when none is installed."""
    key = _name_key(name)
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        for item in names:
            stem, _, suffix = item.rpartition(".")
            if suffix not in ("dist-info", "egg-info") or _name_key(stem.partition("-")[0]) != key:
                continue
            found = _metadata_version(os.path.join(entry or ".", item))
            if found is not None:
                return found
    return None


def _metadata_version(folder: str) -> str | None:
    for name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    if not line.strip():
                        break  # the headers end at the first blank line
                    if line.startswith("Version:"):
                        return line.partition(":")[2].strip() or None
        except OSError:
            continue
    return None


def _script_dir(argv: Sequence[str], cwd: Path) -> Path:
    """The folder of the rank command's script (the first argument after ``--`` that is a
    file), else the working directory (``python -m package`` runs from there)."""
    command = list(argv[list(argv).index("--") + 1 :]) if "--" in argv else []
    for word in command:
        path = Path(word) if os.path.isabs(word) else cwd / word
        if word.endswith(".py") and path.is_file():
            return path.parent
    return cwd


class _Started:
    """A command started now and read later, within :data:`TIMEOUT_S` of its start."""

    def __init__(self, argv: Sequence[str], cwd: Path | None = None) -> None:
        self._deadline = time.monotonic() + TIMEOUT_S
        try:
            self._proc: subprocess.Popen[str] | None = subprocess.Popen(
                list(argv),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        except (OSError, ValueError):
            self._proc = None

    def output(self) -> str | None:
        """What it printed, or None when it failed, could not start or ran out of time."""
        proc = self._proc
        if proc is None:
            return None
        try:
            out, _ = proc.communicate(timeout=max(self._deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return None
        except (OSError, ValueError):
            return None
        return out if proc.returncode == 0 else None


def _started_git(folder: Path) -> tuple[_Started, _Started]:
    """Both git questions about ``folder``, started side by side: :func:`_git_answer` reads them."""
    return (
        _Started(["git", "-C", str(folder), "rev-parse", "--show-toplevel", "HEAD"]),
        _Started(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"]),
    )


def _git_answer(head_cmd: _Started, status_cmd: _Started) -> dict[str, Any] | None:
    head = head_cmd.output()
    status = status_cmd.output()
    if head is None or len(head.split()) != 2:
        return None
    root, commit = head.split()
    state: dict[str, Any] = {"root": root, "commit": commit}
    if status is not None:
        state["dirty"] = bool(status.strip())
    return state


def git_state(folder: Path) -> dict[str, Any] | None:
    """The repository holding ``folder``: its root, HEAD commit and whether tracked files
    differ from it; None outside a repository or without git."""
    return _git_answer(*_started_git(folder))


def _version_line(out: str | None) -> str | None:
    """The first line of ``out`` that holds a version number, spaces collapsed."""
    for line in (out or "").splitlines():
        if _VERSION.search(line):
            return " ".join(line.split())
    return None


def launcher_version(launcher: str) -> str | None:
    """The first line of ``launcher --version`` that holds a version number, spaces collapsed
    (MPICH's Hydra prints a banner first: ``Version: 5.0.2``; srun: ``slurm 23.02.5``). Asked
    once per launcher and process."""
    if launcher not in _LAUNCHER_VERSIONS:
        _LAUNCHER_VERSIONS[launcher] = _version_line(_Started([launcher, "--version"]).output())
    return _LAUNCHER_VERSIONS[launcher]
