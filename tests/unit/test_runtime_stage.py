"""``python -m runtime.stage`` on this node, on a real small venv: a copy is whole or absent, a
kept copy is reused only while its source is unchanged, and every failure is an answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runtime import stage


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("src") / "env"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(where)], check=True)
    return where


def answer(*args: str) -> tuple[int, dict]:
    """The node's exit status and its one answer line."""
    done = subprocess.run(
        [sys.executable, "-m", "runtime.stage", *args], capture_output=True, text=True, check=False
    )
    (line,) = [x for x in done.stdout.splitlines() if x.startswith(stage.MARK)]
    return done.returncode, json.loads(line[len(stage.MARK) :])


def test_a_kept_copy_is_reused_until_its_source_changes(venv: Path, tmp_path: Path) -> None:
    dest = tmp_path / "copy"
    copy = ("copy", "--source", str(venv), "--dest", str(dest), "--python", "bin/python", "--keep")
    code, first = answer(*copy)
    assert code == 0 and first["ok"] and first["reused"] is False
    assert stage.manifest(dest) == stage.manifest(venv)
    _, second = answer(*copy)
    assert second["ok"] and second["reused"] is True

    added = venv / "lib" / "added.txt"
    added.write_text("new in the source")
    try:
        _, third = answer(*copy)
        assert third["ok"] and third["reused"] is False
        assert (dest / "lib" / "added.txt").read_text() == "new in the source"
    finally:
        added.unlink()


def test_a_half_copy_is_never_taken_for_one_and_goes_with_the_next(
    venv: Path, tmp_path: Path
) -> None:
    dest = tmp_path / "copy"
    half = tmp_path / f"copy{stage._TEMP}4242"  # what a copy killed halfway leaves
    (half / "bin").mkdir(parents=True)
    copy = ("copy", "--source", str(venv), "--dest", str(dest), "--python", "bin/python", "--keep")
    _, made = answer(*copy)
    assert made["ok"] and made["reused"] is False and not half.exists()
    code, removed = answer("remove", "--dest", str(dest))
    assert code == 0 and removed == {**removed, "ok": True, "removed": 1}
    assert sorted(os.listdir(tmp_path)) == []


def test_a_copy_that_differs_from_its_source_is_named() -> None:
    want = {"bin": ["d"], "bin/python": ["l", "python3"], "lib/x.py": ["f", 10, 1]}
    have = {"bin": ["d"], "bin/python": ["l", "python3"], "lib/x.py": ["f", 9, 1]}
    assert stage._first_difference(want, have) == (
        "lib/x.py differs from the source (['f', 9, 1] against ['f', 10, 1])"
    )
    assert stage._first_difference(want, {"bin": ["d"]}) == "bin/python is missing from the copy"


def test_a_node_that_cannot_copy_answers_why_and_exits_0(venv: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    args = (
        "copy",
        "--source",
        str(venv),
        "--dest",
        str(blocker / "copy"),
        "--python",
        "bin/python",
    )
    code, said = answer(*args)
    assert code == 0  # an MPI launcher would kill the other nodes' copies on a failure
    assert said["ok"] is False and said["error"].startswith("Not a directory")
