"""The job's walltime is about to end: the supervisor asks the ranks to checkpoint, and they do.

A real 2-rank demo (mpiexec, gloo) launched through the real Session and Supervisor, in an
allocation that says 120 s of walltime are left (what the probe reads from a Slurm job's
``SLURM_JOB_END_TIME`` or PBS's qstat; the scheduler itself cannot run here), with
``[checkpoint] before_walltime`` at 300 s. The demo saves only every 100,000 steps, so the
checkpoint on disk is the one the request made: every rank saves at the same step (the request
is looked for at every step), written and marked complete before training goes on.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import pytest

from ezpz_tui.core.launch_result import Started
from ezpz_tui.core.launching.plan import LaunchPlan
from ezpz_tui.core.launching.supervisor import Supervisor
from ezpz_tui.core.session import Session
from runtime.checkpoint_dirs import REQUEST, newest, request_path
from runtime.rundir import RunDir
from tests.pilots import LOCAL

pytestmark = pytest.mark.mpi

DEMO = ("-m", "runtime.examples.train", "--steps", "100000", "--sleep", "0.02")


@pytest.mark.timeout(180)
def test_the_ranks_checkpoint_when_the_walltime_is_about_to_end(tmp_path: Path) -> None:
    alloc = dataclasses.replace(LOCAL, walltime_left_s=120.0, walltime_checked_at=time.time())
    session = Session(alloc, tmp_path / "outputs", Supervisor(before_walltime_s=300.0))
    plan = LaunchPlan(ppn=2, command=(sys.executable, *DEMO, "--checkpoint-every", "100000"))
    result = session.launch(plan)
    assert isinstance(result, Started), result
    handle = result.handle
    run = handle.run_dir
    try:
        deadline = time.monotonic() + 120
        while newest(run) is None and time.monotonic() < deadline and handle.wait(0.2) is None:
            pass
        found = newest(run)
        assert found is not None, (RunDir(run).launcher_log).read_text()[-2000:]
        log = RunDir(run).launcher_log.read_text()
        assert "s of walltime left: asked the ranks to checkpoint" in log
        deadline = time.monotonic() + 30
        done = run / f"{REQUEST}.done"
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert done.exists() and not request_path(run).exists()
        assert 0 < json.loads(done.read_text())["walltime_left_s"] <= 120
    finally:
        handle.stop((1.0, 1.0))
    saves = [
        json.loads(line)["metrics"]
        for line in (run / "metrics" / "b0000" / "rank-00000.jsonl").read_text().splitlines()
    ]
    asked = [m for m in saves if "ckpt_requested" in m]
    assert len(asked) == 1 and asked[0]["ckpt_step"] == found.step
