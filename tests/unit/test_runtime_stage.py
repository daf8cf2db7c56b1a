"""``python -m runtime.stage`` on this node, on a real small venv: a copy is whole or absent, a
kept copy is reused only while its source is unchanged, the source's pack is made once and
reused while the source is unchanged, and every failure is an answer."""

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


@pytest.fixture
def pack(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "env.tar"


def answer(*args: str) -> tuple[int, dict]:
    """The node's exit status and its one answer line."""
    done = subprocess.run(
        [sys.executable, "-m", "runtime.stage", *args], capture_output=True, text=True, check=False
    )
    (line,) = [x for x in done.stdout.splitlines() if x.startswith(stage.MARK)]
    return done.returncode, json.loads(line[len(stage.MARK) :])


def copy_args(venv: Path, dest: Path, pack: Path, *more: str) -> tuple[str, ...]:
    return (
        "copy",
        "--source",
        str(venv),
        "--dest",
        str(dest),
        "--python",
        "bin/python",
        "--pack",
        str(pack),
        *more,
    )


def test_a_kept_copy_is_reused_until_its_source_changes(
    venv: Path, tmp_path: Path, pack: Path
) -> None:
    dest = tmp_path / "copy"
    copy = copy_args(venv, dest, pack, "--keep")
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
    venv: Path, tmp_path: Path, pack: Path
) -> None:
    dest = tmp_path / "copy"
    half = tmp_path / f"copy{stage._TEMP}4242"  # what a copy killed halfway leaves
    (half / "bin").mkdir(parents=True)
    copy = copy_args(venv, dest, pack, "--keep")
    _, made = answer(*copy)
    assert made["ok"] and made["reused"] is False and not half.exists()
    code, removed = answer("remove", "--dest", str(dest))
    assert code == 0 and removed == {**removed, "ok": True, "removed": 1}
    assert sorted(os.listdir(tmp_path)) == ["cache"]


def test_a_copy_that_differs_from_its_source_is_named() -> None:
    want = {"bin": ["d"], "bin/python": ["l", "python3"], "lib/x.py": ["f", 10, 1]}
    have = {"bin": ["d"], "bin/python": ["l", "python3"], "lib/x.py": ["f", 9, 1]}
    assert stage._first_difference(want, have) == (
        "lib/x.py differs from the source (['f', 9, 1] against ['f', 10, 1])"
    )
    assert stage._first_difference(want, {"bin": ["d"]}) == "bin/python is missing from the copy"


def test_a_node_that_cannot_copy_answers_why_and_exits_0(
    venv: Path, tmp_path: Path, pack: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    code, said = answer(*copy_args(venv, blocker / "copy", pack))
    assert code == 0  # an MPI launcher would kill the other nodes' copies on a failure
    assert said["ok"] is False and said["error"].startswith("Not a directory")


def test_the_pack_is_made_once_and_reused_until_a_file_of_the_source_changes(
    venv: Path, tmp_path: Path, pack: Path
) -> None:
    _, first = answer(*copy_args(venv, tmp_path / "a", pack))
    assert first["ok"] and first["pack"]["built"] is True
    assert first["pack"]["source_read"] == first["bytes"] == stage.size_of(stage.manifest(venv))
    made = pack.stat().st_ino
    _, second = answer(*copy_args(venv, tmp_path / "b", pack))
    assert second["ok"] and second["pack"]["built"] is False
    assert second["pack"]["source_read"] == 0 and pack.stat().st_ino == made
    assert stage.manifest(tmp_path / "a") == stage.manifest(tmp_path / "b") == stage.manifest(venv)

    changed = venv / "lib" / "changed.txt"
    changed.write_text("new in the source")
    try:
        _, third = answer(*copy_args(venv, tmp_path / "c", pack))
        assert third["ok"] and third["pack"]["built"] is True and pack.stat().st_ino != made
        assert third["pack"]["source_read"] == third["bytes"] == first["bytes"] + 17
        assert (tmp_path / "c" / "lib" / "changed.txt").read_text() == "new in the source"
    finally:
        changed.unlink()
