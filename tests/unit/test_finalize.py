"""What a run leaves when it ends (summary.json, metrics.nc, report.md), ``ezpz-tui finalize``
and ``export``, and the run header's tracker line."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import xarray as xr

from ezpz_tui import config
from ezpz_tui.cli import main
from ezpz_tui.core.launching.finalize import FinishSettings, finalize
from ezpz_tui.core.launching.finalize import main as finalize_main
from ezpz_tui.core.watching.efficiency import PeakSettings
from ezpz_tui.core.watching.tracked import tracker_line, tracker_outputs
from runtime.history import History
from runtime.rundir import RunDir, RunState, State, write_state


def _run(outputs: Path, name: str = "20260101-000000-000-tp1pp1cp1") -> Path:
    """A failed 2-rank run: rank 0's loss falls over 20 steps, rank 1's ends 1.0 higher and
    NaN once; an ezpz-style nested metric ``train/acc``."""
    run_dir = outputs / name
    RunDir(run_dir).make_folders()
    for rank in (0, 1):
        with History(run_dir, rank=rank) as h:
            for step in range(20):
                loss = 10.0 - step * 0.5 + rank * (1.0 if step == 19 else 0.0)
                if rank == 1 and step == 3:
                    loss = math.nan
                h.record(step, {"loss": loss, "train/acc": step / 20, "dt": 0.1}, samples=8)
    write_state(run_dir, RunState(State.FAILED, start=10.0, end=40.0, exit_code=3, cause="x"))
    return run_dir


def test_summary_netcdf_and_report(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    written = finalize(run_dir)
    run = RunDir(run_dir)
    assert written == [run.summary_json, run.digest_json, run.metrics_nc, run.report_md]
    summary = json.loads(run.summary_json.read_text(), parse_constant=_reject)
    assert (summary["state"], summary["exit_code"], summary["duration_s"]) == ("failed", 3, 30.0)
    assert (summary["ranks"], summary["steps"]) == (2, 20)
    loss = summary["metrics"]["loss"]
    assert (loss["first"], loss["last"], loss["min"], loss["max"]) == (10.0, 0.5, 0.5, 10.0)
    assert loss["mean_last_10pct"] == pytest.approx((1.0 + 0.5) / 2)  # the last 2 of 20
    assert (loss["last_min"], loss["last_max"], loss["last_spread"]) == (0.5, 1.5, 1.0)
    assert summary["metrics"]["train/acc"]["last"] == pytest.approx(0.95)
    assert summary["speed"]["step_time_s_median"] == pytest.approx(0.1)
    assert summary["speed"]["samples_per_s_median"] == pytest.approx(80.0)
    with xr.open_dataset(run.metrics_nc) as ds:
        assert ds["loss"].sel(rank=0).values.tolist()[:2] == [10.0, 9.5]
        assert math.isnan(ds["loss"].sel(rank=1, step=3).item())
        assert ds["train.acc"].attrs["written_as"] == "train/acc"
    report = run.report_md.read_text()
    assert report.startswith(f"# {run_dir.name}\n") and "| loss | 10 | 0.5 |" in report


def _reject(name: str) -> None:
    raise ValueError(f"summary.json holds a bare {name}")


def test_a_run_with_no_metrics_gets_its_summary_without_xarray(tmp_path: Path) -> None:
    """A smoke test's finalizer (a program without History) runs after every such launch and
    takes its CPU from the next one: with no metrics line to read it skips the dataset, and
    xarray's import with it (most of what it cost), but still writes the summary, digest and
    report."""
    run_dir = tmp_path / "run"
    RunDir(run_dir).make_folders()
    RunDir(run_dir).metrics(0).touch()  # opened by History, no line written
    write_state(run_dir, RunState(State.FAILED, start=1.0, end=1.0, exit_code=127))
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "ezpz_tui.core.launching.finalize", run_dir],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    imported = re.findall(r"\| *(\S+)$", done.stderr, re.M)
    assert "ezpz_tui.core.watching.digesting" in imported, "the finalizer's imports were not read"
    assert [m for m in imported if m.split(".")[0] in ("xarray", "pandas", "h5netcdf")] == []
    run = RunDir(run_dir)
    summary = json.loads(run.summary_json.read_text())
    assert (summary["ranks"], summary["metrics"], summary["state"]) == (0, {}, "failed")
    assert run.digest_json.is_file() and run.report_md.is_file()
    assert not run.metrics_nc.exists()


def test_cli_finalize_and_export(tmp_path: Path, capsys, monkeypatch) -> None:
    run_dir = _run(tmp_path)
    assert main(["finalize", run_dir.name, "--outputs", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == str(RunDir(run_dir).summary_json)
    out = tmp_path / "all.csv"
    args = ["export", run_dir.name, "--outputs", str(tmp_path), "--format", "csv", "-o", str(out)]
    assert main(args) == 0
    lines = out.read_text().splitlines()
    assert lines[0].split(",")[:2] == ["rank", "step"] and len(lines) == 41  # 2 ranks x 20
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    args = ["export", run_dir.name, "--outputs", str(tmp_path), "--format", "parquet"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err == "ezpz-tui: parquet needs pyarrow, which is not installed here\n"
    assert main(["finalize", "nope", "--outputs", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_tracker_line_from_the_log_and_the_folders(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.make_folders()
    assert tracker_line(run.path) is None
    offline = run.wandb_dir / "offline-run-20260101_000000-abc"
    offline.mkdir(parents=True)
    run.tensorboard_dir.mkdir()
    run.log(0).write_text(
        "starting\n"
        f"ezpz: tracker wandb -> {offline}\n"
        "ezpz: tracker mlflow -> http://mlflow.example:5000\n"
        "ezpz: tracker csv is off: OSError: disk full\n"
    )
    names = [(t.name, t.where) for t in tracker_outputs(run.path)]
    assert names == [
        ("wandb", str(offline)),
        ("tensorboard", str(run.tensorboard_dir)),
        ("mlflow", "http://mlflow.example:5000"),
    ]
    assert tracker_line(run.path) == (
        "trackers (in the run directory): wandb sync wandb/offline-run-20260101_000000-abc"
        " · tensorboard --logdir tensorboard"
        " · mlflow ui --backend-store-uri http://mlflow.example:5000"
    )


def test_a_finalizer_that_fails_says_why_in_the_launcher_log(tmp_path: Path) -> None:
    run_dir = _run(tmp_path)
    RunDir(run_dir).summary_json.mkdir()  # cannot be replaced by a file
    assert finalize_main([str(run_dir)]) == 1
    lines = RunDir(run_dir).launcher_log.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ezpz-tui: finalize: IsADirectoryError")


def _summary(run_dir: Path) -> dict:
    return json.loads(RunDir(run_dir).summary_json.read_text())


def _peak_in_summary(run_dir: Path) -> str | None:
    peak = _summary(run_dir)["speed"]["efficiency"]["peak"]
    return peak and peak["label"]


def test_the_finalizer_divides_by_the_peak_it_is_given_never_the_config_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """config.toml is read where a person sees its problems (the supervisor's maker, ``ezpz-tui
    finalize``) and its ``[efficiency]`` passed on: the finalizer's own process (started by the
    supervisor or the tether) reads no config, so its peak is the one it was given."""
    settings = tmp_path / "config"
    settings.mkdir()
    (settings / "config.toml").write_text(
        "[efficiency]\npeak_tflops = 100.0\n[monitor]\nslow_factor = 2.5\n"
    )
    monkeypatch.setenv(config.ENV_CONFIG_DIR, str(settings))
    run_dir = tmp_path / "outputs" / "20260101-000000-000-tp1pp1cp1"
    RunDir(run_dir).make_folders()
    with History(run_dir, rank=0) as h:
        for step in range(20):
            first = {"flops_per_token": 1e9} if step == 0 else {}
            h.record(step, {"loss": 1.0, "dt": 0.1, **first}, samples=8)
    write_state(run_dir, RunState(State.SUCCEEDED, start=10.0, end=40.0, exit_code=0))

    given = FinishSettings(PeakSettings(500.0, "fp16"), slow_factor=3.0)
    assert finalize_main([str(run_dir), *given.args()]) == 0
    assert _peak_in_summary(run_dir) == "every device fp16 500 TFLOPS (config)"
    assert _summary(run_dir)["verdicts"]["slow_factor"] == 3.0  # the stragglers judged so
    assert finalize_main([str(run_dir)]) == 0  # no settings given: not the config's either
    assert "(config)" not in (_peak_in_summary(run_dir) or "")
    assert _summary(run_dir)["verdicts"]["slow_factor"] == 1.5
    assert main(["finalize", run_dir.name, "--outputs", str(run_dir.parent)]) == 0
    assert _peak_in_summary(run_dir) == "every device bf16 100 TFLOPS (config)"
    assert _summary(run_dir)["verdicts"]["slow_factor"] == 2.5
