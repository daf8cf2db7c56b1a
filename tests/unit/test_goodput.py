"""The goodput ledger's arithmetic (``ezpz_tui/core/watching/goodput.py``) on run directories
written by hand, every second of them chosen (``tests/fixtures/ledger_runs.py``), and what
shows it: ``ezpz-tui goodput``, the Compare row, ``summary.json`` and ``report.md``."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from ezpz_tui.cli import main
from ezpz_tui.core.comparing.compare import compare
from ezpz_tui.core.watching.goodput import (
    SEGMENTS,
    RunSpan,
    Step,
    allocation_ledger,
    run_ledger,
    run_pieces,
)
from runtime import records
from runtime.rundir import RunDir, State
from tests.fixtures.ledger_runs import JOB, T, resumed_pair, steps_from, write_run


def seconds(ledger: Any) -> dict[str, float]:
    return {name: round(value, 6) for name, value in ledger.segments.items() if value}


def adds_up(ledger: Any) -> None:
    assert sum(ledger.segments.values()) == pytest.approx(ledger.wall_s, rel=1e-9, abs=1e-9)


def test_a_run_s_wall_time_by_segment(tmp_path: Path) -> None:
    """Made at T, staged for 1 s before its launch at T+2, its first step (of 1 s) ends at
    T+5, ten steps to T+14, the save after step 5 (recorded by a later step, as an
    asynchronous save's figures come) held step 4 for 0.25 s, and it ends at T+16."""
    steps = steps_from(0, 9, T + 5)
    steps[6][1].update(ckpt_step=5.0, ckpt_save_s=0.25, ckpt_write_s=0.9)
    run = write_run(tmp_path, "run-a", created=T, start=T + 2, end=T + 16, steps=steps, stage_s=1)
    ledger = run_ledger(run)
    assert ledger.wall_s == 16
    assert seconds(ledger) == {
        "staging": 1,
        "startup": 3,
        "productive": 9.75,
        "checkpoint": 0.25,
        "after": 2,
    }
    assert ledger.goodput == pytest.approx(9.75 / 16)
    held = [p for p in ledger.pieces if p.segment == "checkpoint"]
    assert [(p.start - T, p.end - T) for p in held] == [(8.75, 9.0)]  # step 4's end
    adds_up(ledger)


def test_a_save_the_supervisor_asked_for_holds_the_step_until_written(tmp_path: Path) -> None:
    steps = steps_from(0, 9, T + 5, dt=2.0)
    steps[9][1].update(ckpt_step=10.0, ckpt_save_s=0.1, ckpt_write_s=1.5, ckpt_requested=1.0)
    run = write_run(tmp_path, "run-a", created=T, start=T, end=T + 23, steps=steps)
    assert run_ledger(run).segments["checkpoint"] == pytest.approx(1.5)


def test_a_retry_redoes_the_steps_since_the_checkpoint_after_its_restart(tmp_path: Path) -> None:
    parent, child = resumed_pair(tmp_path)
    first = run_ledger(parent)
    # Its steps from T+4 to T+12, then the failure's detection and stop.
    assert seconds(first) == {"startup": 4, "productive": 8, "after": 5}
    second = run_ledger(child)
    assert second.redone_steps == 3 and second.redone_span == (5, 7)
    assert seconds(second) == {"restart": 4, "redone": 3, "productive": 4, "after": 2}
    adds_up(second)

    job = allocation_ledger([parent, child])
    assert job.wall_s == 31 and job.runs == ("run-1", "run-2")
    # The parent's stop (its failing rank's end, T+15) to the child's first step's start
    # (T+22): 7 s of restart across both runs and the second between them, nothing idle.
    assert seconds(job) == {
        "startup": 4,
        "productive": 12,
        "redone": 3,
        "after": 5,
        "restart": 7,
    }
    restart = [p for p in job.pieces if p.segment == "restart"]
    assert restart[0].start == T + 15 and restart[-1].end == T + 22
    assert all(a.end == b.start for a, b in pairwise(restart))
    adds_up(job)


def test_a_child_redoes_what_any_rank_of_its_parent_ran(tmp_path: Path) -> None:
    """Rank 0's last records were lost with it; rank 1 recorded step 9: steps 5-9 are redone."""
    parent, child = resumed_pair(tmp_path)
    with open(RunDir(parent).metrics(1), "ab") as fh:
        for step in (8, 9):
            fh.write(records.encode(1, step, {"loss": 1.0}, T + 14))
    assert run_ledger(child).redone_steps == 5


@pytest.mark.parametrize("resumed", [False, True], ids=["fresh", "resumed"])
def test_a_relaunch_after_a_stop_redoes_only_what_it_resumed_into(
    tmp_path: Path, resumed: bool
) -> None:
    """A person stops a run after steps 0-7 and relaunches it: from step 0 (another layout, a
    new training) nothing is redone; from its checkpoint at step 5, steps 5-7 are."""
    write_run(
        tmp_path,
        "run-1",
        created=T,
        start=T,
        end=T + 14,
        steps=steps_from(0, 7, T + 5),
        state=State.STOPPED,
        stop_requested=T + 13,
    )
    first = 5 if resumed else 0
    child = write_run(
        tmp_path,
        "run-2",
        created=T + 15,
        start=T + 15,
        end=T + 30,
        steps=steps_from(first, 11, T + 20),
        parent="run-1",
        resumed_from=str(tmp_path / "run-1" / "checkpoints" / "step-5") if resumed else None,
    )
    ledger = run_ledger(child)
    assert (ledger.redone_steps, ledger.redone_span) == ((3, (5, 7)) if resumed else (0, None))


def test_a_hang_is_the_time_from_the_last_progress_to_the_stop(tmp_path: Path) -> None:
    """The last step at T+10, a person's stop at T+100 (after 90 s with none), the end at
    T+102: hung from T+10. The same gap in a run that succeeded is after its last step."""
    steps = steps_from(0, 5, T + 5)
    hung = write_run(
        tmp_path,
        "run-h",
        created=T,
        start=T,
        end=T + 102,
        steps=steps,
        state=State.STOPPED,
        stop_requested=T + 100,
    )
    assert seconds(run_ledger(hung)) == {"startup": 4, "productive": 6, "hung": 92}
    assert seconds(run_ledger(hung, stall_after=120)) == {
        "startup": 4,
        "productive": 6,
        "after": 92,
    }
    done = write_run(tmp_path, "run-s", created=T, start=T, end=T + 102, steps=steps)
    assert seconds(run_ledger(done)) == {"startup": 4, "productive": 6, "after": 92}


def test_a_live_run_counts_up_to_now() -> None:
    first = Step(0, T + 3, took=0.5)
    span = RunSpan("live", Path("live"), created=T, start=T + 1, end=None, steps=(first,))
    pieces, _, _ = run_pieces(span, T + 10, stall_after=60)
    assert [(p.segment, p.end - p.start) for p in pieces] == [
        ("startup", 2.5),  # made, launched, to the first step's start
        ("productive", 7.5),  # the step, then one under way
    ]
    pieces, _, _ = run_pieces(span, T + 100, stall_after=60)
    assert (pieces[-1].segment, pieces[-1].start) == ("hung", T + 3)
    waiting = RunSpan("new", Path("new"), created=T, start=None, end=None)
    pieces, _, _ = run_pieces(waiting, T + 5, relaunched=True)
    assert [(p.segment, p.end - p.start) for p in pieces] == [("restart", 5.0)]


def test_an_allocation_s_idle_time_and_runs_that_overlap(tmp_path: Path) -> None:
    """run-a T..T+10 and run-b T+30..T+40 in the job: 20 s idle between them; run-c, outside
    the job, is not in it. Two runs live at once share the seconds they overlap."""
    a = write_run(tmp_path, "run-a", created=T, start=T, end=T + 10, steps=steps_from(0, 4, T + 5))
    b = write_run(
        tmp_path, "run-b", created=T + 30, start=T + 30, end=T + 40, steps=steps_from(0, 4, T + 35)
    )
    job = allocation_ledger([a, b])
    assert job.wall_s == 40
    assert seconds(job) == {"startup": 8, "productive": 10, "after": 2, "idle": 20}
    c = write_run(
        tmp_path, "run-c", created=T + 5, start=T + 5, end=T + 15, steps=steps_from(0, 4, T + 10)
    )
    shared = allocation_ledger([a, c])
    assert shared.wall_s == 15
    adds_up(shared)
    assert shared.segments["productive"] == pytest.approx(7.5)  # a's 2.5 s alone, then halves


def test_goodput_json_holds_the_wall_time_the_fraction_and_the_segments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    resumed_pair(tmp_path)
    write_run(tmp_path, "run-x", created=T, start=T, end=T + 9, steps={}, job=None)
    assert main(["goodput", "run-2", "--json", "--outputs", str(tmp_path)]) == 0
    said = json.loads(capsys.readouterr().out)
    assert set(said) == {"wall_s", "goodput", "segments"}
    assert set(said["segments"]) == {f"{name}_s" for name in SEGMENTS}
    assert said["segments"]["redone_s"] == 3 and said["wall_s"] == 13
    assert said["goodput"] == round(4 / 13, 4)

    assert main(["goodput", "4242", "--json", "--outputs", str(tmp_path)]) == 0
    job = json.loads(capsys.readouterr().out)
    assert (job["job"], job["runs"], job["wall_s"]) == (JOB, ["run-1", "run-2"], 31)
    assert job["segments"]["restart_s"] == 7

    assert main(["goodput", "4242", "--outputs", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"job {JOB}: 2 runs", "goodput 38.7% of 0:00:31 (31.0 s)"]
    assert lines[-3:] == ["runs, oldest first:", "  run-1  goodput 47%", "  run-2  goodput 31%"]

    assert main(["goodput", "run-2", "--outputs", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["run run-2", "goodput 30.8% of 0:00:13 (13.0 s)"]
    assert "  redone             3.0 s   23.1%  (steps 5-7, 3 steps)" in lines

    assert main(["goodput", "nonesuch", "--outputs", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"ezpz-tui: no run 'nonesuch' in {tmp_path}, nor a job of its runs"


def test_goodput_of_this_machine_is_the_runs_made_outside_a_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("PBS_JOBID", "SLURM_JOB_ID", "SLURM_JOBID"):
        monkeypatch.delenv(var, raising=False)
    resumed_pair(tmp_path)
    assert main(["goodput", "--outputs", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"ezpz-tui: no runs outside a job in {tmp_path}"
    write_run(tmp_path, "run-x", created=T, start=T, end=T + 9, steps={}, job=None)
    assert main(["goodput", "--json", "--outputs", str(tmp_path)]) == 0
    said = json.loads(capsys.readouterr().out)
    assert (said["job"], said["runs"], said["segments"]["startup_s"]) == (
        "this machine",
        ["run-x"],
        9,
    )


def test_compare_has_a_goodput_row(tmp_path: Path) -> None:
    parent, child = resumed_pair(tmp_path)
    row = compare([parent, child]).row("goodput")
    assert row is not None and row.better == "higher"
    by_run = dict(zip((f.run_id for f in compare([parent, child]).runs), row.values, strict=True))
    assert by_run == {"run-1": pytest.approx(8 / 17), "run-2": pytest.approx(4 / 13)}


def test_the_summary_and_the_report_hold_the_ledger(tmp_path: Path) -> None:
    from ezpz_tui.core.launching.finalize import finalize

    _, child = resumed_pair(tmp_path)
    finalize(child)
    summary = json.loads(RunDir(child).summary_json.read_text())
    assert summary["goodput"] == {**run_ledger(child).to_json(), "redone_steps": 3}
    report = RunDir(child).report_md.read_text()
    said = (
        "goodput 30.8% of 13.0 s wall: productive 4.0 s, restart 4.0 s, redone 3.0 s, after 2.0 s"
    )
    assert said in report.splitlines()
