"""Real ranks on the CPU over gloo: mpiexec (PyPI mpich) and torchrun, two ranks each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECK = str(ROOT / "tests" / "ranks" / "check_parallel.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]

pytestmark = pytest.mark.mpi


def run_ranks(launcher: list[str], args: list[str], run_dir: Path, timeout: int = 180) -> None:
    env = {**os.environ, "EZPZ_RUN_DIR": str(run_dir), "EZPZ_DIST_TIMEOUT": "60"}
    proc = subprocess.run(
        [*launcher, *args], env=env, timeout=timeout, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def results(out: Path) -> list[dict]:
    return [json.loads((out / f"result-{r}.json").read_text()) for r in (0, 1)]


@pytest.fixture(params=["mpiexec", "torchrun"])
def launcher(request: pytest.FixtureRequest, mpiexec: str) -> list[str]:
    if request.param == "mpiexec":
        return [mpiexec, "-n", "2", sys.executable]
    return [*TORCHRUN]


def test_ddp_gradients_equal_and_averaged(launcher: list[str], tmp_path: Path) -> None:
    run_ranks(launcher, [CHECK, "ddp", str(tmp_path)], tmp_path / "run")
    r0, r1 = results(tmp_path)
    assert r0["world"] == r1["world"] == 2
    assert r0["source"] == ("pmi" if "mpiexec" in launcher[0] else "torchrun")
    assert r0["loss"] != r1["loss"]  # each rank saw its own batch
    assert r0["grads_equal"] and r1["grads_equal"]
    assert r0["grads_are_mean"] and r0["grad_norm"] == r1["grad_norm"]
    # History files from both ranks, in the run directory the launcher named.
    for rank in (0, 1):
        lines = (
            (tmp_path / "run" / "metrics" / "b0000" / f"rank-{rank:05d}.jsonl")
            .read_text()
            .splitlines()
        )
        assert [json.loads(x)["rank"] for x in lines] == [rank] * 3


def test_fsdp2_step_matches_single_process_reference(mpiexec: str, tmp_path: Path) -> None:
    run_ranks([mpiexec, "-n", "2", sys.executable], [CHECK, "fsdp", str(tmp_path)], tmp_path / "r")
    for r in results(tmp_path):
        assert r["sharded"] and r["matches_reference"]


def test_tp2_step_matches_unsplit_model(mpiexec: str, tmp_path: Path) -> None:
    run_ranks([mpiexec, "-n", "2", sys.executable], [CHECK, "tp", str(tmp_path)], tmp_path / "r")
    for r in results(tmp_path):
        assert r["sizes"] == {"tp": 2, "pp": 1, "cp": 1, "dp": 1}
        assert r["is_dtensor"] and r["local_shape"] == [16, 32]  # q split by rows across 2
        assert r["loss_matches"] and r["params_match"]


def test_demo_through_capture_leaves_a_complete_run_dir(mpiexec: str, tmp_path: Path) -> None:
    run = tmp_path / "x"
    cmd = [
        mpiexec,
        "-n",
        "2",
        sys.executable,
        "-m",
        "runtime.capture",
        "--run-dir",
        str(run),
        "--",
        sys.executable,
        "-m",
        "runtime.examples.train",
        "--steps",
        "20",
    ]
    proc = subprocess.run(cmd, timeout=180, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for rank in (0, 1):
        status = json.loads((run / "status" / "b0000" / f"rank-{rank:05d}.json").read_text())
        assert (status["exit_code"], status["state"]) == (0, "succeeded")
        assert "step 19/20" in (run / "logs" / "b0000" / f"rank-{rank:05d}.log").read_text()
        recs = [
            json.loads(x) for x in (run / "metrics" / "b0000" / f"rank-{rank:05d}.jsonl").open()
        ]
        assert [r["step"] for r in recs] == list(range(20))
        assert recs[-1]["metrics"]["loss"] < recs[0]["metrics"]["loss"] - 0.5


def _setup_in_subprocess(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = (
        "import runtime\n"
        "try:\n"
        "    runtime.setup()\n"
        "except runtime.dist.SetupError as exc:\n"
        "    print('SETUP ERROR:', exc); raise SystemExit(2)\n"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "SLURM_"))}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**base, **env},
        timeout=60,
        capture_output=True,
        text=True,
    )


def test_srun_without_pmi_fails_loudly() -> None:
    # srun --mpi=none: Slurm says 2 tasks, MPI sees a world of 1.
    proc = _setup_in_subprocess(
        {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_STEP_ID": "0", "SLURM_LOCALID": "0"}
    )
    assert proc.returncode == 2
    assert "MPI sees a world of 1" in proc.stdout and "--mpi=pmi2" in proc.stdout


def test_indivisible_sizes_fail_with_a_sentence() -> None:
    proc = _setup_in_subprocess(
        {
            "RANK": "0",
            "WORLD_SIZE": "2",
            "LOCAL_RANK": "0",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": "1",
            "EZPZ_TP": "3",
        }
    )
    assert proc.returncode == 2
    assert "World size 2 is not divisible by tp*pp*cp" in proc.stdout


def test_import_runtime_is_light() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import runtime"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    modules = {line.split("|")[-1].strip().split(".")[0] for line in proc.stderr.splitlines()}
    assert "runtime" in modules
    assert not modules & {"torch", "mpi4py", "numpy", "xarray", "textual", "ezpz_tui"}
