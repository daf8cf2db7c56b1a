"""Which rank commands the launch's own Python watches in process, and what the ranks get."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ezpz_tui.core.launching.rank_program import (
    SITE_DIR,
    in_process_env,
    launcher_env,
    watched_in_process,
)
from runtime import stackdump
from runtime.env import CAPTURE_IN_PROCESS_VAR


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A venv's bin folder: python, python3 and python3.11 one file; another Python beside."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    real = bin_dir / "python3.11"
    real.write_text("#!/bin/sh\n")
    real.chmod(0o755)
    (bin_dir / "python3").symlink_to("python3.11")
    (bin_dir / "python").symlink_to("python3.11")
    other = bin_dir / "python3.12"
    other.write_text("#!/bin/sh\n")
    return bin_dir


def which_in(bin_dir: Path):
    return lambda name: str(bin_dir / name) if (bin_dir / name).exists() else None


@pytest.mark.parametrize(
    "command",
    [
        ("python", "train.py", "--lr", "1"),
        ("python3", "-m", "runtime.examples.train"),
        ("python3.11", "-c", "pass"),
        ("python", "-u", "-X", "importtime", "-W", "error", "train.py"),
        ("python", "-Xdev", "-OO", "-c", "pass"),
        ("python", "--check-hash-based-pycs", "always", "train.py"),
        ("python",),
    ],
)
def test_the_launchs_python_is_watched_in_process(venv: Path, command: tuple[str, ...]) -> None:
    assert watched_in_process(command, str(venv / "python"), which_in(venv))


def test_by_its_path_too(venv: Path) -> None:
    assert watched_in_process((str(venv / "python3"), "x.py"), str(venv / "python"), which_in(venv))


@pytest.mark.parametrize(
    "command",
    [
        ("python3.12", "train.py"),  # another interpreter in the same folder
        ("sh", "-c", "python train.py"),  # not a Python
        ("python", "-I", "train.py"),  # PYTHONPATH ignored
        ("python", "-E", "train.py"),
        ("python", "-S", "train.py"),  # no site: no sitecustomize
        ("python", "-uS", "train.py"),
        ("python", "--version"),  # an option not known here
        ("nosuch", "train.py"),
        (),
    ],
)
def test_anything_else_keeps_the_wrapper(venv: Path, command: tuple[str, ...]) -> None:
    assert not watched_in_process(command, str(venv / "python"), which_in(venv))


def test_the_base_interpreter_a_venv_links_to_is_not_the_venvs(venv: Path, tmp_path: Path) -> None:
    """The same file, another folder: it has none of the venv's packages."""
    elsewhere = tmp_path / "base" / "bin"
    elsewhere.mkdir(parents=True)
    (elsewhere / "python").symlink_to(venv / "python3.11")
    assert not watched_in_process(("python", "x.py"), str(venv / "python"), which_in(elsewhere))


def test_the_ranks_get_the_run_and_the_sitecustomize_first(tmp_path: Path) -> None:
    assert SITE_DIR == stackdump.SITE_DIR
    env = in_process_env(tmp_path, f"/mine{os.pathsep}")
    assert env[CAPTURE_IN_PROCESS_VAR] == str(tmp_path)
    assert env["PYTHONPATH"] == f"{SITE_DIR}{os.pathsep}/mine{os.pathsep}"  # kept verbatim
    assert env["PYTHONUNBUFFERED"] == "1"
    assert in_process_env(tmp_path, "")["PYTHONPATH"] == str(SITE_DIR)
    assert in_process_env(tmp_path, env["PYTHONPATH"])["PYTHONPATH"] == env["PYTHONPATH"]


def test_the_launcher_itself_is_not_watched(tmp_path: Path) -> None:
    """The launcher's own environment loses the watch (a Python launcher would have watched
    itself as rank 0 of 1 and passed RANK=0 WORLD_SIZE=1 to every rank: found by CI with a
    stand-in PALS mpiexec written in Python) and gets back the PYTHONPATH the ranks add to."""
    env = {"HOME": "/root", **in_process_env(tmp_path / "run", f"/lib{os.pathsep}/more")}
    launcher_env(env)
    assert env == {"HOME": "/root", "PYTHONPATH": f"/lib{os.pathsep}/more", "PYTHONUNBUFFERED": "1"}
    alone = in_process_env(tmp_path / "run", "")
    launcher_env(alone)
    assert alone == {"PYTHONUNBUFFERED": "1"}
    wrapped = {"PYTHONPATH": str(SITE_DIR)}  # a launch the wrapper watches: left as it is
    launcher_env(wrapped)
    assert wrapped == {"PYTHONPATH": str(SITE_DIR)}
