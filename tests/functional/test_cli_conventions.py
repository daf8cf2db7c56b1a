"""Command-line conventions of issue 12: global options before or after the command, and colour
only to a terminal (NO_COLOR / FORCE_COLOR)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.runs import make_run

EZPZ = [sys.executable, "-m", "ezpz_tui"]
ESC = "\x1b["


@pytest.fixture
def outputs(tmp_path: Path) -> Path:
    out = tmp_path / "elsewhere"
    make_run(
        out,
        run_id="20261126-100000-000-tp1pp1cp1",
        state="succeeded",
        exit_code=0,
        sizes={"tp": 1},
        ranks=2,
        steps=30,
        created=1_795_000_000.0,
    )
    return out


def ezpz(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    environ.pop("EZPZ_OUTPUTS", None)
    return subprocess.run(
        [*EZPZ, *args], cwd=cwd, env={**environ, **env}, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("before", [True, False])
def test_outputs_before_or_after_the_command(outputs: Path, tmp_path: Path, before: bool) -> None:
    args = ["--outputs", str(outputs), "runs"] if before else ["runs", "--outputs", str(outputs)]
    done = ezpz(*args, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "20261126-100000-000-tp1pp1cp1" in done.stdout


def test_plot_into_a_pipe_has_no_escapes_unless_forced(outputs: Path, tmp_path: Path) -> None:
    run = "20261126-100000-000-tp1pp1cp1"
    piped = ezpz("plot", run, "--outputs", str(outputs), cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert "loss" in piped.stdout and ESC not in piped.stdout
    forced = ezpz("plot", run, "--outputs", str(outputs), cwd=tmp_path, FORCE_COLOR="1")
    assert ESC in forced.stdout, "FORCE_COLOR colours a pipe"
    both = ezpz("plot", run, "--outputs", str(outputs), cwd=tmp_path, FORCE_COLOR="1", NO_COLOR="1")
    assert ESC not in both.stdout, "NO_COLOR wins"


def test_plot_json_one_rank_and_an_overlay(outputs: Path, tmp_path: Path) -> None:
    run = "20261126-100000-000-tp1pp1cp1"
    both = json.loads(ezpz("plot", run, "--json", "--outputs", str(outputs), cwd=tmp_path).stdout)
    one = ezpz("plot", run, "--json", "--rank", "1", "--outputs", str(outputs), cwd=tmp_path)
    rank1 = json.loads(one.stdout)
    assert both["ranks"] == [0, 1] and rank1["ranks"] == [1]
    assert len(both["steps"]) == len(both["mean"]) == len(both["min"]) == 30
    assert all(
        lo <= m <= hi for lo, m, hi in zip(both["min"], both["mean"], both["max"], strict=True)
    )
    assert rank1["mean"] == rank1["min"] == rank1["max"], "one rank: no spread"
    make_run(
        outputs,
        run_id="20261126-110000-000-tp2pp1cp1",
        state="succeeded",
        exit_code=0,
        sizes={"tp": 2},
        ranks=2,
        steps=30,
        created=1_795_000_100.0,
    )
    drawn = ezpz(
        "plot", run, "--overlay", "20261126-110000", "--outputs", str(outputs), cwd=tmp_path
    )
    assert drawn.returncode == 0, drawn.stderr
    assert "20261126-110000-000-tp2pp1cp1" in drawn.stdout and "mean over ranks" in drawn.stdout
    missing = ezpz("plot", run, "--rank", "7", "--outputs", str(outputs), cwd=tmp_path)
    assert missing.returncode == 2 and "for rank 7" in missing.stderr
    bad = ezpz("plot", run, "--rank", "-1", "--outputs", str(outputs), cwd=tmp_path)
    assert bad.returncode == 2 and "ranks count from 0" in bad.stderr
