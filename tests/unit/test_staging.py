"""What ``--stage`` adds to a launch, exactly: one staging process per node in each launcher's
words, the ranks' interpreter swapped for the copy's, the copy's place; and the plan field."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from ezpz_tui.core.checking import staging as staging_check
from ezpz_tui.core.checking.check import Check, Context
from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.batch_script import launch_line
from ezpz_tui.core.launching.launcher import Launch, LaunchConfig, build_launch
from ezpz_tui.core.launching.plan import LaunchPlan, LaunchRefused, check, validate
from ezpz_tui.core.launching.stage_shortfall import without_unstaged
from tests.unit.test_launcher import AURORA, PALS, pbs, perlmutter, which


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    """A folder that is a venv to :func:`environment_of` (nothing is copied here)."""
    where = tmp_path / "venv"
    (where / "bin").mkdir(parents=True)
    (where / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return where


def staged(plan: LaunchPlan, alloc: object, run_dir: Path, python: str, **env: str) -> Launch:
    config = LaunchConfig(
        python, which, "login01", lambda _port: True, resolves=lambda _name: True, environ=env
    )
    return build_launch(check(plan, alloc), run_dir, config)  # type: ignore[arg-type]


def test_pals_stages_once_per_node_and_the_ranks_run_the_copy(tmp_path: Path, venv: Path) -> None:
    alloc = pbs(tmp_path, AURORA, "1.aurora-pbs-01")
    python = str(venv / "bin" / "python")
    command = (python, "train.py", "--data", "/lus/data")
    plan = LaunchPlan(nodes=2, ppn=12, command=command, stage="on")
    launch = staged(plan, alloc, tmp_path / "run", python, TMPDIR="/local/scratch")
    stage = launch.stage
    assert stage is not None and stage.hosts == tuple(AURORA) and not stage.keep
    assert stage.dest == "/local/scratch/ezpz-stage-run"
    per_node = [PALS, "--envall", "--line-buffer", "--np=2", "--ppn=1"]
    per_node += [f"--hostfile={alloc.nodefile}", "--cpu-bind=none"]
    assert list(stage.copy_argv[:7]) == per_node
    # The pack: one per source, in the user's cache (the session's, in the tests), for every run.
    pack = os.path.join(os.environ["XDG_CACHE_HOME"], "ezpz-tui", "stage")
    pack = os.path.join(pack, f"venv-{hashlib.sha1(str(venv).encode()).hexdigest()[:12]}.tar")
    assert list(stage.copy_argv[-12:]) == [
        python,
        "-m",
        "runtime.stage",
        "copy",
        "--source",
        str(venv),
        "--dest",
        stage.dest,
        "--python",
        "bin/python",
        "--pack",
        pack,
    ]
    assert list(stage.remove_argv[:7]) == per_node
    remove = [python, "-m", "runtime.stage", "remove", "--dest", stage.dest]
    assert list(stage.remove_argv[-6:]) == remove
    copy_python = f"{stage.dest}/bin/python"
    capture_at = launch.argv.index("runtime.capture") - 2
    assert launch.argv[0] == PALS and launch.argv[capture_at] == copy_python
    assert list(launch.argv[-4:]) == [copy_python, "train.py", "--data", "/lus/data"]
    assert str(venv) not in " ".join(launch.argv)  # nothing runs from the source


def test_srun_stages_one_task_per_node(tmp_path: Path, venv: Path) -> None:
    python = str(venv / "bin" / "python")
    plan = LaunchPlan(ppn=4, command=("python", "train.py"), stage="keep", stage_dir="/dev/shm")
    launch = staged(plan, perlmutter(), tmp_path / "run", python)
    stage = launch.stage
    assert stage is not None and stage.keep and stage.dest.startswith("/dev/shm/ezpz-stage-")
    assert list(stage.copy_argv[:4]) == ["/usr/bin/srun", "-u", "--verbose", "-N3"]
    assert "-n3" in stage.copy_argv and "--ntasks-per-node=1" in stage.copy_argv
    assert stage.copy_argv[-1] == "--keep"
    # This venv has no bin/python: the bare name is left to PATH, whose first folder is the copy's.
    assert list(launch.argv[-2:]) == ["python", "train.py"]


def test_a_bare_python_the_environment_has_runs_the_copy_and_the_ranks_env_names_it(
    tmp_path: Path, venv: Path
) -> None:
    for name in ("python", "python3", "python3.12"):
        (venv / "bin" / name).touch()
    python = str(venv / "bin" / "python")
    alloc = perlmutter()
    for bare in ("python", "python3", "python3.12"):
        plan = LaunchPlan(ppn=4, command=(bare, "train.py"), stage="on", env=(("PATH", "/x"),))
        launch = staged(plan, alloc, tmp_path / "run", python, PATH="/usr/bin")
        assert launch.stage is not None
        assert list(launch.argv[-2:]) == [f"{launch.stage.dest}/bin/{bare}", "train.py"]
    assert launch.env["PATH"] == f"{launch.stage.dest}/bin:/x"  # the plan's PATH, after it
    assert launch.env["VIRTUAL_ENV"] == launch.stage.dest and "CONDA_PREFIX" not in launch.env
    # A name the environment lacks is not its interpreter; the copy's bin still comes first.
    other = LaunchPlan(ppn=4, command=("python2", "old.py"), stage="on")
    launch = staged(other, alloc, tmp_path / "run", python, PATH="/usr/bin")
    assert launch.stage is not None and list(launch.argv[-2:]) == ["python2", "old.py"]
    assert launch.env["PATH"] == f"{launch.stage.dest}/bin:/usr/bin"
    unstaged = staged(LaunchPlan(ppn=4, command=("python", "t.py")), alloc, tmp_path / "r", python)
    assert list(unstaged.argv[-2:]) == ["python", "t.py"] and "PATH" not in unstaged.env


def test_a_conda_environment_is_named_by_conda_prefix(tmp_path: Path) -> None:
    conda = tmp_path / "conda"
    (conda / "conda-meta").mkdir(parents=True)
    (conda / "bin").mkdir()
    (conda / "bin" / "python").touch()
    plan = LaunchPlan(ppn=4, command=("python", "t.py"), stage="on")
    launch = staged(plan, perlmutter(), tmp_path / "run", str(conda / "bin" / "python"))
    assert launch.stage is not None and launch.env["CONDA_PREFIX"] == launch.stage.dest
    assert "VIRTUAL_ENV" not in launch.env


def test_a_kept_copy_has_the_same_place_for_every_run(tmp_path: Path, venv: Path) -> None:
    alloc = perlmutter()
    python = str(venv / "bin" / "python")
    plan = LaunchPlan(ppn=4, stage="keep")
    first = staged(plan, alloc, tmp_path / "run1", python, TMPDIR="/tmp/job")
    second = staged(plan, alloc, tmp_path / "run2", python, TMPDIR="/tmp/job")
    own = staged(plan.with_changes(stage="on"), alloc, tmp_path / "run3", python)
    assert first.stage and second.stage and own.stage
    assert first.stage.dest == second.stage.dest
    assert own.stage.dest == "/tmp/ezpz-stage-run3"


def test_a_python_in_no_environment_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "usr" / "bin" / "python3"
    with pytest.raises(LaunchRefused) as refused:
        staged(LaunchPlan(ppn=4, stage="on"), perlmutter(), tmp_path / "run", str(bare))
    assert refused.value.problems[0].field == "stage"
    assert "no pyvenv.cfg or conda-meta" in str(refused.value)


def test_the_plan_keeps_its_staging_and_says_what_is_wrong(tmp_path: Path) -> None:
    plan = LaunchPlan(ppn=2, stage="keep", stage_dir="/local")
    assert LaunchPlan.from_dict(plan.to_dict()) == plan
    assert "stage" not in LaunchPlan(ppn=2).to_dict()
    alloc = perlmutter()
    bad = {p.message for p in validate(LaunchPlan(ppn=2, stage="always"), alloc)}
    assert "Staging 'always' is not one of off, on, keep." in bad
    relative = {p.message for p in validate(LaunchPlan(ppn=2, stage="on", stage_dir="x"), alloc)}
    assert "The staging directory 'x' must be an absolute path." in relative


def test_the_plan_keeps_its_minimum_of_staged_nodes_and_says_what_is_wrong() -> None:
    alloc = perlmutter()  # 3 nodes
    for least, needed in ((2, 2), (0.5, 2), (0.9, 3), (1, 1)):
        plan = LaunchPlan(ppn=2, stage="on", stage_min_nodes=least)
        assert LaunchPlan.from_dict(plan.to_dict()) == plan
        assert plan.stage_nodes_needed(3) == needed
        assert validate(plan, alloc) == []
    assert LaunchPlan(ppn=2, stage="on", stage_min_nodes=2).to_dict()["stage_min_nodes"] == 2
    assert LaunchPlan(ppn=2).stage_nodes_needed(3) == 3 and "stage_min_nodes" not in (
        LaunchPlan(ppn=2).to_dict()
    )

    def said(plan: LaunchPlan) -> list[str]:
        return [p.message for p in validate(plan, alloc) if p.field == "stage_min_nodes"]

    assert said(LaunchPlan(ppn=2, stage_min_nodes=1)) == [
        "A minimum of staged nodes needs staging: set stage on."
    ]
    assert said(LaunchPlan(ppn=2, stage="on", stage_min_nodes=4)) == [
        "At least 4 staged nodes asked for, but the plan runs on 3 nodes."
    ]
    for bad in (0, 1.5, -1):
        [message] = said(LaunchPlan(ppn=2, stage="on", stage_min_nodes=bad))
        assert message.startswith("'stage_min_nodes' must be a whole number of nodes (3) or")
    with pytest.raises(ValueError, match="must be a whole number of nodes"):
        LaunchPlan.from_dict({"stage": "on", "stage_min_nodes": "most"})
    with pytest.raises(ValueError, match="must be a whole number of nodes"):
        LaunchPlan.from_dict({"stage": "on", "stage_min_nodes": True})


# --- going on without the nodes that cannot copy ---------------------------------------------


def test_without_the_nodes_that_failed_the_plan_shrinks_and_says_how(tmp_path: Path) -> None:
    alloc = pbs(tmp_path, ["n1.cluster", "n2.cluster", "n3.cluster"], "5.pbs")
    plan = LaunchPlan(ppn=2, tp=2, stage="on", stage_min_nodes=0.5)
    found = without_unstaged(check(plan, alloc), {"n2": "/tmp has 0 B free"})
    assert not isinstance(found, str)
    smaller, said = found
    assert smaller.plan.exclude == ("n2",) and smaller.world_size == 4
    assert smaller.plan.hosts_used(alloc) == ("n1.cluster", "n3.cluster")
    assert said == (
        "staging failed on n2: /tmp has 0 B free; going on with 2 of 3 nodes: 6 → 4 ranks, DP 3 → 2"
    )
    # A plan of so many nodes runs on the nodes that staged, never on one that has no copy.
    two = LaunchPlan(nodes=2, ppn=2, stage="on", stage_min_nodes=1)
    found = without_unstaged(check(two, alloc), {"n1.cluster": "Read-only file system"})
    assert not isinstance(found, str)
    assert found[0].plan.hosts_used(alloc) == ("n2.cluster",) and found[0].plan.nodes == 1


def test_too_few_nodes_left_or_sizes_that_no_longer_fit_say_why_not(tmp_path: Path) -> None:
    alloc = pbs(tmp_path, ["n1", "n2", "n3"], "5.pbs")
    failed = {"n3": "/tmp has 0 B free"}
    assert without_unstaged(check(LaunchPlan(ppn=2, stage="on"), alloc), failed) == (
        "with --stage-min-nodes the launch goes on without the nodes that failed"
    )
    strict = LaunchPlan(ppn=2, stage="on", stage_min_nodes=0.9)
    assert without_unstaged(check(strict, alloc), failed) == (
        "2 of 3 nodes have their copy, fewer than the 3 --stage-min-nodes asks for"
    )
    tp3 = LaunchPlan(ppn=1, tp=3, stage="on", stage_min_nodes=1)
    found = without_unstaged(check(tp3, alloc), failed)
    assert isinstance(found, str) and found.startswith("without n3 the plan does not fit: ")


def test_a_batch_job_keeps_the_minimum_of_staged_nodes(tmp_path: Path) -> None:
    plan = LaunchPlan(ppn=4, stage="on", stage_min_nodes=0.9)
    assert "--stage-min-nodes=0.9" in launch_line(plan, 4, tmp_path, "/venv/bin/python")


# --- the doctor's row ------------------------------------------------------------------------


def doctor_row(alloc: Allocation, plan: LaunchPlan, python: str, tmp_path: Path) -> Check:
    ctx = Context(alloc, plan, tmp_path, 5.0, {}, python, which)
    return staging_check.staging.rows(ctx)[0]


@pytest.fixture
def on_lustre(monkeypatch: pytest.MonkeyPatch, venv: Path) -> None:
    """The venv on Lustre: no network filesystem can be mounted here, so the filesystem's type
    is the one thing made up."""
    real = staging_check.fs_type
    monkeypatch.setattr(
        staging_check, "fs_type", lambda path: "lustre" if path == venv else real(path)
    )


@pytest.mark.usefixtures("on_lustre")
def test_the_doctor_warns_of_a_large_plan_importing_from_a_network_filesystem(
    tmp_path: Path, venv: Path
) -> None:
    python = str(venv / "bin" / "python")
    alloc = pbs(tmp_path, [f"x4000c0s{i}b0n0" for i in range(8)], "9.aurora-pbs")
    large = doctor_row(alloc, LaunchPlan(ppn=12), python, tmp_path)
    assert large.level == "warning" and large.name == "staging"
    assert f"{venv} is on lustre, a network filesystem, and 96 ranks on 8 nodes" in large.reason
    assert large.remedy.startswith("Launch with --stage")
    staged_plan = doctor_row(alloc, LaunchPlan(ppn=12, stage="keep"), python, tmp_path)
    assert staged_plan.level == "ok" and "(--stage)" in staged_plan.reason
    small = doctor_row(alloc, LaunchPlan(nodes=2, ppn=12), python, tmp_path)
    assert small.level == "ok" and "24 ranks on 2 nodes start from it" in small.reason


def test_the_doctor_finds_this_venv_on_a_local_disk(tmp_path: Path, venv: Path) -> None:
    alloc = pbs(tmp_path, [f"x4000c0s{i}b0n0" for i in range(8)], "9.aurora-pbs")
    row = doctor_row(alloc, LaunchPlan(ppn=12), str(venv / "bin" / "python"), tmp_path)
    assert row.level == "ok" and "not a network filesystem" in row.reason


def test_a_batch_job_stages_as_the_run_did(tmp_path: Path) -> None:
    plan = LaunchPlan(ppn=4, stage="keep", stage_dir="/local/scratch")
    argv = launch_line(plan, 4, tmp_path, "/venv/bin/python")
    assert "--stage=keep" in argv and "--stage-dir=/local/scratch" in argv
    assert not any(
        a.startswith("--stage") for a in launch_line(LaunchPlan(ppn=4), 4, tmp_path, "p")
    )
