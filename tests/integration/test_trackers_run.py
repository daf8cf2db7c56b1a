"""Real 2-rank demo runs feeding the real trackers (W&B offline, TensorBoard, MLflow's file
store, CSV) with no network, a tracker whose import fails, and the end products every ended
run gets (summary.json, metrics.nc), a failed one included."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from runtime.rundir import RunDir
from tests.fixtures.cli import PY, base_env, cli, run_dirs
from tests.fixtures.wandb_files import history

STEPS = 12
PROXIES = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "all_proxy")


def _offline_env(outputs: Path, wandb_mode: str | None) -> dict[str, str]:
    """No route to W&B: its URL is a closed local port and no proxy could reach another."""
    env = {k: v for k, v in base_env(outputs).items() if k not in PROXIES}
    env.pop("MLFLOW_TRACKING_URI", None)
    env.update(
        EZPZ_TRACKERS="wandb,tensorboard,mlflow,csv",
        WANDB_BASE_URL="http://127.0.0.1:9",
        WANDB_API_KEY="x" * 40,  # a wrong key: offline never sends it
        TORCH_DEVICE="cpu",
    )
    env.pop("WANDB_MODE", None)
    if wandb_mode:
        env["WANDB_MODE"] = wandb_mode
    return env


def _launch(outputs: Path, env: dict[str, str], command: list[str]) -> Path:
    proc = cli(["launch", "--ppn", "2", "--quiet", "--", *command], env, 240)
    (run_dir,) = run_dirs(outputs)
    run_dir.joinpath("cli.out").write_text(proc.stdout + proc.stderr)
    return run_dir


def _ended_products(run_dir: Path, timeout: float = 60) -> dict:
    """summary.json once the finalizer (a process of its own) has written it, and metrics.nc."""
    run = RunDir(run_dir)
    deadline = time.monotonic() + timeout
    while not (run.summary_json.exists() and run.metrics_nc.exists()):
        assert time.monotonic() < deadline, (run_dir, sorted(os.listdir(run_dir)))
        time.sleep(0.2)
    return json.loads(run.summary_json.read_text())


@pytest.mark.mpi
@pytest.mark.parametrize("wandb_mode", ["offline", None])
def test_demo_feeds_every_tracker_with_no_network(outputs: Path, wandb_mode: str | None) -> None:
    env = _offline_env(outputs, wandb_mode)
    run_dir = _launch(outputs, env, [PY, "-m", "runtime.examples.train", "--steps", str(STEPS)])
    run = RunDir(run_dir)
    log0 = run.log(0).read_text()
    assert json.loads(run.state_json.read_text())["state"] == "succeeded", log0[-3000:]
    jsonl = [json.loads(line) for line in run.metrics(0).read_text().splitlines()]
    losses = [r["metrics"]["loss"] for r in jsonl]
    assert len(losses) == STEPS
    # Rank 0 fed the trackers, rank 1 none, and its log says where each went.
    assert "ezpz: tracker" not in run.log(1).read_text()
    for name in ("wandb", "tensorboard", "mlflow", "csv"):
        assert f"ezpz: tracker {name} -> " in log0, log0[-3000:]

    (offline,) = run.wandb_dir.glob("offline-run-*")
    assert f"wandb sync {offline}" in log0
    rows = history(offline)
    assert [row["loss"] for row in rows] == pytest.approx(losses)

    from tensorboard.backend.event_processing import event_accumulator

    acc = event_accumulator.EventAccumulator(str(run.tensorboard_dir))
    acc.Reload()
    events = acc.Scalars("loss")
    assert [e.step for e in events] == list(range(STEPS))
    assert [e.value for e in events] == pytest.approx(losses, rel=1e-6)

    import mlflow

    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    mlflow.set_tracking_uri(run.mlruns_dir.as_uri())
    found = mlflow.search_runs(experiment_names=["ezpz"])
    assert list(found["tags.mlflow.runName"]) == [run_dir.name]
    assert found["metrics.loss"][0] == pytest.approx(losses[-1])
    client = mlflow.MlflowClient(run.mlruns_dir.as_uri())
    steps = client.get_metric_history(found["run_id"][0], "loss")
    assert sorted(m.step for m in steps) == list(range(STEPS))
    assert found["params.plan.ppn"][0] == "2"

    csv_rows = run.metrics_csv.read_text().splitlines()
    assert csv_rows[0].startswith("step,timestamp,loss") and len(csv_rows) == STEPS + 1

    summary = _ended_products(run_dir)
    assert summary["state"] == "succeeded" and summary["ranks"] == 2
    assert summary["metrics"]["loss"]["last"] == pytest.approx(losses[-1])


@pytest.mark.mpi
def test_a_tracker_whose_import_raises_leaves_the_run_succeeding(
    outputs: Path, tmp_path: Path
) -> None:
    fake = tmp_path / "fake" / "wandb"
    fake.mkdir(parents=True)
    fake.joinpath("__init__.py").write_text("raise RuntimeError('faked: no wandb here')\n")
    env = {**base_env(outputs), "EZPZ_TRACKERS": "wandb,csv", "TORCH_DEVICE": "cpu"}
    env["PYTHONPATH"] = os.pathsep.join([str(fake.parent), env.get("PYTHONPATH", "")])
    run_dir = _launch(outputs, env, [PY, "-m", "runtime.examples.train", "--steps", "4"])
    run = RunDir(run_dir)
    log0 = run.log(0).read_text()
    assert json.loads(run.state_json.read_text())["state"] == "succeeded", log0[-3000:]
    lines = [line for line in log0.splitlines() if "wandb" in line]
    assert lines == ["ezpz: tracker wandb is off: RuntimeError: faked: no wandb here"]
    assert len(run.metrics_csv.read_text().splitlines()) == 5  # csv went on


@pytest.mark.mpi
def test_a_failed_run_still_gets_summary_and_metrics_nc(outputs: Path) -> None:
    import xarray as xr

    # No close: the records are flushed at exit. Rank 1 fails once rank 0 has exited with its
    # records flushed; before that, the fail-fast could stop rank 0 first (a loaded machine).
    code = (
        "import os, sys, time; from pathlib import Path; from runtime.history import History\n"
        "h = History()\n"
        "for i in range(5): h.record(i, {'loss': 10.0 * h.rank + i})\n"
        "peer = Path(os.environ['EZPZ_RUN_DIR'], 'metrics', 'rank-00000.jsonl')\n"
        "end = time.monotonic() + 60\n"
        "while h.rank == 1 and time.monotonic() < end and (\n"
        "    not peer.exists() or peer.read_text().count(chr(10)) < 5\n"
        "): time.sleep(0.05)\n"
        "sys.exit(3 if h.rank == 1 else 0)\n"
    )
    run_dir = _launch(outputs, base_env(outputs), [sys.executable, "-c", code])
    summary = _ended_products(run_dir)
    assert summary["state"] == "failed" and summary["ranks"] == 2 and summary["steps"] == 5
    assert summary["metrics"]["loss"]["last_spread"] == 10.0
    with xr.open_dataset(RunDir(run_dir).metrics_nc) as ds:
        assert ds["loss"].sel(rank=1).values.tolist() == [10.0, 11.0, 12.0, 13.0, 14.0]
        assert ds["loss"].sel(rank=0, step=4).item() == 4.0
