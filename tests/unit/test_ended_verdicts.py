"""An ended run keeps the verdicts it had while it ran: the finalizer judges them as of the run's
end into ``summary.json`` (:mod:`ezpz_tui.core.watching.verdicts`), and ``why`` and ``top`` read
them back; without a summary they judge the ranks' files at the run's end themselves.

The run: 4 ranks that a person stopped 30 s after ranks 0-2 entered all_reduce #41 and rank 3
never did, rank 2 having arrived 40 ms after the others at each of the 40 before."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ezpz_tui.core.launching.finalize import report
from ezpz_tui.core.runs.digest import FROM_FILES
from ezpz_tui.core.watching.top import format_top, read_top
from ezpz_tui.core.watching.verdicts import ended_verdicts
from ezpz_tui.core.watching.why import why_report
from runtime.rundir import RunDir, read_state
from tests.fixtures.flights import make_hung_run

T0 = 1_800_000_000.0
WAITED_S = 30.0
LATE_S = 0.040


@pytest.fixture
def hung(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EZPZ_TUI_CONFIG_DIR", str(tmp_path / "config"))
    run = make_hung_run(tmp_path / "outputs", T0, WAITED_S, LATE_S)
    return run


def test_why_of_an_ended_run_names_its_hang_and_straggler_from_its_files(hung: Path) -> None:
    """No summary yet: the files judged at the run's end, not at a later now."""
    data = json.loads(why_report(hung, as_json=True))
    said = data["collectives"]
    assert said["kind"] == "missing" and said["missing"] == [3] and said["seq"] == 41
    assert round(said["waiting_s"]) == WAITED_S
    assert said["late"]["ranks"] == [2] and said["late"]["collective"] == "all_reduce"
    text = why_report(hung, as_json=False).splitlines()
    at = text.index("Collectives (Flight Recorder):")
    assert text[at + 1 :] == [
        "  all_reduce #41 (default group, 4 floats): ranks 0-2 waiting for 30 s; "
        "rank 3 never entered it",
        "    rank 3: last collective all_reduce #40",
        "  rank 2 arrives 40 ms after the median at all_reduce",
        f"note: {FROM_FILES}",  # no finalizer yet: no digest, every rank's files were read
    ]


def test_the_summary_keeps_them_when_the_files_are_gone(hung: Path) -> None:
    section = ended_verdicts(hung)
    assert section["judged_at"] == read_state(hung).end
    [straggler] = section["stragglers"]
    assert straggler["rank"] == 2 and straggler["by"] == "arrival"
    assert straggler["why"] == "arrives 40 ms after the median at all_reduce"
    assert abs(straggler["arrival_lag_s"] - LATE_S) < 1e-3
    assert section["collective"]["kind"] == "missing" and section["collective"]["missing"] == [3]
    summary = RunDir(hung).summary_json
    summary.write_text(json.dumps({"run_id": hung.name, "verdicts": section}))
    before = why_report(hung, as_json=False)
    shutil.rmtree(RunDir(hung).flight_dir)  # cleaned up, or copied elsewhere without them
    assert why_report(hung, as_json=False) == before
    top = read_top(hung)
    assert [row.rank for row in top.rows if row.slow] == [2]
    rows = {row.rank: row for row in top.rows}
    assert rows[2].slow_why == "arrives 40 ms after the median at all_reduce"
    assert abs((rows[2].arrival_lag_s or 0) - LATE_S) < 1e-3
    assert rows[2].state == rows[0].state != "running"  # as its end left it
    assert top.to_json(T0)["slow_judged_at"] == section["judged_at"]
    lines = format_top(top, now=T0)
    assert lines[3].split()[:3] == ["2", "node0", rows[2].state]  # the straggler named below
    assert (
        "slow at the collectives: rank 2 arrives 40 ms after the median at all_reduce" in (lines[5])
    )


def test_the_report_lists_them(hung: Path) -> None:
    summary = {
        "run_id": hung.name,
        "state": "stopped",
        "exit_code": None,
        "cause": None,
        "ranks": 4,
        "steps": 12,
        "speed": {"step_time_s_median": 0.1, "tokens_per_s_median": None},
        "metrics": {},
        "verdicts": ended_verdicts(hung),
    }
    summary["speed"]["samples_per_s_median"] = None
    lines = report(summary).splitlines()
    assert "- slow: rank 2 arrives 40 ms after the median at all_reduce" in lines
    assert "- rank 3: last collective all_reduce #40" in lines
