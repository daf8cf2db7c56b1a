"""The per-rank capture wrapper, run as the launcher runs it: a real process, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.required import strace

CAPTURE = [sys.executable, "-m", "runtime.capture", "--run-dir"]


def capture(run_dir: Path, *cmd: str, env: dict[str, str] | None = None) -> int:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([*CAPTURE, str(run_dir), "--", *cmd], env=full_env, timeout=60).returncode


def status(run_dir: Path, rank: int = 0) -> dict:
    return json.loads((run_dir / "status" / "b0000" / f"rank-{rank:05d}.json").read_text())


def log(run_dir: Path, rank: int = 0) -> str:
    return (run_dir / "logs" / "b0000" / f"rank-{rank:05d}.log").read_text()


def test_exit_zero_with_stdout_and_stderr(tmp_path: Path) -> None:
    code = (
        "import os, sys; print('out'); print('err', file=sys.stderr); "
        "print(os.environ['EZPZ_RUN_DIR'])"
    )
    assert capture(tmp_path, sys.executable, "-c", code) == 0
    text = log(tmp_path)
    assert "out" in text and "err" in text and str(tmp_path) in text
    st = status(tmp_path)
    assert (st["state"], st["exit_code"], st["signal"], st["rank"]) == ("succeeded", 0, None, 0)
    assert st["end"] >= st["start"] and st["pid"] != st["wrapper_pid"]


def test_exit_three_and_rank_from_environment(tmp_path: Path) -> None:
    env = {"PMI_RANK": "1", "PMI_SIZE": "2"}
    assert capture(tmp_path, sys.executable, "-c", "raise SystemExit(3)", env=env) == 3
    st = status(tmp_path, rank=1)
    assert (st["state"], st["exit_code"], st["world_size"]) == ("failed", 3, 2)
    assert (tmp_path / "logs" / "b0000" / "rank-00001.log").exists()


def test_native_crash_keeps_last_words(tmp_path: Path) -> None:
    # Output written by C code right before a segfault, no Python logging involved.
    code = "import ctypes, os; os.write(1, b'last words before the crash\\n'); ctypes.string_at(0)"
    rc = capture(tmp_path, sys.executable, "-c", code)
    # The wrapper dies of the same signal, as the rank would without it: Hydra then tears the
    # job down instead of leaving the other ranks waiting for a dead peer.
    assert rc == -signal.SIGSEGV
    st = status(tmp_path)
    assert (st["state"], st["signal"], st["signal_name"]) == ("failed", signal.SIGSEGV, "SIGSEGV")
    assert "last words before the crash" in log(tmp_path)


def test_killed_by_signal(tmp_path: Path) -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    assert capture(tmp_path, sys.executable, "-c", code) == -signal.SIGKILL
    assert status(tmp_path)["signal_name"] == "SIGKILL"


def test_signals_are_forwarded_to_the_child(tmp_path: Path) -> None:
    marker = tmp_path / "got"
    code = (
        "import signal, sys, time, pathlib\n"
        "def on(s, f):\n"
        f"    pathlib.Path({str(marker)!r}).write_text(str(s)); sys.exit(7)\n"
        "signal.signal(signal.SIGTERM, on)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([*CAPTURE, str(tmp_path), "--", sys.executable, "-c", code])
    deadline = time.time() + 30
    rank_log = tmp_path / "logs" / "b0000" / "rank-00000.log"  # made once the wrapper has started
    while "ready" not in (rank_log.read_text() if rank_log.exists() else ""):
        assert time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 7
    assert marker.read_text() == str(int(signal.SIGTERM))
    st = status(tmp_path)
    assert st["exit_code"] == 7 and st["signals_received"] == ["SIGTERM"]


def test_missing_program_is_a_readable_failure(tmp_path: Path) -> None:
    assert capture(tmp_path, "no-such-program-ezpz") == 127
    assert "cannot start 'no-such-program-ezpz'" in log(tmp_path)
    assert status(tmp_path)["state"] == "failed"


def test_non_utf8_output_is_kept_as_bytes(tmp_path: Path) -> None:
    code = "import os; os.write(1, b'half a char: \\xe2\\x82\\n')"
    assert capture(tmp_path, sys.executable, "-c", code) == 0
    assert b"\xe2\x82" in (tmp_path / "logs" / "b0000" / "rank-00000.log").read_bytes()


def test_usage_error_without_command(tmp_path: Path) -> None:
    proc = subprocess.run([*CAPTURE, str(tmp_path), "--"], capture_output=True, text=True)
    assert proc.returncode == 2 and "no command" in proc.stderr


@pytest.mark.mpi
def test_two_ranks_under_mpiexec(tmp_path: Path, mpiexec: str) -> None:
    code = "import os; print('hello from', os.environ['PMI_RANK'])"
    proc = subprocess.run(
        [mpiexec, "-n", "2", *CAPTURE, str(tmp_path), "--", sys.executable, "-c", code],
        timeout=60,
    )
    assert proc.returncode == 0
    for rank in (0, 1):
        assert f"hello from {rank}" in log(tmp_path, rank)
        assert status(tmp_path, rank)["world_size"] == 2


def test_a_rank_makes_no_folder_and_lists_none_of_the_run(tmp_path: Path) -> None:
    """With the folders made before the ranks start (as the supervisor does), a rank's wrapper,
    its History and its telemetry only open their own files: 16,384 ranks must not each mkdir
    or list a folder on the metadata server. Traced with strace, children included."""
    from runtime.rundir import RunDir

    run = RunDir(tmp_path / "run")
    run.make_folders()
    trace = tmp_path / "trace.txt"
    code = "from runtime.history import History; History().record(1, {'loss': 1.0})"
    env = {**os.environ, "PMI_RANK": "1", "PMI_SIZE": "2", "EZPZ_TELEMETRY_S": "0.1"}
    argv = [strace(), "-f", "-qq", "-e", "trace=mkdir,mkdirat,openat,open", "-o", str(trace)]
    done = subprocess.run(
        [*argv, *CAPTURE, str(run.path), "--", sys.executable, "-c", code], env=env, timeout=60
    )
    assert done.returncode == 0
    assert status(run.path, rank=1)["state"] == "succeeded"
    assert '"loss":1.0' in run.metrics(1).read_text()
    ours = [line for line in trace.read_text().splitlines() if str(run.path) in line]
    assert any("rank-00001.log" in line for line in ours), "the trace saw the rank's files"
    assert not [line for line in ours if "mkdir" in line], "no folder made"
    assert not [line for line in ours if "O_DIRECTORY" in line], "no folder listed"


def test_a_rank_run_by_hand_into_a_bare_directory_makes_its_folders(tmp_path: Path) -> None:
    code = "from runtime.history import History; History().record(1, {'loss': 1.0})"
    assert capture(tmp_path / "bare", sys.executable, "-c", code) == 0
    assert (
        '"loss":1.0' in (tmp_path / "bare" / "metrics" / "b0000" / "rank-00000.jsonl").read_text()
    )
    assert status(tmp_path / "bare")["state"] == "succeeded"
