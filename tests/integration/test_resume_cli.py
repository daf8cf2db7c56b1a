"""``ezpz-tui launch --resume-from RUN``: the ranks continue from RUN's newest checkpoint.

Real launches of the demo on two gloo ranks through the CLI: the first saves checkpoints, the
second, with TP 2, names the first by its id and continues from its newest complete one, and
records it (the run's parent, ``EZPZ_RESUME_FROM`` in its plan). Bad input is one line and
exit status 2, before anything starts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from ezpz_tui.core.runs.record import read_run_toml
from tests.fixtures.cli import base_env, cli, run_dirs

pytestmark = pytest.mark.mpi

# The same global batch on any layout, so the resumed run trains on what the first would have.
DEMO = ["-m", "runtime.examples.train", "--steps", "12", "--global-batch", "8", "--seq-len", "16"]


@pytest.mark.timeout(240)
def test_resume_from_a_run_by_its_id_in_another_layout(outputs: Path) -> None:
    env = base_env(outputs)
    first = cli(["launch", "--quiet", "--", sys.executable, *DEMO, "--checkpoint-every", "5"], env)
    assert first.returncode == 0, first.stderr
    [parent] = run_dirs(outputs)
    assert sorted(p.name for p in (parent / "checkpoints").iterdir()) == ["step-10", "step-5"]
    resume = ["--tp", "2", "--resume-from", parent.name[:15]]
    second = cli(["launch", "--quiet", *resume, "--", sys.executable, *DEMO], env)
    assert second.returncode == 0, second.stderr
    checkpoint = parent / "checkpoints" / "step-10"
    assert f"ezpz-tui: resumes at step 10 from {checkpoint}" in second.stderr
    [child] = [d for d in run_dirs(outputs) if d != parent]
    record = read_run_toml(child)
    assert record["parent"] == parent.name
    assert record["plan"]["env"]["EZPZ_RESUME_FROM"] == str(checkpoint)
    lines = (child / "metrics" / "b0000" / "rank-00000.jsonl").read_text().splitlines()
    assert [json.loads(line)["step"] for line in lines] == [10, 11]


@pytest.mark.timeout(240)
def test_a_checkpoint_cut_short_is_named_by_why(outputs: Path) -> None:
    """Step 10's rank-0 data file lost its second half: the resumed run fails, and ``why``
    quotes the failing rank's log, which names the file, step 5 and the command."""
    env = base_env(outputs)
    first = cli(["launch", "--quiet", "--", sys.executable, *DEMO, "--checkpoint-every", "5"], env)
    assert first.returncode == 0, first.stderr
    [parent] = run_dirs(outputs)
    data = parent / "checkpoints" / "step-10" / "__0_0.distcp"
    with open(data, "r+b") as fh:
        fh.truncate(data.stat().st_size // 2)
    resume = ["launch", "--quiet", "--resume-from", parent.name]
    second = cli([*resume, "--", sys.executable, *DEMO], env)
    assert second.returncode != 0, second.stderr
    [child] = [d for d in run_dirs(outputs) if d != parent]
    why = cli(["why", child.name], env)
    before = parent / "checkpoints" / "step-5"
    said = next(line for line in why.stdout.splitlines() if f"{data} is cut short (" in line)
    assert f"the newest earlier complete checkpoint is step 5, {before}" in said
    command = " ".join([sys.executable, *DEMO])
    assert f"`ezpz-tui launch --resume-from {before} -- {command}`" in said
    advice = "The checkpoint the run resumed from cannot be read; the newest earlier complete"
    assert advice in why.stdout, "the advice is the earlier checkpoint, not a fix to the program"
    assert "Fix the exception in the program" not in why.stdout


@pytest.mark.parametrize("case", ["no checkpoint", "no such run"])
def test_nothing_to_resume_from_is_refused(case: str, outputs: Path, tmp_path: Path) -> None:
    run = tmp_path / "empty-run"
    run.mkdir()
    target = str(run) if case == "no checkpoint" else "nonesuch"
    done = cli(["launch", "--resume-from", target], base_env(outputs))
    assert done.returncode == 2
    want = {
        "no checkpoint": f"ezpz-tui: {run}: the run has no checkpoint in {run / 'checkpoints'}",
        "no such run": f"ezpz-tui: --resume-from nonesuch: no run 'nonesuch' in {outputs}",
    }[case]
    assert done.stderr.strip() == want
    assert run_dirs(outputs) == []
