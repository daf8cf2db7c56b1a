"""Outputs directories that cannot hold runs: a file, under a file, read-only, full.

Real filesystems: a file in tmp_path, and a 2 MB tmpfs remounted read-only or filled up. Every
failure is an OutputsError whose message names the outputs directory and the cause, and nothing
half made is left behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ezpz_tui.core.launching.making import RunMaker
from ezpz_tui.core.runs.outputs import OutputsError, check_listable, launch_error
from ezpz_tui.core.runs.record import RunStoreError
from tests.fixtures.mounts import fill, make_read_only, tmpfs


def test_outputs_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "out"
    path.write_text("a file")
    store = RunMaker(path)
    with pytest.raises(OutputsError) as caught:
        store.create({})
    assert str(caught.value) == f"cannot create a run in {path}: not a directory"
    with pytest.raises(OutputsError, match=f"^cannot list runs in {path}: not a directory$"):
        check_listable(path)
    with pytest.raises(OutputsError, match="cannot list runs"):
        store.resolve("20261122")
    assert store.list_runs() == []  # the runs panel's listing still never raises
    assert path.read_text() == "a file"


def test_outputs_under_a_file_names_the_file(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    path = blocker / "out"
    with pytest.raises(OutputsError) as caught:
        RunMaker(path).create({})
    assert str(caught.value) == (
        f"cannot create a run in {path}: not a directory ({blocker} is a file)"
    )
    assert isinstance(caught.value, RunStoreError)  # callers catching the old error still do


def test_missing_outputs_is_listable_and_created_on_launch(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b"
    check_listable(path)  # no runs yet is not an error
    run = RunMaker(path).create({})
    assert run.parent == path


def test_read_only_outputs(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro") as where:
        make_read_only(where)
        with pytest.raises(OutputsError) as caught:
            RunMaker(where).create({})
        assert str(caught.value) == f"cannot create a run in {where}: read-only file system"
        check_listable(where)  # can be read: listing it is fine
        assert os.listdir(where) == []


def test_full_outputs_leaves_no_half_made_run(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "full") as where:
        fill(where)
        with pytest.raises(OutputsError) as caught:
            RunMaker(where).create({"command": ["x"]})
        assert str(caught.value) == f"cannot create a run in {where}: no space left on device"
        assert os.listdir(where) == ["filler"], "the half-made run directory is removed"


def test_launch_error_words_a_bare_os_error(tmp_path: Path) -> None:
    exc = OSError(28, "No space left on device", str(tmp_path / "x" / "launcher.log"))
    assert (
        launch_error(tmp_path, exc) == f"cannot create a run in {tmp_path}: no space left on device"
    )
    assert launch_error(tmp_path, RunStoreError("as is")) == "as is"
