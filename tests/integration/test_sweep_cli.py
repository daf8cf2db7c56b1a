"""``ezpz-tui sweep`` and ``ezpz-tui compare`` as a person types them: a real sweep of 4 CPU
ranks through the mpich wheel's mpiexec, a sweep stopped by SIGTERM, and compare on fixture runs
(which starts no rank)."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ezpz_tui.core.comparing.sweep_record import latest_sweep
from ezpz_tui.core.runs.record import read_run_toml
from runtime.rundir import SWEEPS, RunDir, read_state
from tests.fixtures.cli import PY, REPO, base_env, cli, kill_leftovers
from tests.fixtures.cli import run_dirs as all_dirs
from tests.fixtures.runs import make_run, wait_for
from tests.procs import processes_of

T0 = 1_763_800_000.0


def run_dirs(outputs: Path) -> list[Path]:
    """The run directories in ``outputs``, the sweeps' records' folder left out."""
    return [d for d in all_dirs(outputs) if d.name != SWEEPS]


# --- compare on fixture runs ---------------------------------------------------------------------


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    outputs = tmp_path / "outputs"
    old = make_run(
        outputs,
        run_id="20261126-100000-000-tp1pp1cp1",
        state="succeeded",
        exit_code=0,
        sizes={"tp": 1},
        ranks=4,
        steps=40,
        created=T0,
    )
    make_run(
        outputs,
        run_id="20261126-100500-000-tp2pp1cp1",
        state="succeeded",
        exit_code=0,
        sizes={"tp": 2},
        ranks=4,
        steps=40,
        created=T0 + 300,
        parent=old.name,
    )
    return outputs


def test_compare_a_relaunched_run_brings_its_parent(two_runs: Path) -> None:
    proc = cli(["compare", "20261126-1005"], base_env(two_runs))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["#", "LAYOUT", "NxP"]
    assert "tp1 pp1 cp1 dp4" in proc.stdout and "tp2 pp1 cp1 dp2" in proc.stdout
    assert "  sizes.tp: 1 → 2" in lines
    assert max(map(len, lines)) <= 100


def test_compare_json_and_the_default_set(two_runs: Path) -> None:
    proc = cli(["compare", "--json"], base_env(two_runs))
    assert proc.returncode == 0, proc.stderr
    assert "parents" in proc.stderr  # it says which runs it took
    out = json.loads(proc.stdout)
    assert [r["rank"] for r in out["runs"]] == [1, 2]
    assert {r["layout"]["tp"] for r in out["runs"]} == {1, 2}
    assert out["common_step"] == 39
    assert {c["key"] for c in out["changes"]} >= {"sizes.tp", "sizes.dp", "parent"}


def test_compare_an_unknown_run_is_one_line_and_exit_2(two_runs: Path) -> None:
    proc = cli(["compare", "20261126-100000", "nope"], base_env(two_runs))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"ezpz-tui: no run 'nope' in {two_runs}"]
    assert proc.stdout == ""


def test_sweep_refuses_steps_for_a_user_command(tmp_path: Path) -> None:
    proc = cli(["sweep", "--steps", "5", "--", PY, "train.py"], base_env(tmp_path / "o"))
    assert proc.returncode == 2
    assert "built-in demo" in proc.stderr and "Traceback" not in proc.stderr


# --- real sweeps ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory, mpiexec: str) -> Iterator[dict[str, Any]]:
    """``sweep --tp 1,2 --pp 1,2 --steps 20`` on 4 CPU ranks, then ``compare --json``."""
    outputs = tmp_path_factory.mktemp("sweep") / "outputs"
    env = base_env(outputs)
    try:
        args = ["sweep", "--tp", "1,2", "--pp", "1,2", "--cp", "1,3", "--steps", "20", "--ppn", "4"]
        sweep = cli(args, env, timeout=400)
        compared = cli(["compare", "--json"], env)
        record = latest_sweep(outputs)
        by_id = cli(["compare", "--json", record.sweep_id], env) if record else None
        yield {"outputs": outputs, "sweep": sweep, "compare": compared, "by_id": by_id}
    finally:
        kill_leftovers(outputs)


@pytest.mark.timeout(480)
def test_sweep_runs_every_valid_layout_in_turn(swept: dict[str, Any]) -> None:
    proc, outputs = swept["sweep"], swept["outputs"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for cp3 in ("tp1 pp1 cp3", "tp2 pp2 cp3"):
        assert f"skipping {cp3}: World size 4 is not divisible" in proc.stderr
    record = latest_sweep(outputs)
    assert record is not None and record.state == "finished" and record.steps == 20
    assert record.layouts == ("tp1 pp1 cp1", "tp1 pp2 cp1", "tp2 pp1 cp1", "tp2 pp2 cp1")
    assert len(record.skipped) == 4
    dirs = run_dirs(outputs)
    assert [d.name for d in dirs] == list(record.runs) and len(dirs) == 4
    for run_dir in dirs:
        toml = read_run_toml(run_dir)
        assert toml["parent"] == record.sweep_id
        assert toml["plan"]["command"][-2:] == ["--steps", "20"]
        assert read_state(run_dir).state == "succeeded"
    assert proc.stdout.splitlines()[0].split()[:2] == ["#", "LAYOUT"]


@pytest.mark.timeout(480)
def test_compare_after_a_sweep_ranks_its_runs_by_tokens_per_s(swept: dict[str, Any]) -> None:
    proc = swept["compare"]
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    runs = out["runs"]
    assert len(runs) == 4 and [r["rank"] for r in runs] == [1, 2, 3, 4]
    tokens = [r["figures"]["tokens_per_s"] for r in runs]
    assert all(isinstance(t, float) and t > 0 for t in tokens)
    assert tokens == sorted(tokens, reverse=True)
    layouts = {(r["layout"]["tp"], r["layout"]["pp"], r["layout"]["dp"]) for r in runs}
    assert layouts == {(1, 1, 4), (1, 2, 2), (2, 1, 2), (2, 2, 1)}
    for run in runs:
        assert run["steps"] == 20 and run["warmup_steps"] == 2 and not run["partial"]
        assert run["figures"]["step_time_s"] > 0 and run["figures"]["first_step_s"] > 0
    assert out["common_step"] == 19
    assert "tokens_per_s" in runs[0]["best_at"]
    by_id = swept["by_id"]
    assert by_id is not None and by_id.returncode == 0, by_id.stderr
    assert [r["run_id"] for r in json.loads(by_id.stdout)["runs"]] == [r["run_id"] for r in runs]


@pytest.mark.timeout(240)
def test_sigterm_stops_the_current_run_and_starts_no_more(tmp_path: Path, mpiexec: str) -> None:
    outputs = tmp_path / "outputs"
    argv = [PY, "-m", "ezpz_tui", "sweep", "--tp", "1,2", "--ppn", "2", "--steps", "100000"]
    proc = subprocess.Popen(
        argv,
        env=base_env(outputs),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:

        def training() -> bool:
            dirs = run_dirs(outputs)
            metrics = RunDir(dirs[0]).metrics(0) if dirs else None
            return metrics is not None and metrics.is_file() and metrics.stat().st_size > 0

        wait_for(training, 120, "the sweep's first run to record a step")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGTERM, err
        dirs = run_dirs(outputs)
        assert len(dirs) == 1, err  # the second layout never started
        assert read_state(dirs[0]).state == "stopped"
        assert processes_of(dirs[0]) == []
        record = latest_sweep(outputs)
        assert record is not None and record.state == "stopped"
        assert record.runs == (dirs[0].name,)
        assert "tp1 pp1 cp1 dp2" in out  # the table of what ran
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        kill_leftovers(outputs)
