"""Per-rank telemetry written by the capture wrapper of real ranks.

The accelerator figures come from the tools' stand-ins (tests/standins) put first on PATH: a
node of four GPUs whose figures differ per GPU, so each rank's line shows which GPU it was given.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ezpz_tui.core.watching.followers import RunFollower
from ezpz_tui.core.watching.monitor import RunMonitor
from runtime.rundir import RankState, RunDir
from runtime.telemetry.devices import expected
from runtime.telemetry.nvidia import MIB
from runtime.telemetry.record import parse_line
from tests.envs import without_job
from tests.fixtures.cli import PY, base_env, cli, run_dirs

STANDINS = Path(__file__).resolve().parents[1] / "standins"
NOTE = "ezpz telemetry:"


def with_standins(env: dict[str, str]) -> dict[str, str]:
    """The stand-ins first on PATH, then this Python (their ``python3``)."""
    path = os.pathsep.join([str(STANDINS), str(Path(sys.executable).parent), env["PATH"]])
    return {**env, "PATH": path}


@pytest.mark.mpi
def test_two_ranks_each_sample_their_own_gpu_every_interval(outputs: Path) -> None:
    env = with_standins(base_env(outputs))
    env.update(EZPZ_TELEMETRY_S="0.3", TORCH_DEVICE="cpu")
    train = [PY, "-m", "runtime.examples.train", "--steps", "40", "--sleep", "0.05"]
    proc = cli(["launch", "--ppn", "2", "--quiet", "--", *train], env, 180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (run_dir,) = run_dirs(outputs)
    run = RunDir(run_dir)
    for rank in (0, 1):
        lines = run.telemetry(rank).read_text().splitlines()
        samples = [parse_line(line) for line in lines]
        assert len(samples) >= 5, lines
        for sample in samples:
            assert sample is not None
            assert sample.cpu_pct is not None and sample.rss_bytes and sample.procs
        # A stand-in that starts too slowly on a busy machine misses a sample, no more.
        with_gpu = [s for s in samples if s is not None and s.device is not None]
        assert len(with_gpu) >= 0.8 * len(samples)
        for sample in with_gpu:
            assert sample.device == f"nvidia-smi:{rank}"  # rank 1 on GPU 1, no variable set
            assert sample.util_pct == 10 * rank + 7
            assert sample.mem_used_bytes == (rank + 1) * 1024 * MIB
        # One line an interval at most: a loaded machine only makes a line late or skips one.
        times = [s.time for s in samples if s is not None]
        assert times[-1] - times[0] > (len(times) - 2) * 0.3, times
        # A training rank is busy (70-80 % of a core here; a sleeping process shows 0).
        assert max(s.cpu_pct or 0.0 for s in samples if s is not None) > 5
        assert NOTE not in run.log(rank).read_text()
    print("telemetry line:", lines[-1])


def capture(run_dir: Path, env: dict[str, str], seconds: float = 1.2) -> RunDir:
    """One rank through the capture wrapper, its command sleeping ``seconds``."""
    command = [PY, "-c", f"import time; time.sleep({seconds})"]
    wrapper = [PY, "-m", "runtime.capture", "--run-dir", str(run_dir), "--", *command]
    proc = subprocess.run(wrapper, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    status = json.loads(RunDir(run_dir).status(0).read_text())
    assert status["state"] == "succeeded" and "leftovers" not in status  # no tool left over
    return RunDir(run_dir)


def test_zero_interval_writes_no_telemetry(tmp_path: Path) -> None:
    env = with_standins(without_job())
    run = capture(tmp_path / "run", {**env, "EZPZ_TELEMETRY_S": "0"}, 0.5)
    assert list(run.telemetry_dir.rglob("*")) == [run.telemetry_dir / "b0000"]  # the empty block
    assert NOTE not in run.log(0).read_text()


def test_an_expected_gpu_without_tools_is_one_log_line(tmp_path: Path) -> None:
    bare = {**without_job(), "PATH": str(Path(sys.executable).parent), "EZPZ_TELEMETRY_S": "0.2"}
    run = capture(tmp_path / "gpu", {**bare, "CUDA_VISIBLE_DEVICES": "0"})
    log = run.log(0).read_text()
    assert log.count(NOTE) == 1
    assert "nvidia-smi: not found" in log and "host figures only" in log
    samples = [parse_line(line) for line in run.telemetry(0).read_text().splitlines()]
    assert len(samples) >= 3 and all(s is not None and s.device is None for s in samples)


def test_a_cpu_only_node_samples_the_host_and_says_nothing(tmp_path: Path) -> None:
    bare = {**without_job(), "PATH": str(Path(sys.executable).parent), "EZPZ_TELEMETRY_S": "0.2"}
    if expected(bare):
        pytest.skip("this machine has accelerator device nodes")
    run = capture(tmp_path / "cpu", bare)
    assert run.log(0).read_text() == ""
    samples = [parse_line(line) for line in run.telemetry(0).read_text().splitlines()]
    assert len(samples) >= 3
    assert all(s is not None and s.rss_bytes and s.procs == 1 for s in samples)


@pytest.mark.mpi
def test_a_rank_that_sleeps_in_its_step_is_slow_within_three_steps(outputs: Path) -> None:
    """Two real ranks under mpiexec, rank 1 six times slower a step: the monitor a TUI runs
    shows it ``slow`` by its third step while rank 0 stays ``running``, with both ranks'
    CPU and RSS sampled."""
    env = base_env(outputs)
    env.update(EZPZ_TELEMETRY_S="0.3", EZPZ_SLOW_RANK="1")
    script = str(Path(__file__).resolve().parents[1] / "ranks" / "slow_rank.py")
    launch = subprocess.Popen(
        [PY, "-m", "ezpz_tui", "launch", "--ppn", "2", "--quiet", "--", PY, script],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not run_dirs(outputs) and time.monotonic() < deadline:
            time.sleep(0.1)
        (run_dir,) = run_dirs(outputs)
        monitor, follower = RunMonitor(run_dir), RunFollower(run_dir)
        flagged_at: int | None = None
        while time.monotonic() < deadline and launch.poll() is None:
            follower.rescan()
            monitor.apply(monitor.prepare(follower.poll()), time.time())
            if monitor.state_of(1, time.time()) == RankState.SLOW and flagged_at is None:
                flagged_at = len(RunDir(run_dir).metrics(1).read_text().splitlines())
                assert monitor.state_of(0, time.time()) == RankState.RUNNING
            if flagged_at is not None and all(monitor.telemetry.get(r) for r in (0, 1)):
                break
            time.sleep(0.1)
        assert flagged_at is not None and flagged_at <= 3, flagged_at
        for rank in (0, 1):
            latest = monitor.telemetry[rank].latest
            assert latest is not None and latest.rss_bytes and latest.cpu_pct is not None
    finally:
        launch.terminate()
        launch.wait(30)
