"""A finished run's ``digest.json`` on real runs (tests/fixtures/finished.py: two 2-rank
``ezpz-tui launch`` runs over mpiexec, one succeeded, one whose rank 1 raised): its finalizer
wrote it, it holds what each rank's files hold, and ``why`` and ``top`` say from it what they
say from the files, the culprit included; without it, they read the files and say so."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ezpz_tui.core.runs.digest import FROM_FILES, read_digest
from ezpz_tui.core.watching.telemetry import read_last
from ezpz_tui.core.watching.top import read_top
from ezpz_tui.core.watching.why import why_report
from runtime.rundir import RunDir, read_statuses
from tests.fixtures.finished import Finished

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(300)]


def test_the_finalizer_wrote_what_each_ranks_files_hold(finished: Finished) -> None:
    for run_dir in (finished.good, finished.bad):
        run = RunDir(run_dir)
        digest = read_digest(run_dir)
        assert digest is not None, f"{run.digest_json} not written by the run's finalizer"
        assert digest.world == 2 and digest.run_id == run_dir.name
        assert digest.statuses() == read_statuses(run_dir)
        for rank in (0, 1):
            assert digest.host(rank) == read_statuses(run_dir)[rank].host
            assert digest.sample(rank) == read_last(run.telemetry(rank))
            assert digest.log_bytes(rank) == run.log(rank).stat().st_size
            assert digest.last_line(rank) == run.log(rank).read_text().splitlines()[-1].strip()
        loss = digest.band("loss")
        assert loss is not None
        # Rank 1 of the bad run raised at step 3; rank 0 went on alone until it was stopped.
        both = 6 if run_dir == finished.good else 4
        steps = len(loss["step"])
        assert loss["step"] == list(range(steps)) and steps >= both
        assert loss["count"] == [2] * both + [1] * (steps - both)
        assert loss["mean"] == [2.0 / (step + 1) for step in range(steps)]
        assert digest.last(1)["loss"] == 2.0 / both
        assert digest.last_step(1) == both - 1
    assert read_digest(finished.bad).raised(1) == "ValueError: the data ran out at step 3"
    # Its bystander, stopped in its sleep: the stop's interrupt when it came in time to say so.
    assert read_digest(finished.bad).raised(0) in (None, "KeyboardInterrupt")


def _without_digest(run_dir: Path, tmp_path: Path) -> Path:
    """A copy of the run as an older run (or one not finalized yet) is: no digest."""
    copy = tmp_path / "older" / run_dir.name
    shutil.copytree(run_dir, copy, symlinks=True)
    RunDir(copy).digest_json.unlink()
    return copy


def _top(run_dir: Path) -> dict:
    data = read_top(run_dir).to_json(now=0.0)
    for row in data["ranks"]:
        row.pop("sample_age_s", None)
    return {**data, "run": None}


@pytest.mark.parametrize("which", ["good", "bad"])
def test_why_and_top_say_the_same_from_the_digest_as_from_the_files(
    finished: Finished, tmp_path: Path, which: str
) -> None:
    run_dir = getattr(finished, which)
    older = _without_digest(run_dir, tmp_path)

    from_digest, from_files = _top(run_dir), _top(older)
    assert from_digest["notes"] == [] and from_files["notes"] == [FROM_FILES]
    assert {**from_digest, "notes": None} == {**from_files, "notes": None}
    assert [row["state"] for row in from_digest["ranks"]] == (
        ["succeeded"] * 2 if which == "good" else ["killed", "failed"]
    )

    said, read = (json.loads(why_report(d, as_json=True)) for d in (run_dir, older))
    if which == "bad":  # the culprit, its exception and its bystander, from the one file
        assert (said["rank"], said["exception"]["type"]) == (1, "ValueError")
        assert said["killed"] == [0]
        assert FROM_FILES not in said["notes"] and read["notes"] == [*said["notes"], FROM_FILES]
        said["notes"] = read["notes"] = None
        said["run_dir"] = read["run_dir"] = None
    else:
        assert said["notes"] == [] and read["notes"] == [FROM_FILES]
        said["notes"] = read["notes"] = None
    assert said == read
    text = why_report(run_dir, as_json=False).splitlines()
    assert text == [
        line for line in why_report(older, as_json=False).splitlines() if FROM_FILES not in line
    ]
