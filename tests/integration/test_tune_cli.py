"""``ezpz-tui tune`` as a person types it: real 4-rank CPU runs through the mpich wheel's mpiexec.

The race is checked against an exhaustive ``ezpz-tui sweep`` of the same layouts at the same
global batch in the same test: the tune must pick the layout the sweep measured fastest, with at
most half the sweep's steps. The layouts differ by TP only (1, 2, 4 over 4 ranks), whose speeds
on gloo differ by about 2x each (measured: 19k, 8k and under 4k tokens/s), far beyond the noise
of a shared machine. Pruning and bad input are checked with ``--dry-run`` or before any run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ezpz_tui.core.comparing.sweep_record import latest_sweep
from runtime.rundir import SWEEPS
from tests.fixtures.cli import PY, base_env, cli, kill_leftovers
from tests.fixtures.cli import run_dirs as all_dirs

SWEEP_STEPS = 20
SIZES = ["--tp", "1,2,4", "--pp", "1", "--cp", "1", "--ppn", "4", "--global-batch", "32"]


def run_dirs(outputs: Path) -> list[Path]:
    return [d for d in all_dirs(outputs) if d.name != SWEEPS]


@pytest.fixture(scope="module")
def raced(tmp_path_factory: pytest.TempPathFactory, mpiexec: str) -> Iterator[dict[str, Any]]:
    """An exhaustive sweep, its comparison, then a tune of the same layouts."""
    swept_to = tmp_path_factory.mktemp("swept") / "outputs"
    tuned_to = tmp_path_factory.mktemp("tuned") / "outputs"
    try:
        sweep = cli(["sweep", *SIZES, "--steps", str(SWEEP_STEPS)], base_env(swept_to), 500)
        compared = cli(["compare", "--json"], base_env(swept_to))
        tune = cli(["tune", *SIZES, "--first-steps", "4", "--json"], base_env(tuned_to), 500)
        yield {"sweep": sweep, "compare": compared, "tune": tune, "tuned_to": tuned_to}
    finally:
        kill_leftovers(swept_to)
        kill_leftovers(tuned_to)


@pytest.mark.mpi
@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_tune_picks_the_sweeps_fastest_layout_in_half_its_steps(raced: dict[str, Any]) -> None:
    assert raced["sweep"].returncode == 0, raced["sweep"].stderr
    assert raced["compare"].returncode == 0, raced["compare"].stderr
    swept = json.loads(raced["compare"].stdout)["runs"]
    assert len(swept) == 3 and all(r["steps"] == SWEEP_STEPS for r in swept)
    fastest = max(swept, key=lambda r: r["figures"]["tokens_per_s"])
    layout = fastest["layout"]
    sweep_best = f"tp{layout['tp']} pp{layout['pp']} cp{layout['cp']}"
    sweep_steps = sum(r["steps"] for r in swept)

    proc = raced["tune"]
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["best"] == sweep_best, (out, swept)
    assert out["steps"] <= sweep_steps / 2, (out["steps"], sweep_steps)
    assert out["rungs"] == [4, 8] and out["global_batch"] == 32
    states = {entry["layout"]: entry["state"] for entry in out["layouts"]}
    assert sorted(states.values()) == ["best", "dropped", "dropped"]
    assert out["gap"] > 1.0 and out["sweep_steps"] == 3 * SWEEP_STEPS
    assert out["launch"].startswith("ezpz-tui launch --tp ")
    assert "--global-batch 32" in out["launch"]
    # Every run the tune made is a run of its record, at the same global batch.
    record = latest_sweep(raced["tuned_to"])
    assert record is not None and record.state == "finished"
    dirs = run_dirs(raced["tuned_to"])
    assert sorted(d.name for d in dirs) == sorted(record.runs) and len(dirs) == 3 + 2
    best = next(e for e in out["layouts"] if e["state"] == "best")
    assert best["mfu"] is not None and best["mfu"] > 0


def test_a_layout_over_the_memory_limit_is_pruned_before_anything_runs(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    args = ["tune", "--tp", "1,2", "--pp", "1,2", "--ppn", "4", "--global-batch", "32"]
    proc = cli([*args, "--mem-limit-gb", "0.012", "--dry-run", "--json"], base_env(outputs))
    assert proc.returncode == 0, proc.stderr
    layouts = {e["layout"]: e for e in json.loads(proc.stdout)["layouts"]}
    for name in ("tp1 pp1 cp1", "tp2 pp1 cp1"):  # about 0.016 GiB a rank each
        assert layouts[name]["state"] == "pruned"
        assert layouts[name]["why"].endswith("GiB a rank is over the 0.012 GiB limit")
        assert f"tune prunes {name}: estimate " in proc.stderr
    for name in ("tp1 pp2 cp1", "tp2 pp2 cp1"):  # half the layers a rank: about 0.009 GiB
        assert layouts[name]["state"] == "racing"
        assert 0 < layouts[name]["estimate"]["total_gb"] < 0.012
    assert run_dirs(outputs) == []


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--tp", "3", "--pp", "1"], "ezpz-tui: no layout fits (4 ranks, "),
        (["--mem-limit-gb", "0.001"], "ezpz-tui: no layout fits (4 ranks, a limit of 0.001 GiB"),
        (["--budget", "0"], "argument --budget: 0 s is too small for one step"),
        (["--first-steps", "2"], "argument --first-steps: 2 leaves no measured step"),
        (["--", PY, "train.py"], "ezpz-tui: tune estimates memory and counts FLOPs for the "),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], said: str) -> None:
    outputs = tmp_path / "outputs"
    proc = cli(["tune", "--ppn", "4", *args], base_env(outputs))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said in proc.stderr.splitlines()[-1] and "Traceback" not in proc.stderr
    assert proc.stdout == "" and run_dirs(outputs) == []


@pytest.mark.mpi
@pytest.mark.timeout(300)
def test_a_budget_too_small_for_one_step_is_exit_2(tmp_path: Path, mpiexec: str) -> None:
    outputs = tmp_path / "outputs"
    try:
        proc = cli(["tune", *SIZES, "--budget", "0.5"], base_env(outputs), 200)
    finally:
        kill_leftovers(outputs)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == (
        "ezpz-tui: --budget 0.5 s is too small for one step of the first layout"
    )
    assert len(run_dirs(outputs)) <= 1  # the first run, stopped; no other started
