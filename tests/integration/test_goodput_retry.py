"""The goodput ledger of a real retry: the demo on two gloo ranks under the mpich wheel's
mpiexec, its last rank killed (SIGKILL) after the checkpoint of step 5, ``launch --retries 1``
relaunching it without the host that died, from that checkpoint.

The node fault is the failover tests' stand-in (``tests/fixtures/stand_ins.py``): in a
simulated two-host Aurora PBS job, ``mpiexec`` runs the ranks under Hydra on this machine and,
when a rank failed, prints PALS's line for the hostfile's last node dying. The stand-in hosts
are this machine, so the ranks meet at 127.0.0.1. Everything else is real: the demo, its
checkpoint, the kill, the supervisor, the retry, the resume, and the ledger read from what
they left.
"""

from __future__ import annotations

import json
import os
import sys
from itertools import pairwise
from pathlib import Path

import pytest

from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.core.watching.goodput import allocation_ledger, run_ledger
from runtime.rundir import State, read_state
from tests.fixtures.cli import base_env, cli, kill_leftovers, run_dirs
from tests.fixtures.stand_ins import AURORA, pass_through

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(400)]

JOB = "4242.aurora-pbs-0001.hostmgmt.cm.aurora.alcf.anl.gov"
# The demo on each rank; the last rank of the first run kills itself once the checkpoint of
# step 5 is complete and it has recorded step 6 (the next save, at step 10, is some way off).
KILLED_AFTER_SAVE = """
import json, os, sys, threading, time
from pathlib import Path
os.environ["MASTER_ADDR"] = "127.0.0.1"  # the stand-in hosts are this machine
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
run = Path(os.environ["EZPZ_RUN_DIR"])

def recorded():
    try:
        lines = (run / "metrics" / "b0000" / f"rank-{rank:05d}.jsonl").read_text().splitlines()
    except OSError:
        return -1
    steps = [-1]
    for line in lines:
        try:
            steps.append(json.loads(line)["step"])
        except ValueError:  # a line still being written
            pass
    return max(steps)

def kill():
    while not ((run / "checkpoints" / "step-5" / "COMPLETE").is_file() and recorded() >= 6):
        time.sleep(0.05)
    print("killed after the checkpoint of step 5", flush=True)
    os.kill(os.getpid(), 9)

if rank == world - 1 and "EZPZ_RESUME_FROM" not in os.environ:
    threading.Thread(target=kill, daemon=True).start()
from runtime.examples.train import main
sys.exit(main(sys.argv[1:]))
"""
DEMO = ["--steps", "14", "--checkpoint-every", "5", "--sleep", "0.3", "--global-batch", "8"]


def aurora_job(tmp_path: Path, mpiexec: str) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pass_through(bin_dir, mpiexec, node_dies=True)
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("".join(f"{h}\n" for h in AURORA))
    env = base_env(tmp_path / "outputs")
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PBS_JOBID=JOB,
        PBS_NODEFILE=str(nodefile),
        PBS_JOBNAME="STDIN",
        PBS_ENVIRONMENT="PBS_INTERACTIVE",
    )
    return env


def steps_of(run: Path) -> list[int]:
    """Every step any rank of ``run`` recorded."""
    return [
        json.loads(line)["step"]
        for path in sorted((run / "metrics").glob("b0000/rank-*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def test_a_retry_after_a_rank_killed_past_a_checkpoint(tmp_path: Path, mpiexec: str) -> None:
    env = aurora_job(tmp_path, mpiexec)
    outputs = tmp_path / "outputs"
    args = ["launch", "--retries", "1", "--ppn", "1", "--quiet", "--"]
    try:
        proc = cli([*args, sys.executable, "-c", KILLED_AFTER_SAVE, *DEMO], env, 360)
    finally:
        kill_leftovers(outputs)
    parent, child = run_dirs(outputs)
    assert f"retry 1 of 1 without {AURORA[1]}" in proc.stderr, proc.stderr
    assert read_state(parent).state == State.FAILED
    assert read_state(child).state == State.SUCCEEDED, proc.stderr
    assert read_run_toml(child)["parent"] == parent.name
    # The child begins at the parent's newest complete checkpoint (step 5, or step 10 on a
    # machine so loaded that the kill came after it) and redoes every step since it that any
    # rank of its parent had recorded.
    saved = min(steps_of(child))
    resumed = read_run_toml(child)["plan"]["env"]["EZPZ_RESUME_FROM"]
    assert saved in (5, 10) and resumed == str(parent / "checkpoints" / f"step-{saved}")
    ran = max(steps_of(parent))
    assert ran >= saved
    ledger = run_ledger(child)
    assert ledger.redone_steps == ran - saved + 1
    assert ledger.redone_span == (saved, ran)

    said = json.loads(cli(["goodput", child.name, "--json"], env).stdout)
    assert set(said) == {"wall_s", "goodput", "segments"}
    segments = said["segments"]
    assert segments["redone_s"] > 0 and segments["restart_s"] > 0 and segments["productive_s"] > 0
    assert sum(segments.values()) == pytest.approx(said["wall_s"], rel=0.01)
    assert said["goodput"] == pytest.approx(segments["productive_s"] / said["wall_s"], abs=1e-3)

    # The job: restart spans the two runs, from before the parent's end to after the child's
    # launch, without a gap; the segments add up to the job's wall time.
    job = json.loads(cli(["goodput", "4242", "--json"], env).stdout)
    assert (job["job"], job["runs"]) == (JOB, [parent.name, child.name])
    first, last = read_state(parent), read_state(child)
    assert first.created is not None and first.end is not None and last.end is not None
    assert job["wall_s"] == pytest.approx(last.end - first.created, abs=0.01)
    assert sum(job["segments"].values()) == pytest.approx(job["wall_s"], rel=0.01)
    restart = [p for p in allocation_ledger([parent, child]).pieces if p.segment == "restart"]
    assert all(a.end == pytest.approx(b.start) for a, b in pairwise(restart))
    assert last.start is not None and restart[0].start < first.end < last.start < restart[-1].end
    spanned = restart[-1].end - restart[0].start
    assert job["segments"]["restart_s"] == pytest.approx(spanned, abs=1e-3)
