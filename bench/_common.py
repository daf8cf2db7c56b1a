"""What the benches that start real runs share: this checkout first on ``sys.path``, the mpiexec
they compare against, ``ezpz-tui`` as a person runs it in a clean environment, commands run from
the repository, scratch directories, a figure printed beside its baseline.

Imported as a sibling (``from _common import ...``): a script's own directory is first on
``sys.path`` when it is run as ``python bench/NAME.py``. Importing it puts this checkout's
``runtime`` and ``ezpz_tui`` ahead of whatever is installed. Not a bench itself.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PY = sys.executable
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def bench_parser(doc: str | None, parts: Sequence[str]) -> argparse.ArgumentParser:
    """A bench's parser: its docstring's first line, ``--only`` one of ``parts``, ``--keep``."""
    parser = argparse.ArgumentParser(description=(doc or "").splitlines()[0])
    parser.add_argument("--only", choices=tuple(parts), help="run one part")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    return parser


def print_rerun(script: str, args: argparse.Namespace) -> None:
    """The command that repeats this bench, every setting spelled out."""
    words = ["python", f"bench/{script}"]
    for name, value in vars(args).items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            words.append(flag)
        elif isinstance(value, list):  # a repeated flag
            words += [word for item in value for word in (flag, str(item))]
        elif value not in (None, False):
            words += [flag, str(value)]
    print("rerun: " + shlex.join(words))


def versus(value: float, base: float, form: str) -> str:
    """``value`` beside the baseline measured in the same run, ``form`` (e.g. ``"{:.2f} s"``)
    for both, and their ratio; none where the baseline is zero (an idle figure can be)."""
    ratio = f"{value / base:.2f}x" if base > 0 else "no ratio"
    return f"{form.format(value)} vs {form.format(base)}, {ratio}"


def mpiexec() -> str:
    """The mpich wheel's mpiexec next to this Python, else one on PATH: the one ezpz-tui uses."""
    local = Path(PY).parent / "mpiexec"
    return str(local) if local.exists() else shutil.which("mpiexec") or "mpiexec"


def with_repo_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this checkout first on ``PYTHONPATH``, so ranks import it too."""
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


def ezpz_tui() -> list[str]:
    """The console script as a person types it, else the module."""
    script = Path(PY).parent / "ezpz-tui"
    return [str(script)] if script.exists() else [PY, "-m", "ezpz_tui"]


def clean_env(outputs: Path) -> dict[str, str]:
    """No job, no stray rank variables, outputs in the scratch directory."""
    from runtime.env import RANK_VARS, RUN_DIR_VAR, SIZE_VARS

    drop = (*RANK_VARS, *SIZE_VARS.values(), RUN_DIR_VAR)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in drop and not k.startswith(("PBS_", "SLURM_"))
    }
    env["EZPZ_OUTPUTS"] = str(outputs)
    return with_repo_path(env)


def run_in_repo(
    argv: Sequence[str], env: dict[str, str], timeout: float, **streams: Any
) -> subprocess.CompletedProcess[bytes]:
    """``argv`` run from the repository root with no stdin; ``streams`` say where output goes."""
    return subprocess.run(
        list(argv), env=env, cwd=REPO, stdin=subprocess.DEVNULL, timeout=timeout, **streams
    )


@contextlib.contextmanager
def scratch(prefix: str, keep: bool) -> Iterator[Path]:
    """A fresh temporary directory, removed afterwards unless ``keep`` (then it is named)."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield root
    finally:
        if keep:
            print(f"scratch kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
