"""``ezpz-tui stacks`` on real hung jobs: ranks under the real mpiexec, real SIGUSR1, real dumps.

Every test ends its run (stop through the CLI, or SIGINT to mpiexec, then SIGKILL to anything
of the run still there), so nothing it starts outlives it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ezpz_tui.core.watching.stacks import catches, request_stacks
from runtime.rundir import RankState, RankStatus, RunDir, write_status
from tests.fixtures.cli import REPO, base_env, cli, kill_leftovers, run_dirs
from tests.procs import processes_of

PY = sys.executable
CAPTURE = [PY, "-m", "runtime.capture", "--run-dir"]

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")

# Rank 0 waits in a gloo barrier that rank 1 never reaches: a realistic hang.
HANG = textwrap.dedent(
    """
    import os, sys, time
    import torch.distributed as dist
    import runtime

    def wait_for_peer():
        open(os.path.join(sys.argv[1], "ready-0"), "w").close()
        dist.barrier()

    def stuck_forever():
        open(os.path.join(sys.argv[1], "ready-1"), "w").close()
        while True:
            time.sleep(0.5)

    info = runtime.setup()
    wait_for_peer() if info.rank == 0 else stuck_forever()
    """
)
# A plain script (no runtime.setup()): both ranks wait in the same place.
PLAIN = textwrap.dedent(
    """
    import os, sys, time

    def sleeping_here():
        open(os.path.join(sys.argv[1], "ready-" + os.environ["RANK"]), "w").close()
        while True:
            time.sleep(0.5)

    sleeping_here()
    """
)


def wait_for(predicate: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


def line_in(script: str, text: str) -> int:
    return next(i for i, line in enumerate(script.splitlines(), 1) if text in line)


@pytest.mark.mpi
def test_hung_gloo_job_through_launch(tmp_path: Path, mpiexec: str) -> None:
    outputs, marks = tmp_path / "outputs", tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    env = base_env(outputs)
    launch = subprocess.Popen(
        [
            PY,
            "-m",
            "ezpz_tui",
            "launch",
            "--ppn",
            "2",
            "--quiet",
            "--",
            PY,
            str(script),
            str(marks),
        ],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: (marks / "ready-0").exists() and (marks / "ready-1").exists())
        (run,) = run_dirs(outputs)
        time.sleep(0.5)  # rank 0 from its marker into the barrier
        proc = cli(["stacks", run.name, "--json"], env)
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["skipped"] == []
        groups = {tuple(g["ranks"]): g for g in data["groups"]}
        assert set(groups) == {(0,), (1,)}
        waiting = [f["function"] for f in groups[(0,)]["frames"]]
        assert waiting[0] == "barrier" and "wait_for_peer" in waiting
        stuck = groups[(1,)]["frames"]
        line = line_in(HANG, "time.sleep(0.5)")
        assert (stuck[0]["function"], stuck[0]["line"]) == ("stuck_forever", line)
        assert groups[(1,)]["headline"] == f"rank 1: stuck_forever at hang.py:{line}"
        text = cli(["stacks", str(run)], env)
        assert text.returncode == 0
        assert text.stdout.splitlines()[0].startswith("rank 0: barrier at distributed_c10d.py:")
        assert f"rank 1: stuck_forever at hang.py:{line}" in text.stdout
        assert launch.poll() is None  # nobody was ended by the requests
    finally:
        launch.send_signal(signal.SIGTERM)  # the CLI stops its run cleanly
        with contextlib.suppress(subprocess.TimeoutExpired):
            launch.wait(60)
        kill_leftovers(outputs)
        if launch.poll() is None:
            launch.kill()
            launch.wait()
    said = launch.stderr.read().decode()[-2000:] if launch.stderr else ""
    assert launch.returncode == 128 + signal.SIGTERM, said
    assert all(processes_of(r) == [] for r in run_dirs(outputs))


@pytest.mark.mpi
def test_plain_script_ranks_fold_into_one_group(tmp_path: Path, mpiexec: str) -> None:
    marks, run = tmp_path / "marks", tmp_path / "run"
    marks.mkdir()
    script = tmp_path / "plain.py"
    script.write_text(PLAIN)
    job = subprocess.Popen(
        [mpiexec, "-n", "2", *CAPTURE, str(run), "--", PY, str(script), str(marks)],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: (marks / "ready-0").exists() and (marks / "ready-1").exists())
        proc = cli(["stacks", str(run)], base_env(tmp_path / "outputs"))
        assert proc.returncode == 0, proc.stderr
        line = line_in(PLAIN, "time.sleep(0.5)")
        lines = proc.stdout.splitlines()
        assert lines[0] == f"ranks 0-1: sleeping_here at plain.py:{line}"
        assert lines[1] == f"    sleeping_here at {script}:{line}"
        called = PLAIN.splitlines().index("sleeping_here()") + 1
        assert lines[2] == f"    <module> at {script}:{called}"
        assert len(lines) == 3 and job.poll() is None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGINT)  # Hydra forwards it to the ranks
        with contextlib.suppress(subprocess.TimeoutExpired):
            job.wait(30)
        for pid in processes_of(run):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if job.poll() is None:
            job.kill()
            job.wait()
    assert processes_of(run) == []


def test_nothing_to_ask_is_exit_2_with_one_line(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.make_folders()
    write_status(run.path, RankStatus(0, host="n1", pid=1, state=RankState.SUCCEEDED))
    proc = cli(["stacks", str(run.path)], base_env(tmp_path / "outputs"))
    assert proc.returncode == 2 and proc.stdout == "rank 0: no stacks: ended (succeeded)\n"
    assert proc.stderr == "ezpz-tui: no stacks from run: rank 0: ended (succeeded)\n"
    empty = cli(["stacks", str(tmp_path)], base_env(tmp_path / "outputs"))
    assert empty.returncode == 2 and "holds no run" in empty.stderr


def _python(code: str, env: dict[str, str], stderr: Path) -> subprocess.Popen[bytes]:
    with open(stderr, "ab") as err:
        return subprocess.Popen([sys.executable, "-c", code], env=env, stderr=err)


def _wait_caught(pid: int, expected: bool) -> None:
    deadline = time.monotonic() + 30
    while catches(pid, signal.SIGUSR1) != expected:
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
def test_request_signals_only_what_can_take_it(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    run.make_folders()
    env = {**os.environ, "EZPZ_RUN_DIR": str(run.path)}
    env.pop("PYTHONPATH", None)
    hang = (
        "import faulthandler, signal, time\n"
        "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
        "def hung_here():\n"
        "    time.sleep(60)\n"
        "hung_here()\n"
    )
    catcher = _python(hang, env, run.log(0))
    plain = _python("import time; time.sleep(60)", env, run.log(1))  # SIGUSR1 would end it
    stranger = _python(hang, {**env, "EZPZ_RUN_DIR": "/elsewhere"}, tmp_path / "stranger.log")
    procs = [catcher, plain, stranger]
    try:
        _wait_caught(catcher.pid, True)
        _wait_caught(stranger.pid, True)
        run.log(0).write_bytes(b"earlier output\n")  # before the request: never parsed
        statuses = [
            RankStatus(0, host=os.uname().nodename, pid=catcher.pid),
            RankStatus(1, host=os.uname().nodename, pid=plain.pid),
            RankStatus(2, host=os.uname().nodename, pid=stranger.pid),
            RankStatus(3, host="some-other-node", pid=catcher.pid),
            RankStatus(4, host=os.uname().nodename, pid=catcher.pid, state=RankState.FAILED),
        ]
        for status in statuses:
            write_status(run.path, status)
        report = request_stacks(run.path, wait_s=10)
        assert [r.rank for r in report.collected] == [0]
        assert report.collected[0].main.frames[0].function == "hung_here"
        reasons = {s.rank: s.reason for s in report.skipped}
        assert set(reasons) == {1, 2, 3, 4}
        assert "does not catch SIGUSR1" in reasons[1]
        assert "not this run's" in reasons[2]
        assert reasons[3].startswith("on host some-other-node")
        assert reasons[4] == "ended (failed)"
        time.sleep(0.2)
        assert all(p.poll() is None for p in procs)  # nobody was ended by the request
        assert "most recent call first" not in (tmp_path / "stranger.log").read_text()
    finally:
        for p in procs:
            p.kill()
            p.wait()
