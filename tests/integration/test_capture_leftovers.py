"""Nothing a rank leaves behind outlives it: the capture wrapper adopts its orphans (child
subreaper) and ends them when the rank's own process ends. Real processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

PY = sys.executable
CAPTURE = [PY, "-m", "runtime.capture", "--run-dir"]

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="child subreapers are a Linux feature"
)

# A rank that starts a detached helper (its own session, as a daemon would) and exits at once.
DETACHED = textwrap.dedent(
    """
    import os, subprocess, sys
    pidfile, helper = sys.argv[1], sys.argv[2:]
    proc = subprocess.Popen(helper, start_new_session=True)
    with open(pidfile + ".tmp", "w") as fh:
        fh.write(str(proc.pid))
    os.replace(pidfile + ".tmp", pidfile)
    print("rank done, helper", proc.pid, flush=True)
    """
)
# A helper that ignores SIGTERM, and says so in ``argv[1]`` once it does.
STUBBORN = (
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(sys.argv[1], 'w').close(); time.sleep(300)"
)

WAIT_READY = textwrap.dedent(
    """
    import time
    while not os.path.exists(helper[-1]):  # the rank ends only once the helper ignores SIGTERM
        time.sleep(0.01)
    """
)


def status(run_dir: Path, rank: int = 0) -> dict:
    return json.loads((run_dir / "status" / "b0000" / f"rank-{rank:05d}.json").read_text())


def log(run_dir: Path, rank: int = 0) -> str:
    return (run_dir / "logs" / "b0000" / f"rank-{rank:05d}.log").read_text()


def gone(pid: int) -> bool:
    """Not running and not a zombie either: the wrapper reaped it."""
    return not os.path.exists(f"/proc/{pid}")


def capture(run_dir: Path, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CAPTURE, str(run_dir), "--", *cmd], timeout=timeout, capture_output=True, text=True
    )


def test_detached_helper_is_ended_and_recorded(tmp_path: Path) -> None:
    pidfile = tmp_path / "helper.pid"
    script = tmp_path / "rank.py"
    script.write_text(DETACHED)
    proc = capture(tmp_path / "run", PY, str(script), str(pidfile), "sleep", "300")
    assert proc.returncode == 0, proc.stderr
    helper = int(pidfile.read_text())
    assert gone(helper)
    st = status(tmp_path / "run")
    assert st["state"] == "succeeded" and st["exit_code"] == 0
    assert st["leftovers"] == [f"pid {helper} (sleep): SIGTERM"]
    assert f"ended 1 process the rank left behind: pid {helper} (sleep)" in log(tmp_path / "run")


def test_shell_background_job_is_ended(tmp_path: Path) -> None:
    # The shell exits with its `sleep &` still running; the rank's exit code stands. It waits
    # until the fork has become sleep: before its exec the leftover is still named sh.
    pidfile = tmp_path / "bg.pid"
    became_sleep = 'until [ "$(cat /proc/$p/comm)" = sleep ]; do :; done'
    code = f"sleep 300 & p=$!; {became_sleep}; echo $p > {pidfile}; exit 4"
    proc = capture(tmp_path / "run", "sh", "-c", code)
    assert proc.returncode == 4, proc.stderr
    helper = int(pidfile.read_text())
    assert gone(helper)
    st = status(tmp_path / "run")
    assert (st["state"], st["exit_code"]) == ("failed", 4)
    assert st["leftovers"] == [f"pid {helper} (sleep): SIGTERM"]


def test_helper_that_ignores_sigterm_is_killed(tmp_path: Path) -> None:
    pidfile, ready = tmp_path / "helper.pid", tmp_path / "ready"
    script = tmp_path / "rank.py"
    script.write_text(DETACHED + WAIT_READY)
    start = time.monotonic()
    proc = capture(tmp_path / "run", PY, str(script), str(pidfile), PY, "-c", STUBBORN, str(ready))
    elapsed = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    helper = int(pidfile.read_text())
    assert gone(helper)
    (entry,) = status(tmp_path / "run")["leftovers"]
    assert entry.startswith(f"pid {helper} (") and entry.endswith("): SIGKILL")
    assert ", SIGKILL)" in log(tmp_path / "run")
    # The grace was given before the SIGKILL (about 2.4 s here; the helper would sleep 300 s).
    assert 2.0 <= elapsed < 30.0


def test_orphans_ending_during_the_rank_are_reaped_not_taken_for_it(tmp_path: Path) -> None:
    # A double fork: the subshell is orphaned at once (adopted by the wrapper) and ends after
    # 0.3 s while the rank still runs. The wrapper must reap it right away, and must still
    # report the rank's own exit code (5), not the orphan's (0).
    pidfile = tmp_path / "orphan.pid"
    code = textwrap.dedent(
        f"""
        import os, subprocess, sys, time
        subprocess.run(["sh", "-c", "(sleep 0.3; exit 0) & echo $! > {pidfile}"], check=True)
        orphan = int(open({str(pidfile)!r}).read())
        parent = open(f"/proc/{{orphan}}/stat").read().rpartition(")")[2].split()[1]
        print("orphan parent is wrapper:", int(parent) == os.getppid(), flush=True)
        time.sleep(1.5)
        print("orphan reaped:", not os.path.exists(f"/proc/{{orphan}}"), flush=True)
        sys.exit(5)
        """
    )
    proc = capture(tmp_path / "run", PY, "-c", code)
    assert proc.returncode == 5, proc.stderr
    text = log(tmp_path / "run")
    assert "orphan parent is wrapper: True" in text
    assert "orphan reaped: True" in text
    st = status(tmp_path / "run")
    assert (st["state"], st["exit_code"]) == ("failed", 5)
    assert "leftovers" not in st


@pytest.mark.mpi
def test_two_ranks_under_mpiexec_leave_nothing(tmp_path: Path, mpiexec: str) -> None:
    script = tmp_path / "rank.py"
    script.write_text(DETACHED)
    run = tmp_path / "run"
    pidfile = f"{tmp_path}/helper-$PMI_RANK.pid"
    rank = ["sh", "-c", f'exec {PY} {script} "{pidfile}" sleep 300']
    proc = subprocess.run(
        [mpiexec, "-n", "2", *CAPTURE, str(run), "--", *rank],
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    for r in (0, 1):
        helper = int((tmp_path / f"helper-{r}.pid").read_text())
        assert gone(helper)
        st = status(run, r)
        assert st["state"] == "succeeded"
        assert st["leftovers"] == [f"pid {helper} (sleep): SIGTERM"]


def test_a_stop_still_reaches_the_rank_and_ends_its_helper(tmp_path: Path) -> None:
    # The rank keeps running after starting its helper; SIGTERM to the wrapper (a stop) is
    # forwarded to the rank, which dies of it; then the helper is ended too.
    pidfile, run = tmp_path / "helper.pid", tmp_path / "run"
    script = tmp_path / "rank.py"
    script.write_text(DETACHED + "import time\ntime.sleep(60)\n")
    proc = subprocess.Popen(
        [*CAPTURE, str(run), "--", PY, str(script), str(pidfile), "sleep", "300"]
    )
    try:
        deadline = time.monotonic() + 30
        while not pidfile.exists():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    helper = int(pidfile.read_text())
    assert gone(helper)
    st = status(run)
    assert st["signals_received"] == ["SIGTERM"] and st["signal_name"] == "SIGTERM"
    assert st["leftovers"] == [f"pid {helper} (sleep): SIGTERM"]


def test_a_crashing_rank_still_takes_the_wrapper_down_after_its_helper(tmp_path: Path) -> None:
    pidfile, run = tmp_path / "helper.pid", tmp_path / "run"
    script = tmp_path / "rank.py"
    script.write_text(DETACHED + "import ctypes\nctypes.string_at(0)\n")
    proc = capture(run, PY, str(script), str(pidfile), "sleep", "300")
    assert proc.returncode == -signal.SIGSEGV  # the launcher still sees a crash
    helper = int(pidfile.read_text())
    assert gone(helper)
    st = status(run)
    assert (st["state"], st["signal_name"]) == ("failed", "SIGSEGV")
    assert st["leftovers"] == [f"pid {helper} (sleep): SIGTERM"]
