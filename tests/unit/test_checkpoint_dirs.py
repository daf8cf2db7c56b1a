"""Which checkpoint a run resumes from: the newest complete one, never a torn one."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.checkpoint_dirs import (
    COMPLETE,
    Checkpoint,
    CheckpointError,
    complete,
    newest,
    resolve,
    step_dir,
    torn,
)


def make(run: Path, step: int, done: bool = True) -> Path:
    path = step_dir(run, step)
    path.mkdir(parents=True)
    (path / ".metadata").write_bytes(b"x")
    if done:
        (path / COMPLETE).write_text(f'{{"step": {step}}}')
    return path


def test_newest_complete_is_chosen_by_number_not_name(tmp_path: Path) -> None:
    make(tmp_path, 9)
    make(tmp_path, 10)
    make(tmp_path, 20, done=False)
    (tmp_path / "checkpoints" / "step-x").mkdir()
    assert [c.step for c in complete(tmp_path)] == [9, 10]
    assert newest(tmp_path) == Checkpoint(step_dir(tmp_path, 10), 10)
    assert torn(tmp_path) == [step_dir(tmp_path, 20)]


@pytest.mark.parametrize("given", ["run", "checkpoints", "folder"])
def test_resolve_takes_a_run_its_checkpoints_or_one_checkpoint(tmp_path: Path, given: str) -> None:
    make(tmp_path, 5)
    target = {
        "run": tmp_path,
        "checkpoints": tmp_path / "checkpoints",
        "folder": step_dir(tmp_path, 5),
    }[given]
    assert resolve(target) == Checkpoint(step_dir(tmp_path, 5), 5)


def test_resolve_says_why_there_is_nothing_to_load(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError) as caught:
        resolve(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path}: the run has no checkpoint in {tmp_path / 'checkpoints'}"
    )
    make(tmp_path, 7, done=False)
    with pytest.raises(CheckpointError, match=r"no complete checkpoint \(torn: step-7\)"):
        resolve(tmp_path)
    with pytest.raises(CheckpointError, match="checkpoint is torn"):
        resolve(step_dir(tmp_path, 7))
