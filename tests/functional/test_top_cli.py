"""``ezpz-tui top``: every rank's telemetry and step time from a run directory, as a table and as
JSON, slow ranks named; bad input gets one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runtime.rundir import RunState, State, write_state
from runtime.telemetry.record import Sample
from tests.fixtures.telemetry import write_running, write_samples, write_steps

EZPZ = [sys.executable, "-m", "ezpz_tui"]
NOW = 1_800_000_000.0


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EZPZ_TUI_CONFIG_DIR", str(tmp_path / "config"))


def run_with_straggler(outputs: Path) -> Path:
    run = outputs / "20261126-130000-000-tp1pp1cp1"
    run.mkdir(parents=True)
    write_state(run, RunState(state=State.RUNNING, updated=NOW))
    for rank in range(4):
        write_running(run, rank, f"node{rank // 2}", rank % 2)
        write_steps(run, rank, [0.9 if rank == 3 else 0.3] * 5, NOW - 10)
        sample = Sample(NOW - 1, 150.0 + rank, (1 + rank) << 30, 2, f"nvidia-smi:{rank % 2}")
        write_samples(run, rank, [Sample(NOW - 3, 1.0), sample])
    return run


def top(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EZPZ, "top", *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_json_names_the_straggler_with_each_ranks_latest_sample(tmp_path: Path) -> None:
    run = run_with_straggler(tmp_path / "outputs")
    done = top(run.name, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["slow"] == [3]
    rows = {row["rank"]: row for row in report["ranks"]}
    assert rows[2]["cpu_pct"] == 152.0 and rows[2]["rss_bytes"] == 3 << 30
    assert rows[1]["host"] == "node0" and rows[1]["device"] == "nvidia-smi:1"
    assert abs(rows[3]["step_time_s"] - 0.9) < 1e-9 and rows[0]["slow"] is False


def test_the_table_marks_the_slow_rank_and_says_why(tmp_path: Path) -> None:
    run = run_with_straggler(tmp_path / "outputs")
    done = top(str(run), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:4] == ["RANK", "HOST", "STATE", "CPU"]
    rank3 = next(line for line in lines if line.split()[0] == "3")
    assert "slow" in rank3 and "4.0G" in rank3 and "0.900s" in rank3
    assert "slow: rank 3 (worst 3.0× the median)" in lines[-1], lines[-1]


def test_watch_prints_json_lines_until_interrupted(tmp_path: Path) -> None:
    run = run_with_straggler(tmp_path / "outputs")
    proc = subprocess.Popen(
        [*EZPZ, "top", str(run), "--json", "--watch", "0.2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [proc.stdout.readline() for _ in range(3)]  # type: ignore[union-attr]
    finally:
        proc.terminate()
        proc.wait(10)
    assert [json.loads(line)["slow"] for line in lines] == [[3], [3], [3]]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["nope"], "no run"),
        (["x", "--watch", "0"], "0.1 to 86400"),
    ],
)
def test_bad_input_is_one_line(tmp_path: Path, args: list[str], said: str) -> None:
    (tmp_path / "outputs").mkdir()
    done = top(*args, cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert said in done.stderr.lower() and len(done.stderr.strip().splitlines()) == 1, done.stderr
