"""A preflight's rank (runtime.preflight): ``EZPZ_PREFLIGHT=rank,world`` makes ``setup()`` join
torch's fake process group as that rank of that world, and the first ``History.record`` leave
the mark with the peak memory and end the process, before anything after the step runs.

Each case is a real Python process: the hook ends the process it runs in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.preflight import PreflightError, mark_path, requested
from runtime.rundir import RunDir
from tests.envs import without_job

# A script with History alone (no torch): the line after the record must never be printed.
RECORDS = """
from runtime import History
history = History(run_dir=RUN)
history.record(0, {"loss": 2.5})
print("after the first step", flush=True)
history.record(1, {"loss": 2.0})
"""

# setup() as rank 1 of 4 with TP 2: its world, its backend, its place on the mesh.
SETS_UP = """
import runtime
info = runtime.setup()
print("world", info.world_size, "rank", info.rank, "backend", info.backend, flush=True)
print("coords", info.coord("tp"), info.coord("dp"), flush=True)
mark = open(RUN + "/preflight-rank-00001.json").read()
print("mark", mark, flush=True)
runtime.History(run_dir=RUN).record(0, {"loss": 1.0})
print("after the first step", flush=True)
"""


def run(script: str, run_dir: Path, preflight: str, **env: str) -> subprocess.CompletedProcess:
    environ = {**without_job(), "EZPZ_PREFLIGHT": preflight, "EZPZ_RUN_DIR": str(run_dir), **env}
    code = f"RUN = {str(run_dir)!r}\n{script}"
    return subprocess.run(
        [sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=120
    )


def test_the_first_record_leaves_the_mark_and_ends_the_process(tmp_path: Path) -> None:
    done = run(RECORDS, tmp_path, "0,2")
    assert done.returncode == 0, done.stderr
    assert "after the first step" not in done.stdout
    mark = json.loads(mark_path(tmp_path, 0).read_text())
    assert (mark["phase"], mark["step"], mark["rank"], mark["world"]) == ("step", 0, 0, 2)
    assert mark["peak_rss_bytes"] > 1 << 20  # a Python process holds more than a MiB
    [line] = RunDir(tmp_path).metrics(0).read_text().splitlines()
    assert json.loads(line)["metrics"]["loss"] == 2.5, "the step's record is written before the end"


def test_without_the_variable_history_records_on(tmp_path: Path) -> None:
    done = run(RECORDS, tmp_path, "")
    assert done.returncode == 0, done.stderr
    assert "after the first step" in done.stdout
    assert not mark_path(tmp_path, 0).exists()
    assert len(RunDir(tmp_path).metrics(0).read_text().splitlines()) == 2


def test_setup_joins_a_fake_world_of_the_size_asked(tmp_path: Path) -> None:
    done = run(SETS_UP, tmp_path, "1,4", EZPZ_TP="2", TORCH_DEVICE="cpu")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "world 4 rank 1 backend fake" in out, out
    assert "coords 1 0" in out, out  # TP innermost: rank 1 is TP 1 of DP 0
    assert '"phase": "setup"' in out, "the mark at setup, before any step"
    assert "after the first step" not in out
    assert json.loads(mark_path(tmp_path, 1).read_text())["phase"] == "step"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("0,2", (0, 2)),
        (" 3,4 ", (3, 4)),
        ("", None),
        ("two", "expected RANK,WORLD"),
        ("2,2", "rank 2 is not in a world of 2"),
        ("0,0", "rank 0 is not in a world of 0"),
    ],
)
def test_the_variable_is_read_or_refused_with_a_reason(value: str, said: object) -> None:
    if isinstance(said, str):
        with pytest.raises(PreflightError, match=said):
            requested({"EZPZ_PREFLIGHT": value})
    else:
        assert requested({"EZPZ_PREFLIGHT": value}) == said
