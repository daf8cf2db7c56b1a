"""A finished run's directory holds only regular files and folders: every rank's Flight Recorder
FIFO (``flight/bNNNN/rank-NNNNN.fifo``) is gone once the run's end is recorded, however the rank
ended, so ``shutil.copytree``, archivers and transfer tools take the run whole.

Real runs: the mpich wheel's mpiexec, the capture wrapper, torch's gloo ranks and the recorder
thread that makes the FIFO. Each rank first waits until its FIFO is there and says so in its
log, so a run that never made one cannot pass for one that removed it.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest

from runtime import flight
from runtime.rundir import RunDir, read_state
from tests.fixtures.cli import PY, base_env, cli, kill_leftovers, run_dirs
from tests.fixtures.runs import wait_for

# Imports torch.distributed (which starts the recorder thread), waits for the thread's FIFO.
FIFO_MADE = textwrap.dedent(
    """
    import os, stat, sys, time
    import torch.distributed
    fifo = os.environ["EZPZ_FLIGHT_FIFO"]
    for _ in range(600):
        if os.path.exists(fifo) and stat.S_ISFIFO(os.lstat(fifo).st_mode):
            break
        time.sleep(0.05)
    print("fifo made" if os.path.exists(fifo) else "no fifo", fifo, flush=True)
    """
)
# Then the demo, for a few steps.
DEMO = FIFO_MADE + textwrap.dedent(
    """
    import runpy
    sys.argv = ["train", "--steps", "3"]
    runpy.run_module("runtime.examples.train", run_name="__main__")
    """
)
# Rank 1 SIGKILLs its capture wrapper, then itself: nobody at the rank's level removes its FIFO.
KILLED = FIFO_MADE + textwrap.dedent(
    """
    torch.distributed.init_process_group("gloo")
    if torch.distributed.get_rank() == 1:
        os.kill(os.getppid(), 9)
        os.kill(os.getpid(), 9)
    time.sleep(60)  # rank 0 waits until the launcher tears the job down
    """
)


def special_files(run: Path) -> list[str]:
    """Every entry under ``run`` that is neither a regular file nor a folder (not followed)."""
    found = []
    for folder, dirs, files in os.walk(run):
        for name in dirs + files:
            mode = os.lstat(os.path.join(folder, name)).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                found.append(os.path.relpath(os.path.join(folder, name), run))
    return sorted(found)


def made_its_fifo(run: Path, rank: int) -> bool:
    """Whether the rank's log says its FIFO was there (False while it has no log)."""
    log = RunDir(run).log(rank)
    return log.exists() and f"fifo made {RunDir(run).flight_request(rank)}" in log.read_text()


@pytest.mark.mpi
def test_a_finished_demo_run_holds_only_regular_files_and_folders(
    tmp_path: Path, outputs: Path, mpiexec: str
) -> None:
    proc = cli(["launch", "--ppn", "2", "--quiet", "--", PY, "-c", DEMO], base_env(outputs))
    assert proc.returncode == 0, proc.stderr
    (run,) = run_dirs(outputs)
    assert made_its_fifo(run, 0) and made_its_fifo(run, 1)
    assert special_files(run) == []
    # Every rank file lies in its block of 1,024 ranks, none in the folders themselves.
    assert sorted(p.relative_to(run).as_posix() for p in run.glob("*/b0000/rank-00001*")) == [
        "flight/b0000/rank-00001.json",
        "logs/b0000/rank-00001.log",
        "metrics/b0000/rank-00001.jsonl",
        "status/b0000/rank-00001.json",
        "telemetry/b0000/rank-00001.jsonl",
    ]
    assert list(run.glob("*/rank-*")) == []
    shutil.copytree(run, tmp_path / "copy")  # a named pipe would make it raise
    # Asking a finished rank says it has ended, at every level: no traceback.
    stacks = cli(["stacks", str(run)], base_env(outputs))
    assert "Traceback" not in stacks.stdout + stacks.stderr
    assert stacks.stdout == "ranks 0-1: no stacks: ended (succeeded)\n", stacks.stdout
    why_not = flight.ask(str(RunDir(run).flight_request(0)))
    assert why_not is not None and "the rank has ended" in why_not


@pytest.mark.mpi
def test_a_rank_killed_with_its_wrapper_leaves_no_fifo_once_the_end_is_recorded(
    outputs: Path, mpiexec: str
) -> None:
    proc = cli(["launch", "--ppn", "2", "--quiet", "--", PY, "-c", KILLED], base_env(outputs))
    assert proc.returncode != 0, proc.stdout
    (run,) = run_dirs(outputs)
    assert read_state(run).state == "failed"
    assert made_its_fifo(run, 1)  # then its wrapper died of SIGKILL: the supervisor swept it
    assert special_files(run) == []


# The run's supervisor, in a process the test then kills: its tether records the end. The
# launcher is a shell that runs one rank's wrapper, then waits, so the run outlives the wrapper.
OWNER = textwrap.dedent(
    """
    import shlex, sys, time
    from pathlib import Path
    from ezpz_tui.core.launching.launcher import Launch
    from ezpz_tui.core.launching.making import RunMaker
    from ezpz_tui.core.launching.supervisor import Supervisor
    run = RunMaker(Path(sys.argv[1])).create({})
    rank = [sys.executable, "-m", "runtime.capture", "--run-dir", str(run), "--"]
    rank += [sys.executable, "-c", sys.argv[2]]
    Supervisor().start(Launch(run, ("sh", "-c", shlex.join(rank) + "; sleep 60")))
    print(run, flush=True)
    time.sleep(60)
    """
)
# The one rank SIGKILLs its wrapper and ends; the shell then sleeps: the run is still live.
WRAPPER_KILLED = FIFO_MADE + "os.kill(os.getppid(), 9)\n"


def test_a_run_ended_by_its_tether_leaves_no_fifo(outputs: Path) -> None:
    owner = subprocess.Popen(
        [PY, "-c", OWNER, str(outputs), WRAPPER_KILLED], stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        run = Path(owner.stdout.readline().strip())
        wait_for(lambda: made_its_fifo(run, 0), 60, "the rank's FIFO")
        wait_for(lambda: RunDir(run).status(0).exists(), 30, "the rank's status")
        assert special_files(run) == ["flight/b0000/rank-00000.fifo"]  # nobody removed it
        owner.send_signal(signal.SIGKILL)  # the tether stops the run and records its end
        owner.wait()
        wait_for(lambda: not read_state(run).live, 60, "the tether's record of the end")
    finally:
        owner.kill()
        owner.wait()
        kill_leftovers(outputs)
    assert read_state(run).state == "stopped"
    assert special_files(run) == []
