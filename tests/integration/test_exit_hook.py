"""Every rank the product starts exits cleanly, and an abort at exit is explained for what it is:
real launches (mpiexec, gloo, two ranks), real interpreters, real SIGABRT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from runtime.exit_hook import DESTROYED
from runtime.rundir import RunDir, read_state, read_statuses
from tests.fixtures.cli import base_env, cli, run_dirs

REPO = Path(__file__).resolve().parents[2]
RANKS = REPO / "tests" / "ranks"
PY = sys.executable
CAPTURE = [PY, "-m", "runtime.capture", "--run-dir"]
AT_EXIT = (
    "rank 1 aborted at exit after its work finished (a process group still alive at interpreter "
    "exit: call dist.destroy_process_group(), or let ezpz-tui's exit hook do it)"
)
LAUNCHES = 20


def launch(outputs: Path, *command: str, timeout: float = 180) -> tuple[Path, str]:
    """One ``ezpz-tui launch --ppn 2`` of ``command`` into ``outputs``: its run directory and
    what the CLI printed."""
    before = set(run_dirs(outputs))
    proc = cli(["launch", "--ppn", "2", "--", *command], base_env(outputs), timeout)
    made = [d for d in run_dirs(outputs) if d not in before]
    assert len(made) == 1, proc.stdout + proc.stderr
    return made[0], proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.timeout(LAUNCHES * 60)  # about 6 s a launch on 2 idle cores, 12 s on a busy one
def test_a_script_that_leaves_its_group_alive_always_ends_cleanly(outputs: Path) -> None:
    """Without the hook this script aborted 5 of 30 launches here (and ~8% in docs/pitfalls.md)."""
    ended = []
    for _ in range(LAUNCHES):
        run_dir, _ = launch(outputs, PY, str(RANKS / "ddp_no_destroy.py"))
        ranks = [(str(s.state), s.destroyed_at_exit) for s in read_statuses(run_dir)]
        ended.append((str(read_state(run_dir).state), ranks))
    clean = ("succeeded", [("succeeded", True), ("succeeded", True)])
    assert ended == [clean] * LAUNCHES
    log = RunDir(run_dir).log(1).read_text()
    assert log.count(DESTROYED) == 1 and log.rstrip().endswith(DESTROYED)
    assert not list(RunDir(run_dir).status_dir.glob("*.destroyed"))  # taken into the status


def why(outputs: Path, run_dir: Path) -> dict:
    proc = cli(["why", "--json", run_dir.name], base_env(outputs))
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.mpi
def test_an_abort_after_the_last_step_is_explained_and_one_mid_run_is_a_crash(
    outputs: Path,
) -> None:
    at_exit, _ = launch(outputs, PY, str(RANKS / "abort_at_exit.py"), "at-exit")
    mid_run, _ = launch(outputs, PY, str(RANKS / "abort_at_exit.py"), "mid-run")

    said = why(outputs, at_exit)
    assert (said["state"], said["rank"], said["signal_name"]) == ("failed", 1, "SIGABRT")
    assert said["cause"] == AT_EXIT
    assert said["advice"][0].startswith("End the script with dist.barrier() and dist.destroy")
    assert not any("native crash" in line for line in said["advice"])
    listed = json.loads(cli(["runs", "--json"], base_env(outputs)).stdout)
    causes = {run["run_id"]: run["cause"] for run in listed}
    assert causes[at_exit.name] == AT_EXIT  # recorded by the supervisor, read by `runs --json`

    said = why(outputs, mid_run)
    assert (said["state"], said["rank"], said["signal_name"]) == ("failed", 1, "SIGABRT")
    assert said["cause"].startswith("rank 1 on ") and said["cause"].endswith("SIGABRT (signal 6)")
    assert any(line.startswith("A native crash") for line in said["advice"])
    assert causes[mid_run.name] == said["cause"]


# The rank's script: a one-rank gloo group, never destroyed by the script itself.
GROUP = textwrap.dedent(
    """
    import sys, threading, time
    import torch.distributed as dist
    armed = [t.name for t in threading.enumerate() if t.name == "ezpz-destroy-at-exit"]
    print("destroyer ready before exit:", bool(armed), flush=True)
    dist.init_process_group("gloo", init_method=f"file://{sys.argv[1]}", rank=0, world_size=1)
    if sys.argv[2] == "hang":
        dist.destroy_process_group = lambda *a, **k: time.sleep(3600)
    elif sys.argv[2] == "own":
        dist.destroy_process_group()
    print(f"script ended at {time.time()!r}", flush=True)
    """
)


def run_rank(tmp_path: Path, how: str, **env: str) -> tuple[dict, str, float]:
    """The script under the capture wrapper: the rank's status, its log, and the seconds from
    the script's end to the wrapper's."""
    script, run_dir = tmp_path / "rank.py", tmp_path / "run"
    tmp_path.mkdir(exist_ok=True)
    script.write_text(GROUP)
    cmd = [*CAPTURE, str(run_dir), "--", PY, str(script), str(tmp_path / "store"), how]
    proc = subprocess.run(cmd, env={**os.environ, **env}, timeout=120, capture_output=True)
    ended = time.time()
    assert proc.returncode == 0, proc.stderr
    log = RunDir(run_dir).log(0).read_text()
    status = json.loads(RunDir(run_dir).status(0).read_text())
    script_end = float(log.split("script ended at ")[1].split()[0])
    return status, log, ended - script_end


def test_the_hook_destroys_a_group_the_script_left_and_says_so(tmp_path: Path) -> None:
    status, log, _ = run_rank(tmp_path, "leave")
    assert "destroyer ready before exit: True" in log  # started at import, not at exit
    assert log.rstrip().endswith(DESTROYED)
    assert (status["state"], status.get("destroyed_at_exit")) == ("succeeded", True)


def test_a_script_that_destroys_its_group_or_turns_the_hook_off_is_left_alone(
    tmp_path: Path,
) -> None:
    status, log, _ = run_rank(tmp_path / "own", "own")
    assert DESTROYED not in log and "destroyed_at_exit" not in status
    status, log, _ = run_rank(tmp_path / "off", "leave", EZPZ_DESTROY_AT_EXIT="0")
    assert "destroyer ready before exit: False" in log
    assert DESTROYED not in log and "destroyed_at_exit" not in status


def test_a_destroy_that_hangs_holds_the_exit_no_longer_than_the_timeout(tmp_path: Path) -> None:
    timeout = 1.0
    status, log, waited = run_rank(tmp_path, "hang", EZPZ_DESTROY_AT_EXIT_TIMEOUT_S=str(timeout))
    assert "ezpz: destroying the process group at exit took over 1s; exiting anyway" in log
    assert (status["state"], status["exit_code"]) == ("succeeded", 0)
    assert "destroyed_at_exit" not in status
    assert timeout <= waited < 10 * timeout
