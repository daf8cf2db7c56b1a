"""Do the ranks run the Python this doctor probed?

Every probe runs in the TUI's own interpreter; the ranks run whatever their command names
(``python3`` found on PATH, a venv's ``torchrun`` whose first line names its interpreter). When
those differ, the torch row above describes a torch the ranks never import, and the run fails
late on another machine's ``import torch`` or with another version's behaviour. Versions are
read from package metadata in both interpreters: nothing imports torch.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ezpz_tui.core.checking.check import Context, Verdict, declare, error, ok, warning

_PYTHON = re.compile(r"python(\d+(\.\d+)?)?$")
_FACTS = """
import json, platform, sys
from importlib import metadata
try:
    torch = metadata.version("torch")
except metadata.PackageNotFoundError:
    torch = None
print(json.dumps({"prefix": sys.prefix, "python": platform.python_version(), "torch": torch}))
"""


def rank_interpreter(command: Sequence[str], env: Mapping[str, str]) -> str | None:
    """The Python the ranks' command runs, as a path, or None when it runs none we can name
    (a shell script, a binary). A program found on PATH whose first line names a Python
    (``torchrun``, ``accelerate``) counts as that Python."""
    if not command:
        return None
    word = command[0]
    found = _which(word, env)
    if _PYTHON.match(Path(word).name):
        return found or word
    if found is None:
        return None
    try:
        with open(found, "rb") as fh:
            first = fh.readline(256).decode(errors="replace")
    except OSError:
        return None
    if not first.startswith("#!"):
        return None
    words = first[2:].split()
    if len(words) >= 2 and Path(words[0]).name == "env":
        words = words[1:]
    if words and _PYTHON.match(Path(words[0]).name):
        return words[0] if os.path.isabs(words[0]) else (_which(words[0], env) or words[0])
    return None


def _which(word: str, env: Mapping[str, str]) -> str | None:
    return shutil.which(word, path=env.get("PATH", os.defpath))


@declare("rank python")
def rank_python(ctx: Context) -> Verdict:
    if ctx.plan is None:
        return ok("No plan yet: the ranks' Python is checked against a command.")
    python = rank_interpreter(ctx.plan.command, ctx.env)
    if python is None:
        return ok(f"{ctx.plan.command[0]} is not a Python program; nothing to compare.")
    theirs = ctx.python_json(_FACTS, python)
    if "error" in theirs:
        return error(
            f"The ranks' Python {python} does not run: {theirs['error']}.",
            "Give the command a Python that exists on every host, or load its module first.",
        )
    ours = ctx.python_json(_FACTS)
    if "error" in ours:
        return warning(f"{ctx.python} does not run: {ours['error']}.", "See the torch row.")
    return compare(python, theirs, ours)


def compare(python: str, theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> Verdict:
    """The verdict on the ranks' interpreter facts against the probed one's."""
    if theirs["torch"] is None and ours["torch"] is not None:
        return error(
            f"The ranks' Python ({python}, {theirs['prefix']}) has no torch; the doctor "
            f"probed torch {ours['torch']} in {ours['prefix']}.",
            "Run the command with the Python that has torch (give its full path), or install "
            "torch there.",
        )
    differs = [
        f"{name} {theirs[name]} vs {ours[name]}"
        for name in ("python", "torch")
        if theirs[name] != ours[name]
    ]
    if differs:
        return error(
            f"The ranks run {python} ({theirs['prefix']}): {', '.join(differs)} here; the "
            "checks above describe the wrong torch.",
            f"Start ezpz-tui from {theirs['prefix']}, or give the command this Python.",
        )
    if os.path.realpath(theirs["prefix"]) != os.path.realpath(ours["prefix"]):
        return warning(
            f"The ranks run {python} from {theirs['prefix']}, not {ours['prefix']}; Python "
            f"and torch versions match, other packages may not.",
            f"Start ezpz-tui from {theirs['prefix']}, or give the command this Python.",
        )
    version = f"torch {theirs['torch']}" if theirs["torch"] else "no torch"
    return ok(f"The ranks run this Python ({theirs['python']}, {version}).")
