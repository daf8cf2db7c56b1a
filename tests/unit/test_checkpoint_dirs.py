"""Which checkpoint a run resumes from: the newest complete one, never a torn one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runtime.checkpoint import earlier_advice
from runtime.checkpoint_dirs import (
    COMPLETE,
    Checkpoint,
    CheckpointError,
    complete,
    earlier,
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


def test_the_checkpoint_before_one_that_cannot_be_read_skips_torn_ones(tmp_path: Path) -> None:
    make(tmp_path, 5)
    make(tmp_path, 10, done=False)
    make(tmp_path, 15)
    assert earlier(Checkpoint(step_dir(tmp_path, 15), 15)) == Checkpoint(step_dir(tmp_path, 5), 5)
    assert earlier(Checkpoint(step_dir(tmp_path, 5), 5)) is None


@pytest.mark.parametrize("named", ["run", "folder", "flag=folder", "none"])
def test_the_advice_names_the_command_resuming_from_the_one_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, named: str
) -> None:
    """The rank's own command, launched with ``--resume-from`` the checkpoint before, and any
    word of it that named the one that cannot be read naming that one instead."""
    before, bad = make(tmp_path, 5), make(tmp_path, 10)
    word = {
        "run": ["--resume", str(tmp_path)],
        "folder": ["--resume", str(bad)],
        "flag=folder": [f"--resume={bad}"],
        "none": [],
    }[named]
    monkeypatch.setattr(sys, "orig_argv", ["python", "train.py", "--steps", "9", *word])
    swapped = {
        "run": ["--resume", str(before)],
        "folder": ["--resume", str(before)],
        "flag=folder": [f"--resume={before}"],
        "none": [],
    }[named]
    command = " ".join(["python", "train.py", "--steps", "9", *swapped])
    assert earlier_advice(Checkpoint(bad, 10)) == (
        f"; the newest earlier complete checkpoint is step 5, {before}: resume from it with "
        f"`ezpz-tui launch --resume-from {before} -- {command}` (with this run's launch flags)"
    )
    assert earlier_advice(Checkpoint(before, 5)) == (
        f"; no earlier complete checkpoint in {tmp_path / 'checkpoints'}"
    )
