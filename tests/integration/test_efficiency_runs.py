"""MFU on real runs: the demo's TP 1, TP 2, PP 2 and CP 2 layouts on two gloo ranks each, made by
``ezpz-tui sweep`` through the mpich wheel's mpiexec, then ``ezpz-tui compare``.

The demo records its model's FLOPs per token once; MFU is that times the run's global tokens/s
over (ranks x the CPU probe's measured peak), so every layout's MFU must be its tokens/s times
one constant, the same for all four (layout-invariant by construction), and every MFU must name
the measured peak it divides by.

That holds whatever the peak, so it cannot see a peak that is wrong for the layout's ranks per
host: the same model on one rank and on two ranks of this host, each launched as the launcher
splits the cores (two threads for the one rank, one each for the two), must show the same MFU,
measured independently, within 25%.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.efficiency.flops import demo_flops_per_token
from runtime.rundir import SWEEPS, RunDir
from tests.fixtures.cli import PY, base_env, cli, kill_leftovers
from tests.fixtures.cli import run_dirs as all_dirs
from tests.fixtures.runs import wait_for

pytestmark = pytest.mark.mpi

STEPS = 12


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory, mpiexec: str) -> Iterator[dict[str, Any]]:
    outputs = tmp_path_factory.mktemp("mfu") / "outputs"
    env = base_env(outputs)
    try:
        sizes = ["--tp", "1,2", "--pp", "1,2", "--cp", "1,2", "--ppn", "2"]
        sweep = cli(["sweep", *sizes, "--steps", str(STEPS)], env, timeout=400)
        as_json = cli(["compare", "--json"], env)
        table = cli(["compare"], env)
        dirs = [d for d in all_dirs(outputs) if d.name != SWEEPS]
        yield {"sweep": sweep, "json": as_json, "table": table, "dirs": dirs}
    finally:
        kill_leftovers(outputs)


@pytest.mark.timeout(480)
def test_mfu_is_tokens_per_s_times_one_constant_in_every_layout(compared: dict) -> None:
    assert compared["sweep"].returncode == 0, compared["sweep"].stderr
    proc = compared["json"]
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    runs = out["runs"]
    layouts = {(r["layout"]["tp"], r["layout"]["pp"], r["layout"]["cp"]) for r in runs}
    assert layouts == {(1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2)}
    assert out["ranked_by"] == ["mfu"]
    fpt = demo_flops_per_token(vocab=128, dim=64, heads=4, layers=2, seq_len=64)
    constants = []
    for run in runs:
        eff = run["efficiency"]
        assert eff["flops_per_token"] == fpt and eff["world_size"] == 2
        peak = eff["peak"]
        assert peak["measured"] is True and peak["dtype"] == "fp32"
        assert peak["label"].endswith("(measured)") and peak["source"].startswith("measured:")
        assert run["figures"]["mfu"] == eff["mfu"] and eff["mfu"] > 0
        constants.append(eff["mfu"] / run["figures"]["tokens_per_s"])
    want = fpt / (2 * runs[0]["efficiency"]["peak"]["tflops"] * 1e12)
    assert constants == pytest.approx([want] * 4, rel=0.01)
    mfus = [r["figures"]["mfu"] for r in runs]
    assert mfus == sorted(mfus, reverse=True)  # ranked by MFU


@pytest.mark.timeout(480)
def test_every_rank_says_the_flops_once_and_the_table_names_the_peak(compared: dict) -> None:
    assert len(compared["dirs"]) == 4
    for run_dir in compared["dirs"]:
        for rank in (0, 1):
            lines = RunDir(run_dir).metrics(rank).read_text().splitlines()
            having = [i for i, line in enumerate(lines) if "flops_per_token" in line]
            assert having == [0]  # the first record, and only that one
    proc = compared["table"]
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "MFU" in lines[0].split() and max(map(len, lines)) <= 100
    # one probe (at a rank's one thread: the 2-core host over its 2 ranks), one peak for all four
    assert "  peak of every run: 1 thread of the CPU of " in proc.stdout
    peak = next(line for line in lines if line.startswith("  peak of every run: "))
    assert peak.endswith("TFLOPS (measured)")


MODEL = ["--dim", "1024", "--heads", "8", "--layers", "1", "--seq-len", "128", "--batch-size", "8"]
"""Matmuls the size of the probe's (1024 x 1024), so that the one rank's two threads share the
work as they share the probe's: the demo's default model is so small that a step is mostly the
interpreter and its many small ops, whose threads wait for each other in every one (the more so
on a loaded machine), while the probe's do not."""


@pytest.mark.timeout(480)
def test_one_rank_and_two_ranks_of_a_host_show_the_same_mfu(tmp_path: Path, mpiexec: str) -> None:
    outputs = tmp_path / "outputs"
    env = base_env(outputs)
    # Its own probes, measured side by side right after its runs: the session's cached ones
    # may have been measured while another test's ranks or a leftover held the cores.
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    demo = [PY, "-m", "runtime.examples.train", "--steps", "6", *MODEL]
    try:
        for ppn in ("1", "2"):
            launched = cli(["launch", "--quiet", "--ppn", ppn, "--", *demo], env, timeout=200)
            assert launched.returncode == 0, launched.stderr
            # The run's finalizer (its own process, seconds of CPU) is done before the next
            # run, or the probes, take the cores: each figure is measured on a quiet host.
            for run in all_dirs(outputs):
                summary = RunDir(run).summary_json
                wait_for(summary.exists, 120, f"{summary} written by the run's finalizer")
        proc = cli(["compare", "--json", *map(str, all_dirs(outputs))], env, timeout=200)
    finally:
        kill_leftovers(outputs)
    assert proc.returncode == 0, proc.stderr
    runs = {r["efficiency"]["world_size"]: r for r in json.loads(proc.stdout)["runs"]}
    assert sorted(runs) == [1, 2]
    peaks = {n: r["efficiency"]["peak"] for n, r in runs.items()}
    threads = {n: int(peak["device"].split()[0]) for n, peak in peaks.items()}
    assert all(" of the CPU of " in peak["device"] for peak in peaks.values()), peaks
    assert threads[1] >= 2 * threads[2]  # one rank had every core; each of two, half
    mfu = {n: r["efficiency"]["mfu"] for n, r in runs.items()}
    assert mfu[2] == pytest.approx(mfu[1], rel=0.25), (mfu, peaks)
