"""The relaunch question's content: every fact that changes, and the argv as a diff in which
the values each run picks for itself (its directory, its port) do not count as changes."""

from __future__ import annotations

from pathlib import Path

from ezpz_tui.core.launching.change import change_lines, mask_argv, relaunch_change
from ezpz_tui.core.launching.launcher import LaunchConfig, build_launch
from ezpz_tui.core.launching.making import RunMaker, record_launch
from ezpz_tui.core.launching.plan import LaunchPlan, check
from ezpz_tui.core.runs.record import read_run_toml
from tests.fixtures.allocations import aurora

CONFIG = LaunchConfig(python="/venv/bin/python", which=lambda name: f"/opt/pals/bin/{name}")


def recorded_run(outputs: Path, plan: LaunchPlan) -> Path:
    """A run directory as a launch leaves it: run.toml with the plan and the launcher argv."""
    checked = check(plan, aurora(2))
    run_dir = RunMaker(outputs).create(checked.plan.to_dict(), checked.sizes, meta=checked.meta)
    record_launch(build_launch(checked, run_dir, CONFIG))
    return run_dir


def test_tp_one_to_two_changes_tp_dp_and_one_argv_value(tmp_path: Path) -> None:
    old = LaunchPlan(ppn=12, command=("python", "train.py"))
    run_dir = recorded_run(tmp_path, old)
    new = check(old.with_changes(tp=2), aurora(2))
    argv = build_launch(new, tmp_path / "<run-id>", CONFIG).argv
    change = relaunch_change(read_run_toml(run_dir), run_dir, new, argv)
    assert change.run_id == run_dir.name
    assert [(r.what, r.old, r.new) for r in change.changed] == [
        ("TP", "1", "2"),
        ("DP", "24", "12"),
    ]
    assert [(h.before, h.old, h.new) for h in change.hunks] == [
        (("--env",), ("EZPZ_TP=1",), ("EZPZ_TP=2",))
    ]
    lines = change_lines(change)
    assert lines[:2] == ["TP 1 → 2", "DP 24 → 12"]
    assert "nodes 2" in lines[2] and "ranks 24" in lines[2]
    assert lines[3:] == ["argv: --env EZPZ_TP=1 → EZPZ_TP=2"]


def test_fewer_nodes_and_another_command_show_in_rows_and_argv(tmp_path: Path) -> None:
    old = LaunchPlan(ppn=12, command=("python", "train.py"))
    run_dir = recorded_run(tmp_path, old)
    new = check(old.with_changes(nodes=1, command=("python", "other.py")), aurora(2))
    argv = build_launch(new, tmp_path / "<run-id>", CONFIG).argv
    change = relaunch_change(read_run_toml(run_dir), run_dir, new, argv)
    changed = {r.what: (r.old, r.new) for r in change.changed}
    assert changed["nodes"] == ("2", "1")
    assert changed["ranks"] == ("24", "12")
    assert changed["command"] == ("python train.py", "python other.py")
    flat = [item for h in change.hunks for item in (*h.old, *h.new)]
    assert "train.py" in flat and "other.py" in flat
    assert any("--np=24" in h.old and "--np=12" in h.new for h in change.hunks)


def test_the_same_plan_again_says_so(tmp_path: Path) -> None:
    plan = LaunchPlan(ppn=12, command=("python", "train.py"))
    run_dir = recorded_run(tmp_path, plan)
    again = check(plan, aurora(2))
    argv = build_launch(again, tmp_path / "<run-id>", CONFIG).argv
    change = relaunch_change(read_run_toml(run_dir), run_dir, again, argv)
    assert change.changed == () and change.hunks == ()
    assert change_lines(change)[0] == "Nothing in the plan changes: the same launch again."


def test_a_record_without_a_launch_still_compares() -> None:
    new = check(LaunchPlan(ppn=12, tp=2), aurora(2))
    change = relaunch_change({"sizes": {"tp": 1}}, Path("/o/r1"), new, ["mpiexec", "-n", "24"])
    rows = {r.what: (r.old, r.new) for r in change.rows}
    assert rows["TP"] == ("1", "2") and rows["nodes"] == ("?", "2")
    assert [(h.old, h.new) for h in change.hunks] == [((), ("mpiexec", "-n", "24"))]


def test_masking_hides_the_run_directory_and_every_spelling_of_the_port() -> None:
    argv = [
        "mpiexec", "-genv", "MASTER_PORT", "29543", "--env", "MASTER_PORT=29544",
        "--rdzv-endpoint", "x1:29545", "--rdzv-id", "r1", "--run-dir", "/o/r1",
        "--export=ALL,MASTER_PORT=1",
    ]  # fmt: skip
    assert mask_argv(argv, Path("/o/r1")) == [
        "mpiexec", "-genv", "MASTER_PORT", "<port>", "--env", "MASTER_PORT=<port>",
        "--rdzv-endpoint", "x1:<port>", "--rdzv-id", "<run-dir>", "--run-dir", "<run-dir>",
        "--export=ALL,MASTER_PORT=<port>",
    ]  # fmt: skip
