"""The doctor's "rank python" row with real interpreters: this venv's, a second venv without
torch, a console script whose first line names its Python, and a command that is not Python."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ezpz_tui.core.checking.check import Context
from ezpz_tui.core.checking.interpreter import compare, rank_interpreter, rank_python
from ezpz_tui.core.launching.allocation import detect_allocation
from ezpz_tui.core.launching.plan import LaunchPlan


def context(command: list[str], env: dict[str, str] | None = None) -> Context:
    env = dict(os.environ) if env is None else env
    plan = LaunchPlan(command=tuple(command))
    alloc = detect_allocation(env={})
    return Context(alloc, plan, Path("."), 20.0, env, sys.executable, lambda _: None)


@pytest.fixture(scope="module")
def bare_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with no torch: what a rank gets from a module that was not loaded."""
    root = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root


def test_the_demo_runs_this_python() -> None:
    verdict = rank_python.run(context([sys.executable, "-m", "runtime.examples.demo"]))
    assert verdict.level == "ok", verdict
    assert "this Python" in verdict.reason and "torch 2." in verdict.reason


def test_a_python_without_torch_is_an_error(bare_venv: Path) -> None:
    verdict = rank_python.run(context([str(bare_venv / "bin" / "python"), "train.py"]))
    assert verdict.level == "error"
    assert "has no torch" in verdict.reason and str(bare_venv) in verdict.reason


def test_python3_is_found_on_the_ranks_path(bare_venv: Path) -> None:
    env = dict(os.environ, PATH=f"{bare_venv / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert rank_interpreter(["python3", "train.py"], env) == str(bare_venv / "bin" / "python3")
    assert rank_python.run(context(["python3", "train.py"], env)).level == "error"


def test_a_console_script_counts_as_its_python(tmp_path: Path) -> None:
    """torchrun in a venv is a script whose first line names the venv's Python."""
    script = tmp_path / "torchrun"
    script.write_text(f"#!{sys.executable}\nprint('hi')\n")
    script.chmod(0o755)
    env = {"PATH": str(tmp_path)}
    assert rank_interpreter(["torchrun", "--nproc-per-node=2", "t.py"], env) == sys.executable
    via_env = tmp_path / "tool"
    via_env.write_text("#!/usr/bin/env python3\n")
    via_env.chmod(0o755)
    assert rank_interpreter(["tool"], {"PATH": f"{tmp_path}{os.pathsep}/usr/bin"}) is not None


def test_a_command_that_is_not_python_is_not_compared(tmp_path: Path) -> None:
    verdict = rank_python.run(context(["/bin/sh", "train.sh"]))
    assert verdict.level == "ok" and "not a Python program" in verdict.reason


def test_a_missing_python_is_an_error() -> None:
    verdict = rank_python.run(context(["python9.99", "train.py"]))
    assert verdict.level == "error" and "does not run" in verdict.reason


def test_versions_and_prefixes_compared() -> None:
    ours = {"prefix": "/a", "python": "3.11.2", "torch": "2.13.0"}
    other_torch = compare("/b/python", {**ours, "prefix": "/b", "torch": "2.5.1"}, ours)
    assert other_torch.level == "error" and "torch 2.5.1 vs 2.13.0" in other_torch.reason
    assert compare("/b/python", {**ours, "prefix": "/b"}, ours).level == "warning"
    assert compare("/a/bin/python", dict(ours), ours).level == "ok"
