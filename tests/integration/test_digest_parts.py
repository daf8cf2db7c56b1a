"""The finalizer's digest read in parts of ranks by worker processes (issue 34): at 131,072 ranks
one process reading every rank's files takes minutes, so the parts are read apart and merged.
Merged, they must be the digest one process reading every rank makes: the same columns, the
same bands (an extreme held by two ranks named by the lower, as one fold in rank order names
it), and where a rank's records lie in two parts' files, the whole run read as one part."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ezpz_tui.core.watching.digesting import build_digest
from runtime.rundir import RunDir
from tests.fixtures.cli import REPO
from tests.fixtures.finished import Finished
from tests.fixtures.runs import make_run

RANKS, FAILING = 2112, 1500  # three parts of 1,024 ranks and more: the last one partly filled


def _without_time(digest: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in digest.items() if k != "written"}


def _same(apart: Any, whole: Any, where: str = "") -> None:
    """Equal, a mean's last bits aside (the parts' sums are added in another order)."""
    if isinstance(whole, dict):
        assert apart.keys() == whole.keys(), where
        for key in whole:
            _same(apart[key], whole[key], f"{where}/{key}")
    elif isinstance(whole, list):
        assert len(apart) == len(whole), where
        for i, (a, w) in enumerate(zip(apart, whole, strict=True)):
            _same(a, w, f"{where}[{i}]")
    elif isinstance(whole, float) and not math.isnan(whole):
        assert apart == pytest.approx(whole, rel=1e-12), where
    else:
        assert apart == whole, where


@pytest.fixture(scope="module")
def failed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A failed run of 2,112 ranks: rank 1500 fails at step 10 with a NaN loss."""
    return make_run(
        tmp_path_factory.mktemp("parts") / "outputs",
        run_id="20260101-000000-000-tp1pp1cp1",
        state="failed",
        exit_code=1,
        sizes={"tp": 1},
        ranks=RANKS,
        steps=20,
        created=time.time() - 600,
        failing_rank=FAILING,
    )


def test_parts_read_by_workers_make_the_digest_one_process_makes(failed: Path) -> None:
    whole = build_digest(failed, workers=1)
    apart = build_digest(failed, workers=2)
    assert whole["world"] == RANKS
    assert set(whole["bands"]) and whole["ranks"]["records"] == [True] * RANKS
    assert whole["ranks"]["last_step"][FAILING] == 10  # the failing rank's end, from its part
    _same(_without_time(apart), _without_time(whole))


def test_a_rank_recorded_in_two_parts_is_read_as_one_part(failed: Path, tmp_path: Path) -> None:
    """A record of rank 3 at step 2 in rank 2,000's file (as ezpz's shared file holds every
    rank's): rank 3's summary would be two parts' halves (the second alone says its newest
    step is 2, not 10, where its peer failed), so the run is read whole, as before."""
    run = tmp_path / failed.name
    subprocess.run(["cp", "-r", str(failed), str(run)], check=True)
    record = {"timestamp": time.time(), "rank": 3, "step": 2, "metrics": {"loss": -7.0}}
    with RunDir(run).metrics(2000).open("a") as fh:
        fh.write(json.dumps(record) + "\n")
    whole = build_digest(run, workers=1)
    apart = build_digest(run, workers=2)
    assert whole["ranks"]["last_step"][3] == 10 and whole["ranks"]["last"]["loss"][3] == -7.0
    loss = whole["bands"]["loss"]
    assert (loss["step"][2], loss["lo"][2], loss["lo_rank"][2]) == (2, -7.0, 3)
    _same(_without_time(apart), _without_time(whole))


def test_an_extreme_two_parts_share_is_the_lower_ranks(finished: Finished, tmp_path: Path) -> None:
    """A 2-rank run grown to 2,100 ranks: rank R's records are rank R mod 2's, so every
    extreme is held by rank 0 or 1 and by a thousand others in later parts."""
    grown = tmp_path / "grown"
    argv = [sys.executable, str(REPO / "bench" / "grow_run.py"), str(finished.good), str(grown)]
    done = subprocess.run([*argv, "2100"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    apart = build_digest(grown, workers=2)
    loss = apart["bands"]["loss"]
    assert set(loss["count"]) == {2100}
    assert set(loss["lo_rank"]) <= {0, 1} and set(loss["hi_rank"]) <= {0, 1}
    _same(_without_time(apart), _without_time(build_digest(grown, workers=1)))
