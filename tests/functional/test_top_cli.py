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
    said = next(line for line in lines if "; slow: " in line)
    assert said.endswith("slow: rank 3 (worst 3.0× the median)"), said


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


def test_a_run_that_will_not_finish_in_the_walltime_names_the_step_it_reaches(
    tmp_path: Path,
) -> None:
    """A Slurm job with 60 s left (SLURM_JOB_END_TIME, as Slurm 23.02+ exports it); 995 steps
    left at the 0.3 s median are 299 s: the walltime ends first, near step 5 + 60 / 0.3."""
    import os
    import time

    from tests.envs import without_job

    run = run_with_straggler(tmp_path / "outputs")
    (run / "run.toml").write_text(
        '[plan]\ncommand = ["python", "-m", "runtime.examples.train", "--steps", "1000"]\n'
    )
    env = {
        **without_job(),
        "EZPZ_TUI_CONFIG_DIR": os.environ["EZPZ_TUI_CONFIG_DIR"],
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_NODELIST": "localhost",
        "SLURM_JOB_END_TIME": str(int(time.time()) + 60),
    }
    done = subprocess.run(
        [*EZPZ, "top", run.name], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    last = next(line for line in done.stdout.splitlines() if line.startswith("step 4 of 1000"))
    assert last.startswith("step 4 of 1000: ⚠ walltime ends first, at ~step "), last
    reached = int(last.split("~step ")[1].split()[0])
    left = last.rsplit("; walltime 0:00:", 1)[1]
    assert 30 <= int(left) <= 60 and 5 + int(left) / 0.3 - 1 <= reached <= 5 + int(left) / 0.3 + 4
    done = subprocess.run(
        [*EZPZ, "top", run.name, "--json"], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    report = json.loads(done.stdout)
    assert report["total_steps"] == 1000 and report["last_step"] == 4
    assert 0 < report["walltime_left_s"] <= 60 and report["finish_in_s"] == pytest.approx(298.5)
    assert abs(report["walltime_reached_step"] - (5 + report["walltime_left_s"] / 0.3)) <= 1
