"""One interpreter a rank: a Python rank watched from its own interpreter (runtime.in_process),
launched as a person types it and run as the launcher runs it; real processes, real signals.

The launch starts the rank's command itself, with no ``python -m runtime.capture`` in front; the
process the launcher started forks at ``sitecustomize`` time and watches the fork, which runs
the program. Everything the wrapper guaranteed is asserted here again: the log, the status at
start and end, a SIGKILL and a native crash with their last words, forwarded signals and
leftovers; and a command that is not the launch's Python is still wrapped.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runtime.env import CAPTURE_IN_PROCESS_VAR
from runtime.rundir import RunDir, read_raised
from runtime.stackdump import SITE_DIR
from tests.fixtures.cli import base_env, cli, run_dirs

PY = sys.executable
pytestmark = pytest.mark.mpi

# What a rank tells about itself: its pid, its parent, and every ancestor's argv up to the
# launcher's proxy; whether the watcher's modules or variable leaked into the program; and
# which process a Python it starts has as its parent.
SELF_REPORT = """
import json, os, subprocess, sys
def argv(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return [a.decode() for a in fh.read().split(b"\\0") if a]
def parent(pid):
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().rsplit(")", 1)[1].split()[1])
chain, pid = [], os.getppid()
while pid > 1 and len(chain) < 3:
    chain.append(argv(pid))
    pid = parent(pid)
asked = "import os; print(os.getppid(), os.environ.get('EZPZ_CAPTURE_IN_PROCESS'))"
child = subprocess.run([sys.executable, "-c", asked], capture_output=True, text=True)
child = child.stdout.split()
print("REPORT", json.dumps({
    "pid": os.getpid(), "ppid": os.getppid(), "chain": chain,
    "rank": os.environ["RANK"], "world": os.environ["WORLD_SIZE"],
    "run_dir": os.environ.get("EZPZ_RUN_DIR"), "trigger": os.environ.get("EZPZ_CAPTURE_IN_PROCESS"),
    "runtime_modules": sorted(m for m in sys.modules if m == "runtime" or m.startswith("runtime.")),
    "child": child,
}))
sys.exit(int(os.environ["RANK"]) * 3)
"""


def _env(tmp_path: Path) -> dict[str, str]:
    return {**base_env(tmp_path), "PATH": f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}"}


def _status(run_dir: Path, rank: int) -> dict:
    return json.loads(RunDir(run_dir).status(rank).read_text())


def _log(run_dir: Path, rank: int) -> str:
    return RunDir(run_dir).log(rank).read_text()


def _report(run_dir: Path, rank: int) -> dict:
    (line,) = [ln for ln in _log(run_dir, rank).splitlines() if ln.startswith("REPORT ")]
    return json.loads(line.removeprefix("REPORT "))


def test_a_python_rank_runs_in_its_own_interpreter_alone(tmp_path: Path) -> None:
    done = cli(
        ["launch", "--quiet", "--ppn", "2", "--", "python", "-c", SELF_REPORT], _env(tmp_path)
    )
    assert done.returncode != 0, done.stderr  # rank 1 exits 3
    (run_dir,) = run_dirs(tmp_path)
    recorded = (run_dir / "run.toml").read_text()  # the launcher's argv, as it ran
    assert "mpiexec" in recorded and "runtime.capture" not in recorded
    for rank in (0, 1):
        report, st = _report(run_dir, rank), _status(run_dir, rank)
        # The watcher is the process the launcher started: the rank's own interpreter, forked,
        # with the same argv, and no wrapper anywhere above the rank.
        assert report["ppid"] == st["wrapper_pid"] and report["pid"] == st["pid"]
        assert report["chain"][0] == ["python", "-c", SELF_REPORT]
        assert not any("runtime.capture" in part for argv in report["chain"] for part in argv)
        assert (report["rank"], report["world"]) == (str(rank), "2")
        assert report["run_dir"] == str(run_dir) and report["trigger"] is None
        assert report["runtime_modules"] == []  # the watcher's modules are not the program's
        # A Python the rank starts is the rank's own child, not watched again.
        assert report["child"] == [str(report["pid"]), "None"]
        assert st["command"] == ["python", "-c", SELF_REPORT]
        assert st["end"] >= st["start"]
    assert (_status(run_dir, 0)["state"], _status(run_dir, 0)["exit_code"]) == ("succeeded", 0)
    assert (_status(run_dir, 1)["state"], _status(run_dir, 1)["exit_code"]) == ("failed", 3)
    assert json.loads((run_dir / "state.json").read_text())["state"] == "failed"


def _launch_one(tmp_path: Path, code: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    done = cli(["launch", "--quiet", "--ppn", "2", "--", PY, "-c", code], _env(tmp_path))
    (run_dir,) = run_dirs(tmp_path)
    return run_dir, done


def test_a_rank_killed_by_sigkill_is_recorded_so(tmp_path: Path) -> None:
    code = (
        "import os, signal, time\n"
        "if os.environ['RANK'] == '1':\n"
        "    print('last words before SIGKILL', flush=True); os.kill(os.getpid(), signal.SIGKILL)\n"
        "time.sleep(30)\n"
    )
    run_dir, done = _launch_one(tmp_path, code)
    assert done.returncode != 0
    st = _status(run_dir, 1)
    assert (st["state"], st["signal"], st["signal_name"]) == ("failed", signal.SIGKILL, "SIGKILL")
    assert _log(run_dir, 1).splitlines()[-1] == "last words before SIGKILL"


def test_a_native_crash_keeps_its_last_words(tmp_path: Path) -> None:
    code = (
        "import os\n"
        "if os.environ['RANK'] == '0':\n"
        "    os.write(2, b'last words before the abort\\n'); os.abort()\n"
    )
    run_dir, done = _launch_one(tmp_path, code)
    assert done.returncode != 0
    st = _status(run_dir, 0)
    assert (st["state"], st["signal_name"]) == ("failed", "SIGABRT")
    assert "last words before the abort" in _log(run_dir, 0)


def test_a_command_that_is_not_the_launchs_python_is_still_wrapped(tmp_path: Path) -> None:
    shell = 'tr "\\0" " " < /proc/$PPID/cmdline; echo'
    done = cli(["launch", "--quiet", "--ppn", "2", "--", "sh", "-c", shell], _env(tmp_path))
    assert done.returncode == 0, done.stderr
    (run_dir,) = run_dirs(tmp_path)
    for rank in (0, 1):
        assert "-m runtime.capture --run-dir" in _log(run_dir, rank)
        assert _status(run_dir, rank)["state"] == "succeeded"


def _in_process(run_dir: Path, code: str) -> subprocess.Popen[bytes]:
    """A rank as the launcher starts it when its own interpreter watches it."""
    env = {
        **os.environ,
        CAPTURE_IN_PROCESS_VAR: str(run_dir),
        "PYTHONPATH": os.pathsep.join([str(SITE_DIR), os.environ.get("PYTHONPATH", "")]),
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.Popen([PY, "-c", code], env=env)


def _wait_for_line(run_dir: Path, text: str) -> None:
    deadline = time.monotonic() + 60
    path = RunDir(run_dir).log(0)
    while text not in (path.read_text() if path.exists() else ""):
        assert time.monotonic() < deadline, f"no {text!r} in the rank's log"
        time.sleep(0.05)


def test_a_stop_is_forwarded_and_the_leftovers_ended(tmp_path: Path) -> None:
    marker = tmp_path / "got"
    code = (
        "import signal, subprocess, sys, time, pathlib\n"
        "helper = subprocess.Popen(['sleep', '600'], start_new_session=True)\n"
        "def on(s, f):\n"
        f"    pathlib.Path({str(marker)!r}).write_text(str(s)); sys.exit(7)\n"
        "signal.signal(signal.SIGTERM, on)\n"
        "print('ready', helper.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    watcher = _in_process(tmp_path, code)
    _wait_for_line(tmp_path, "ready")
    watcher.send_signal(signal.SIGTERM)  # as the launcher's stop reaches the process it started
    assert watcher.wait(timeout=30) == 7
    assert marker.read_text() == str(int(signal.SIGTERM))
    st = _status(tmp_path, 0)
    assert (st["exit_code"], st["signals_received"]) == (7, ["SIGTERM"])
    assert st["wrapper_pid"] == watcher.pid and st["pid"] != watcher.pid
    helper = int(_log(tmp_path, 0).split("ready ")[1].split()[0])
    assert [item.split(" (")[0] for item in st["leftovers"]] == [f"pid {helper}"]
    assert not Path(f"/proc/{helper}").exists()


def test_the_watcher_dies_of_the_programs_crash(tmp_path: Path) -> None:
    """As the wrapper does: a launcher tears the job down on a rank's signal, not on an exit."""
    code = "import ctypes, os; os.write(1, b'last words before the crash\\n'); ctypes.string_at(0)"
    assert _in_process(tmp_path, code).wait(timeout=60) == -signal.SIGSEGV
    st = _status(tmp_path, 0)
    assert (st["state"], st["signal_name"]) == ("failed", "SIGSEGV")
    assert "last words before the crash" in _log(tmp_path, 0)


def test_the_rank_hooks_are_registered_in_the_program(tmp_path: Path) -> None:
    """The raise hook records the program's uncaught exception, the stack dump is on SIGUSR1,
    and each hook registered once: the copies the watcher imported, none loaded again."""
    code = (
        "import os, sys\n"
        "with open(f'/proc/{os.getpid()}/status') as fh:\n"
        "    caught = int(next(l for l in fh if l.startswith('SigCgt:')).split()[1], 16)\n"
        "print('usr1 caught', bool(caught & (1 << 9)))\n"
        "print('hooks', sorted(m for m in sys.modules if m.startswith('_ezpz_')))\n"
        "raise ValueError('boom in the program')\n"
    )
    assert _in_process(tmp_path, code).wait(timeout=60) == 1
    text = _log(tmp_path, 0)
    assert "usr1 caught True" in text
    assert "hooks ['_ezpz_exit_hook', '_ezpz_flight', '_ezpz_raise_hook']" in text
    (raised,) = read_raised(RunDir(tmp_path).raised(0))
    assert (raised.type, raised.message) == ("ValueError", "boom in the program")
    assert (_status(tmp_path, 0)["state"], _status(tmp_path, 0)["exit_code"]) == ("failed", 1)
