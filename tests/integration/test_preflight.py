"""A relaunch's preflight, and ``ezpz-tui relaunch``: the new layout runs one step before the
healthy run is touched.

Real processes throughout: the demo's preflight ranks on torch's fake process group, parents
launched by ``ezpz-tui launch`` on two gloo ranks under mpiexec, and the CLI as typed.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ezpz_tui.core.launching.allocation import detect_allocation
from ezpz_tui.core.launching.plan import LaunchPlan, check, demo_command
from ezpz_tui.core.launching.preflight import NOT_PREFLIGHTED, PASSED, run_preflight
from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.record import read_run_toml
from tests.fixtures.cli import PY, REPO, base_env, cli, run_dirs
from tests.fixtures.runs import make_run, wait_for

pytestmark = pytest.mark.mpi

LONG = ("--steps", "100000", "--sleep", "0.05")
FINISHED = "20261126-100000-000-tp1pp1cp1"


def checked(monkeypatch: pytest.MonkeyPatch, command: tuple[str, ...], **sizes: int):
    monkeypatch.setenv("EZPZ_ACCELERATORS_PER_HOST", "cpu:2")
    return check(LaunchPlan(ppn=2, command=command, **sizes), detect_allocation())


def test_a_pipeline_of_the_demo_passes_on_both_end_stages(monkeypatch: pytest.MonkeyPatch) -> None:
    """PP 2 over 2 ranks: rank 0 holds the embedding, rank 1 the head and the loss; each runs
    the 1F1B schedule's step alone, its neighbour's sends and receives fake. It saves
    checkpoints too: runtime.checkpoint's gloo side group is made fake in a fake world."""
    command = (*demo_command(), "--checkpoint-every", "5")
    found = run_preflight(checked(monkeypatch, command, pp=2))
    assert [(r.rank, r.verdict) for r in found.ranks] == [(0, PASSED), (1, PASSED)], found
    assert found.peak_rss_bytes is not None and found.peak_rss_bytes > 50 << 20
    assert found.seconds < 60, "the demo's preflight takes seconds"
    said, memory = found.lines(5 << 20, 8 << 30)
    assert said.startswith("Preflight passed: rank 0 and rank 1 of 2 ran a step alone in ")
    assert memory.startswith("peak memory ") and "8.0 GiB available a rank here" in memory
    assert memory.endswith("the demo's estimate of its model's share: 5 MiB")


def test_a_script_without_runtime_setup_is_not_preflighted(monkeypatch: pytest.MonkeyPatch) -> None:
    found = run_preflight(checked(monkeypatch, (sys.executable, "-c", "print('training')")))
    assert found.verdict == NOT_PREFLIGHTED and not found.refuses
    assert found.lines() == ["Not preflighted: the command never called runtime.setup() (exit 0)"]


def _launch_parent(outputs: Path, log: Path, *demo: str) -> tuple[subprocess.Popen, Path]:
    """``ezpz-tui launch`` of the demo in the background, once rank 0 recorded a step."""
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [PY, "-m", "ezpz_tui", "launch", "--quiet", "--", *demo_command(), *demo, *LONG],
            env=base_env(outputs),
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    wait_for(lambda: len(run_dirs(outputs)) == 1, 60, "the parent's run directory")
    [parent] = run_dirs(outputs)
    wait_for(lambda: _steps(parent) > 0, 120, "the parent's first step")
    return proc, parent


def _steps(run: Path) -> int:
    path = run / "metrics" / "b0000" / "rank-00000.jsonl"
    return len(path.read_bytes().splitlines()) if path.is_file() else 0


@pytest.mark.timeout(300)
def test_relaunch_refuses_heads_3_under_tp_2_and_the_parent_runs_on(
    outputs: Path, tmp_path: Path
) -> None:
    proc, parent = _launch_parent(outputs, tmp_path / "parent.err", "--heads", "3")
    try:
        env = base_env(outputs)
        done = cli(["relaunch", parent.name, "--tp", "2", "--yes"], env, 180)
        assert done.returncode == 2, done.stderr
        assert "  Preflight failed on rank 0 of 2 (" in done.stderr, done.stderr
        assert "): --heads 3 must be divisible by tp=2" in done.stderr
        assert "TP 1 → 2" in done.stderr, "the question's lines are printed first"
        assert f"not relaunched: the preflight failed; {parent.name} goes on" in done.stderr
        assert run_dirs(outputs) == [parent], "no child"
        before = _steps(parent)
        wait_for(lambda: _steps(parent) > before, 60, "the parent to go on stepping")
        assert run_state(parent).live and proc.poll() is None

        unasked = cli(["relaunch", parent.name, "--tp", "2", "--no-preflight"], env, 60)
        assert unasked.returncode == 2, unasked.stderr
        assert "asking needs a terminal (stdin is not one); --yes answers yes" in unasked.stderr
        assert run_state(parent).live and run_dirs(outputs) == [parent]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(90)


@pytest.mark.timeout(400)
def test_relaunch_preflights_stops_the_parent_and_follows_the_child(
    outputs: Path, tmp_path: Path
) -> None:
    proc, parent = _launch_parent(outputs, tmp_path / "parent.err")
    try:
        child_command = ["--", *demo_command(), "--steps", "4"]
        args = ["relaunch", parent.name[:15], "--tp", "2", "--fresh", "--yes", *child_command]
        done = cli(args, base_env(outputs), 300)
        assert done.returncode == 0, done.stderr
        assert "  Preflight passed: rank 0 of 2 ran a step alone in " in done.stderr
        assert "  peak memory " in done.stderr and "the demo's estimate" in done.stderr
        assert "The new run starts fresh (step 0)." in done.stderr
        assert proc.wait(60) == 128 + signal.SIGTERM, "its supervisor was asked to stop it"
        assert run_state(parent).state == "stopped"
        [child] = [d for d in run_dirs(outputs) if d != parent]
        record = read_run_toml(child)
        assert record["parent"] == parent.name and record["plan"]["tp"] == 2
        assert "step 3/4" in done.stdout, "the child's log is followed as launch follows"
        assert f"run succeeded ({child.name})" in done.stderr
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(90)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["relaunch", "nonesuch", "--tp", "2"], "ezpz-tui: no run 'nonesuch' in "),
        (
            ["relaunch", FINISHED, "--tp", "3"],
            "not relaunched: World size 1 is not divisible by tp*pp*cp = 3.",
        ),
        (["relaunch", FINISHED, "--tp", "0"], "argument --tp: 0 must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_nothing_starts(
    args: list[str], said: str, outputs: Path
) -> None:
    make_run(
        outputs,
        run_id=FINISHED,
        state="succeeded",
        exit_code=0,
        sizes={"tp": 1},
        ranks=2,
        steps=3,
        created=1_795_000_000.0,
    )
    done = cli(args, base_env(outputs), 60)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert said in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert run_dirs(outputs) == [outputs / FINISHED]
