"""Where a relaunch's child starts, as the question says it, from what the parent's run
directory holds: whether its rank 0 answers a request, its checkpoints, the steps it recorded.
Run directories written here; no process is started."""

from __future__ import annotations

import json
from pathlib import Path

from ezpz_tui.core.launching.handover import steps_done
from ezpz_tui.core.launching.resuming import no_checkpoint_words, parent_resume
from runtime.checkpoint_dirs import ANSWERS, COMPLETE, step_dir
from runtime.rundir import RunDir


def parent(tmp_path: Path, steps: int, answers: bool, saved: tuple[int, ...] = ()) -> Path:
    run = tmp_path / "20261128-120000-000-tp1pp1cp1"
    RunDir(run).make_folders()
    lines = "".join(json.dumps({"rank": 0, "step": s, "metrics": {}}) + "\n" for s in range(steps))
    RunDir(run).metrics(0).write_text(lines)
    if answers:
        (run / ANSWERS).write_text(json.dumps({"poll_every": 1}))
    for step in saved:
        step_dir(run, step).mkdir(parents=True)
        (step_dir(run, step) / COMPLETE).write_text("{}")
    return run


def test_a_live_run_that_answers_continues_at_the_step_it_is_at(tmp_path: Path) -> None:
    run = parent(tmp_path, 389, answers=True, saved=(300,))
    resume = parent_resume(run, alive=True)
    assert resume is not None and resume.given == run
    assert resume.describe() == "continues at step 389 (saved now)"


def test_a_live_run_that_cannot_answer_redoes_the_steps_after_its_newest(tmp_path: Path) -> None:
    run = parent(tmp_path, 389, answers=False, saved=(300,))
    resume = parent_resume(run, alive=True)
    assert resume is not None and resume.given == run
    assert resume.describe() == "starts at step 300, the newest checkpoint (89 steps redone)"


def test_a_run_without_checkpoints_or_an_answer_starts_at_step_0(tmp_path: Path) -> None:
    run = parent(tmp_path, 389, answers=False)
    assert parent_resume(run, alive=True) is None
    assert no_checkpoint_words(run) == (
        f"starts at step 0: {run.name} saves no checkpoints (see runtime.checkpoint)"
    )


def test_an_ended_run_resumes_from_its_newest_checkpoint_as_before(tmp_path: Path) -> None:
    """Nothing to save: the answer mark of its Checkpointer, left behind, changes nothing."""
    run = parent(tmp_path, 389, answers=True, saved=(300,))
    resume = parent_resume(run, alive=False)
    assert resume is not None and resume.given == step_dir(run, 300)
    assert resume.describe() == f"resumes at step 300 from {step_dir(run, 300)}"


def test_the_steps_done_come_from_the_end_of_a_long_metrics_file(tmp_path: Path) -> None:
    run = parent(tmp_path, 5000, answers=True)
    with open(RunDir(run).metrics(0), "a") as fh:
        fh.write('{"rank": 0, "step": 5000, "metr')  # a line still being written
    assert steps_done(run) == 5000
    assert steps_done(tmp_path / "nothing") is None
