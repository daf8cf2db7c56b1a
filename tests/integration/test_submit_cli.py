"""``ezpz-tui submit`` as a person types it on a simulated Polaris or Aurora job.

The job is simulated as a compute node presents it (PBS_JOBID, a PBS_NODEFILE of ALCF node
names, PBS_O_HOST); PBS itself cannot run here, so a stand-in ``qsub`` answers as the PBS server
does when a test submits. The run whose plan is submitted is a finished Polaris run on disk.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path

import pytest

from tests.fixtures.cli import base_env, cli
from tests.fixtures.runs import make_run

POLARIS = [f"x3005c0s{slot}b0n0.hsn.cm.polaris.alcf.anl.gov" for slot in (13, 19)]
AURORA = [f"x4102c5s{slot}b0n0.hostmgmt2102.cm.aurora.alcf.anl.gov" for slot in (0, 1)]
SITES = {
    "polaris": (POLARIS, "polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"),
    "aurora": (AURORA, "aurora-pbs-0001.hostmgmt.cm.aurora.alcf.anl.gov"),
}


def job_env(tmp_path: Path, machine: str, tools: dict[str, str] | None = None) -> dict[str, str]:
    """A PBS job on ``machine``; ``tools``: stand-in commands (name -> shell body) on PATH."""
    hosts, server = SITES[machine]
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("".join(f"{h}\n" for h in hosts))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in (tools or {}).items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    env = base_env(tmp_path / "outputs")
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PBS_JOBID=f"4242.{server}",
        PBS_NODEFILE=str(nodefile),
        PBS_O_HOST=f"{machine}-login-02.{server.split('.', 1)[1]}",
    )
    return env


def finished_run(tmp_path: Path) -> Path:
    return make_run(
        tmp_path / "outputs",
        run_id="20261126-100000-000-tp2pp1cp1",
        state="succeeded",
        exit_code=0,
        sizes={"tp": 2},
        ranks=8,
        steps=4,
        created=time.time() - 60,
    )


def directives(script: str) -> list[str]:
    return [line[len("#PBS ") :] for line in script.splitlines() if line.startswith("#PBS ")]


def launch_argv(script: str) -> list[str]:
    (line,) = [line for line in script.splitlines() if line.startswith("exec ")]
    return shlex.split(line)[1:]


def test_dry_run_on_polaris_prints_alcf_directives_and_the_launch(tmp_path: Path) -> None:
    run = finished_run(tmp_path)
    env = job_env(tmp_path, "polaris")
    args = ["submit", "--dry-run", "--walltime", "00:30:00", "-q", "debug", "-A", "datascience"]
    proc = cli(args, env)
    assert proc.returncode == 0, proc.stderr
    script = proc.stdout
    assert script.startswith("#!/bin/bash -l\n")
    found = directives(script)
    for directive in (
        "-l select=2:system=polaris",
        "-l place=scatter",
        "-l walltime=00:30:00",
        "-l filesystems=home:eagle",
        "-q debug",
        "-A datascience",
        "-j oe",
    ):
        assert directive in found, script
    argv = launch_argv(script)
    assert argv[2:4] == ["ezpz_tui", "launch"]
    assert {"--tp=2", "--pp=1", "--cp=1", "--ppn=4", "--launcher=auto"} <= set(argv)
    assert f"--outputs={tmp_path / 'outputs'}" in argv
    assert argv[argv.index("--") + 1 :] == ["python", "-m", "runtime.examples.train"]
    assert f"of run {run.name}" in script
    assert "export EZPZ_SUBMISSION=batch-" in script
    assert not (tmp_path / "outputs" / ".batch").exists()  # a dry run writes nothing


def test_dry_run_on_aurora_asks_for_flare(tmp_path: Path) -> None:
    finished_run(tmp_path)
    env = job_env(tmp_path, "aurora")
    proc = cli(["submit", "--dry-run", "-n", "4", "--walltime", "2:00:00"], env)
    assert proc.returncode == 0, proc.stderr
    found = directives(proc.stdout)
    assert "-l select=4" in found and "-l filesystems=home:flare" in found
    assert "-l walltime=02:00:00" in found and "-l place=scatter" in found
    # The Polaris run had 4 ranks per node; Aurora has 12 tiles, so 4 still fit.
    assert "--ppn=4" in launch_argv(proc.stdout)


def test_submit_hands_the_script_to_qsub_and_lists_the_job_as_queued(tmp_path: Path) -> None:
    finished_run(tmp_path)
    qstat = '{"Jobs": {"901.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov": {"job_state": "Q"}}}'
    tools = {
        "qsub": 'cp "$1" "$1.submitted"; echo 901.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov',
        "qstat": f"echo '{qstat}'",
    }
    env = job_env(tmp_path, "polaris", tools)
    proc = cli(["submit", "-A", "datascience"], env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "901.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"
    (submitted,) = (tmp_path / "outputs" / ".batch").glob("*.sh.submitted")
    assert "#PBS -A datascience" in submitted.read_text()
    runs = json.loads(cli(["runs", "--json"], env).stdout)
    assert [(r["state"], r["queued"]) for r in runs] == [("queued", True), ("succeeded", False)]
    assert runs[0]["job_id"] == proc.stdout.strip() and runs[0]["world_size"] == 8


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--walltime", "90"], "walltime '90' is not HH:MM:SS"),
        (["--walltime", "1:75:00"], "minutes and seconds run from 00 to 59"),
        (["-n", "0"], "0 must be at least 1"),
        (["-n", "two"], "'two' is not a whole number"),
        (["nope"], "no run 'nope'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str, tmp_path: Path) -> None:
    finished_run(tmp_path)
    proc = cli(["submit", "--dry-run", *args], job_env(tmp_path, "polaris"))
    assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_no_qsub_on_the_node_is_said_and_exit_2(tmp_path: Path) -> None:
    finished_run(tmp_path)
    proc = cli(["submit"], job_env(tmp_path, "polaris"))
    assert proc.returncode == 2, proc.stderr
    assert "qsub is not on PATH" in proc.stderr and "Traceback" not in proc.stderr


def test_help_documents_submit(tmp_path: Path) -> None:
    proc = cli(["submit", "--help"], base_env(tmp_path / "outputs"))
    assert proc.returncode == 0
    for word in ("--walltime", "--queue", "--account", "--dry-run", "qsub", "sbatch", "queued"):
        assert word in proc.stdout


def test_no_scheduler_anywhere_is_said_and_exit_2_unless_one_is_named(tmp_path: Path) -> None:
    """A laptop: no job, neither qsub nor sbatch on PATH, a run made without a scheduler."""
    outputs = tmp_path / "outputs"
    make_run(
        outputs,
        run_id="20261126-100000-000-tp1pp1cp1",
        state="succeeded",
        exit_code=0,
        sizes={},
        ranks=2,
        steps=4,
        created=time.time() - 60,
        hosts=("laptop",),
        scheduler="none",
        job_id=None,
        machine="laptop",
    )
    env = base_env(outputs)
    env["PATH"] = str(tmp_path / "empty")
    proc = cli(["submit", "--dry-run"], env)
    assert proc.returncode == 2 and "neither qsub nor sbatch is on PATH" in proc.stderr
    named = cli(["submit", "--dry-run", "--scheduler", "slurm", "-q", "gpu"], env)
    assert named.returncode == 0, named.stderr
    assert "#SBATCH --nodes=1\n" in named.stdout and "#SBATCH --partition=gpu\n" in named.stdout
    assert "#SBATCH --ntasks-per-node=2\n" in named.stdout


def test_resume_writes_the_job_that_continues_the_run(tmp_path: Path) -> None:
    """The job's launch names the run, not a checkpoint: it continues from the newest one the
    run has when the job starts (a run still saving until its own walltime ends)."""
    run = finished_run(tmp_path)
    done = cli(["submit", "--dry-run", "--resume", run.name], job_env(tmp_path, "polaris"))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"ezpz-tui: cannot resume: {run}: the run has no checkpoint in {run / 'checkpoints'}"
    )
    (run / "checkpoints" / "step-4").mkdir(parents=True)
    (run / "checkpoints" / "step-4" / "COMPLETE").write_text('{"step": 4}')
    done = cli(["submit", "--dry-run", "--resume", run.name], job_env(tmp_path, "polaris"))
    assert done.returncode == 0, done.stderr
    argv = launch_argv(done.stdout)
    assert argv[2:5] == ["ezpz_tui", "launch", f"--outputs={tmp_path / 'outputs'}"]
    assert argv[5] == f"--resume-from={run}"
    assert not any("EZPZ_RESUME_FROM" in word for word in argv)
