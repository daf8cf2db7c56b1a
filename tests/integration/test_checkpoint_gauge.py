"""The checkpoint gauge of real runs: the newest complete checkpoint's step and age, what a crash
would redo, the expected restore (measured read rate, or a resumed run's own load), and its two
warnings, as the gauge reads them and as ``ezpz-tui top`` prints them (text and ``--json``).

Real launches of the demo through ``ezpz-tui launch`` on 2 gloo ranks (tests/fixtures/
checkpointed.py): one saving every 3 of 8 steps, one resumed from it that saves nothing of its
own, one saving nothing. The slow save is the demo under mpiexec on storage that holds its first
checkpoint write back (tests/ranks/slow_checkpoint_write.py) until the next save has waited
for it for a second.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from ezpz_tui.config import ENV_CONFIG_DIR
from ezpz_tui.core.watching.checkpoint_gauge import (
    LAST_LOAD,
    READ_RATE,
    gauge,
    read_on_disk,
    short_duration,
)
from runtime.rundir import read_state
from tests.fixtures.checkpointed import STEPS, launch_demo, mark, records
from tests.fixtures.cli import base_env, cli
from tests.integration.test_checkpoint_resume import (
    TINY,
    held_back,
    recorded_steps,
    wait_until,
)

pytestmark = pytest.mark.mpi

RESUMED_STEPS = 10
HELD_S = 1.0  # how long the next save waits for the held one, at least


@dataclass(frozen=True)
class Runs:
    outputs: Path
    saving: Path  # every 3 steps: step-3 and step-6 kept
    resumed: Path  # from saving's step 6 to step 10, saving nothing
    plain: Path  # no checkpoints


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    outputs = tmp_path_factory.mktemp("gauge") / "outputs"
    saving = launch_demo(outputs, "--checkpoint-every", "3")
    resume = ("--resume-from", saving.name)
    resumed = launch_demo(outputs, "--steps", str(RESUMED_STEPS), launch=resume)
    plain = launch_demo(outputs, "--steps", "3")
    return Runs(outputs, saving, resumed, plain)


def median_dt(run: Path) -> float:
    return statistics.median(r["metrics"]["dt"] for r in records(run))


def ended_at(run: Path) -> float:
    end = read_state(run).end
    assert end is not None
    return end


def test_the_gauge_of_a_run_that_saved(runs: Runs) -> None:
    run, step_s = runs.saving, median_dt(runs.saving)
    disk = read_on_disk(run)
    assert [m.step for m in disk.marks] == [3, 6] and disk.load_s is None
    newest = mark(run, 6)
    found = gauge(disk, step=records(run)[-1]["step"], step_s=step_s, as_of=ended_at(run))
    assert (found.step, found.redo_steps, found.resumed) == (6, STEPS - 6, False)
    assert found.redo_s == pytest.approx((STEPS - 6) * step_s)
    assert found.age_s == pytest.approx(ended_at(run) - newest["saved_at"])
    assert found.size == newest["bytes"] > 0
    assert found.restore_from == READ_RATE and found.read_mb_s and found.read_mb_s > 0
    assert found.restore_s == pytest.approx(newest["bytes"] / 1e6 / found.read_mb_s)
    assert found.warnings == (), "a save a few hundredths long, every 3 steps of 0.4 s or more"
    assert found.words() == (
        f"ckpt 6 ({short_duration(found.age_s)} ago) · redo 2 steps "
        f"{short_duration(found.redo_s)} · restore {short_duration(found.restore_s)} "
        "(size / read rate)"
    )


def test_no_checkpoint_within_max_age_of_training_warns(runs: Runs) -> None:
    run, step_s = runs.saving, median_dt(runs.saving)
    last = records(run)[-1]["step"]
    found = gauge(read_on_disk(run), step=last, step_s=step_s, as_of=ended_at(run), max_age_s=0.5)
    redo_s = (STEPS - 6) * step_s  # two steps of 0.4 s or more since step 6's checkpoint
    assert found.warnings == (
        f"no checkpoint in the last {short_duration(redo_s)} of training (max_age 0.5s)",
    )
    kept = gauge(read_on_disk(run), step=last, step_s=step_s, as_of=ended_at(run), max_age_s=0)
    assert kept.warnings == (), "max_age 0 never warns"


def top(runs: Runs, run: Path, tmp_path: Path, *flags: str) -> str:
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    (config / "config.toml").write_text("[checkpoint]\nmax_age = 0.5\n")
    env = {**base_env(runs.outputs), ENV_CONFIG_DIR: str(config)}
    done = cli(["top", run.name, *flags], env)
    assert done.returncode == 0 and not done.stderr, done.stderr
    return done.stdout


def test_top_shows_the_gauge_with_the_configured_max_age(runs: Runs, tmp_path: Path) -> None:
    said = json.loads(top(runs, runs.saving, tmp_path, "--json"))["checkpoint"]
    newest = mark(runs.saving, 6)
    assert said["step"] == 6 and said["path"] == str(runs.saving / "checkpoints" / "step-6")
    assert (said["redo_steps"], said["max_age_s"], said["resumed_from"]) == (2, 0.5, False)
    assert said["bytes"] == newest["bytes"] and said["restore_from"] == "size / read rate"
    assert said["age_s"] == pytest.approx(ended_at(runs.saving) - newest["saved_at"], abs=1e-3)
    assert said["redo_s"] > 0.8 and said["restore_s"] > 0 and said["read_mb_s"] > 0
    [warning] = said["warnings"]
    assert warning.startswith("no checkpoint in the last ")
    assert warning.endswith(" of training (max_age 0.5s)")
    text = top(runs, runs.saving, tmp_path).splitlines()
    gauge_line = next(line for line in text if line.startswith("checkpoint: "))
    assert gauge_line.startswith("checkpoint: step 6, ")
    assert "; a crash now would redo 2 steps (" in gauge_line
    assert " MB at a measured " in gauge_line
    assert f"checkpoint warning: {warning}" in text


def test_a_resumed_run_restores_in_its_last_load(runs: Runs, tmp_path: Path) -> None:
    """Until it saves, a resumed run is covered by the checkpoint it resumed from, and its own
    restore of it is what the next restore is expected to take."""
    run = runs.resumed
    [first, *_] = records(run)
    assert first["step"] == 6
    load_s = first["metrics"]["ckpt_load_s"]
    found = gauge(
        read_on_disk(run), step=records(run)[-1]["step"], step_s=median_dt(run), as_of=ended_at(run)
    )
    assert (found.step, found.resumed, found.redo_steps) == (6, True, RESUMED_STEPS - 6)
    assert found.path == runs.saving / "checkpoints" / "step-6"
    assert (found.restore_s, found.restore_from) == (load_s, LAST_LOAD)
    said = json.loads(top(runs, run, tmp_path, "--json"))["checkpoint"]
    assert said["restore_from"] == "last load" and said["restore_s"] == round(load_s, 3)
    text = top(runs, run, tmp_path)
    assert "checkpoint: step 6 (resumed from), " in text
    assert f"; restore {short_duration(load_s)} (last load)" in text


def test_a_run_without_checkpoints_says_so(runs: Runs, tmp_path: Path) -> None:
    run, step_s = runs.plain, median_dt(runs.plain)
    found = gauge(read_on_disk(run), step=2, step_s=step_s, as_of=ended_at(run))
    assert (found.step, found.redo_steps, found.restore_s) == (None, 3, None)
    assert found.words() == f"no checkpoints · redo 3 steps {short_duration(3 * step_s)}"
    said = json.loads(top(runs, run, tmp_path, "--json"))["checkpoint"]
    assert (said["step"], said["redo_steps"]) == (None, 3)
    assert said["warnings"] == [
        f"no checkpoint in the last {short_duration(said['redo_s'])} of training (max_age 0.5s)"
    ]
    assert "checkpoint: no checkpoints; a crash now would redo all 3 steps (" in top(
        runs, run, tmp_path
    )


@pytest.mark.timeout(150)
def test_a_save_slower_than_its_interval_warns(mpiexec: str, tmp_path: Path) -> None:
    """Saves every 2 steps; storage holds the first save's files until the save of step 4 has
    waited a second for it: the gauge names step 2's save, whose write took longer than the
    training between the two requests."""
    gate, run = tmp_path / "gate", tmp_path / "run"
    gate.mkdir()
    args = [*TINY[2:], "--steps", "4", "--checkpoint-every", "2"]

    def hold(proc: subprocess.Popen) -> None:
        # Step index 2 is recorded before the save of step 4 waits for step 2's.
        if wait_until(lambda: 2 in recorded_steps(run), proc, 90):
            time.sleep(HELD_S)

    rc, output = held_back(mpiexec, run, args, gate, hold)
    assert rc == 0, output[-3000:]
    held, waited = mark(run, 2), mark(run, 4)
    assert held["write_s"] >= HELD_S and waited["waited_s"] >= HELD_S / 2
    interval = waited["asked_at"] - held["asked_at"] - held["waited_s"]
    assert 0 < interval < held["write_s"]
    steps = records(run)
    found = gauge(read_on_disk(run), step=steps[-1]["step"], step_s=None, as_of=time.time())
    assert found.warnings == (
        f"the save of step 2 took {short_duration(held['write_s'])} to write, longer than its "
        f"{short_duration(interval)} interval: the next save waits for it",
    )
