"""``ezpz-tui`` as a person types it: a real subprocess, real launches, simulated job machines.

Scheduler jobs are simulated the way a compute node presents them: PBS_JOBID and a PBS_NODEFILE
with several hosts, or SLURM_JOB_ID and SLURM_JOB_NODELIST, plus the site variables each machine
sets. The machine's launchers cannot exist here, so stand-ins named ``mpiexec``, ``mpirun`` and
``srun`` sit first on PATH (a dry run never starts them), and a stand-in ``qstat`` answers for the
PBS server. Local launches run for real through the mpich wheel's mpiexec.
"""

from __future__ import annotations

import json
import os
import platform
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from ezpz_tui.core.runs.record import read_run_toml
from runtime.env import SIZE_VARS
from tests.fixtures.cli import base_env, cli, kill_leftovers, run_dirs
from tests.fixtures.runs import first_run_logged, wait_for
from tests.procs import processes_of

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
POLARIS_HOSTS = [
    "x3005c0s13b0n0.hsn.cm.polaris.alcf.anl.gov",
    "x3005c0s19b0n0.hsn.cm.polaris.alcf.anl.gov",
    "x3005c0s1b1n0.hsn.cm.polaris.alcf.anl.gov",
]
AURORA_HOSTS = [
    "x4102c7s0b0n0.hostmgmt2102.cm.aurora.alcf.anl.gov",
    "x4102c7s1b0n0.hostmgmt2102.cm.aurora.alcf.anl.gov",
]
SOPHIA_HOSTS = ["sophia-gpu-07.lab.alcf.anl.gov", "sophia-gpu-12.lab.alcf.anl.gov"]


# --- helpers -------------------------------------------------------------------------------


def stub_tools(bin_dir: Path, names: tuple[str, ...] = ("mpiexec", "mpirun", "srun")) -> Path:
    """Executables that stand in for a machine's launchers; they fail loudly if ever run."""
    bin_dir.mkdir(exist_ok=True)
    for name in names:
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\necho 'stand-in {name} was run' >&2\nexit 99\n")
        path.chmod(0o755)
    return bin_dir


def write_nodefile(path: Path, hosts: list[str], slots: int = 1) -> Path:
    """A PBS nodefile; PBS repeats a host once per slot it gives the job."""
    path.write_text("".join(f"{h}\n" for h in hosts for _ in range(slots)))
    return path


def pbs_env(tmp_path: Path, machine: str, hosts: list[str], slots: int = 1) -> dict[str, str]:
    """The environment a PBS compute node of ``machine`` gives a job, launchers on PATH."""
    bin_dir = stub_tools(tmp_path / "bin")
    domain = {
        "polaris": "hsn.cm.polaris.alcf.anl.gov",
        "aurora": "hostmgmt.cm.aurora.alcf.anl.gov",
        "sophia": "lab.alcf.anl.gov",
    }[machine]
    env = base_env(tmp_path / "outputs")
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PBS_JOBID=f"4242.{machine}-pbs-01.{domain}",
        PBS_NODEFILE=str(write_nodefile(tmp_path / "nodefile", hosts, slots)),
        PBS_O_HOST=f"{machine}-login-02.{domain}",
        PBS_JOBNAME="STDIN",
        PBS_ENVIRONMENT="PBS_INTERACTIVE",
    )
    return env


def slurm_env(tmp_path: Path, machine: str) -> dict[str, str]:
    """The environment ``salloc`` gives on Perlmutter (GPU nodes) or Frontier, srun on PATH."""
    bin_dir = stub_tools(tmp_path / "bin")
    # scontrol as a compute node answers it: every node at the address its name resolves to.
    scontrol = bin_dir / "scontrol"
    scontrol.write_text('#!/bin/sh\necho "NodeName=$4 Arch=x86_64 NodeAddr=$4 NodeHostName=$4"\n')
    env = base_env(tmp_path / "outputs")
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", SLURM_JOB_ID="987654")
    if machine == "perlmutter":
        env.update(
            NERSC_HOST="perlmutter",
            SLURM_JOB_NODELIST="nid[001234-001235]",
            SLURM_NNODES="2",
            SLURM_GPUS_ON_NODE="4",
            SLURM_CPUS_ON_NODE="128",
        )
    else:
        env.update(
            LMOD_SYSTEM_NAME="frontier",
            SLURM_JOB_NODELIST="frontier[00101,00103]",
            SLURM_NNODES="2",
            SLURM_CPUS_ON_NODE="56",
        )
    return env


def dry_run(args: list[str], env: Mapping[str, str]) -> dict[str, Any]:
    proc = cli(["launch", "--dry-run", *args], env)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return json.loads(proc.stdout)


def flag_value(argv: list[str], flag: str) -> str:
    """The value after ``flag`` in ``argv``."""
    return argv[argv.index(flag) + 1]


def ranks_part(argv: list[str]) -> list[str]:
    """The launcher's own options: everything before the rank program (this Python)."""
    return argv[: argv.index(PY)]


# --- help, info, doctor --------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], ["info"], ["doctor"], ["launch"], ["runs"], ["plot"]])
def test_help_on_every_command(command: list[str], tmp_path: Path) -> None:
    proc = cli([*command, "--help"], base_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: ezpz-tui")
    assert proc.stderr == ""


def test_info_json_outside_a_scheduler(tmp_path: Path) -> None:
    proc = cli(["info", "--json"], base_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["scheduler"] == "none"
    assert info["job_id"] is None
    assert info["hosts"] == [socket.gethostname()]
    assert info["nodefile"] is None
    assert info["walltime_left_s"] is None
    assert info["accelerators_per_host"] >= 1
    assert info["cpus_per_host"] >= 1


def test_info_under_a_polaris_pbs_job(tmp_path: Path) -> None:
    env = pbs_env(tmp_path, "polaris", POLARIS_HOSTS, slots=4)
    # The PBS server answers through qstat: a one-hour job that has used ten minutes.
    qstat = tmp_path / "bin" / "qstat"
    qstat.write_text(
        "#!/bin/sh\n"
        'echo "Job Id: $2"\n'
        'echo "    Resource_List.walltime = 01:00:00"\n'
        'echo "    resources_used.walltime = 00:10:00"\n'
    )
    qstat.chmod(0o755)
    proc = cli(["info", "--json"], env)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["scheduler"] == "PBS"
    assert info["job_id"] == env["PBS_JOBID"]
    assert info["machine"] == "Polaris"
    assert info["hosts"] == POLARIS_HOSTS  # each host once, in nodefile order
    assert info["nodefile"] == env["PBS_NODEFILE"]
    assert (info["accelerators_per_host"], info["accelerator_kind"]) == (4, "cuda")
    assert info["walltime_left_s"] == pytest.approx(3000, abs=5)

    text = cli(["info"], env)
    assert text.returncode == 0, text.stderr
    assert "Polaris" in text.stdout
    assert "3: x3005c0s13b0n0" in text.stdout
    assert "0:49:" in text.stdout or "0:50:00" in text.stdout


def test_doctor_json_rows_and_exit_code(tmp_path: Path) -> None:
    proc = cli(["doctor", "--json"], base_env(tmp_path / "outputs"))
    rows = json.loads(proc.stdout)
    names = [r["name"] for r in rows]
    for expected in ("launcher", "scheduler", "torch", "backend", "outputs", "rank env"):
        assert expected in names
    assert len(set(names)) == len(names)
    for row in rows:
        assert row["level"] in ("ok", "warning", "error")
        assert row["reason"]
    by_name = {r["name"]: r for r in rows}
    assert by_name["outputs"]["level"] == "ok"
    assert by_name["scheduler"]["level"] == "ok"
    worst_is_error = any(r["level"] == "error" for r in rows)
    assert proc.returncode == (1 if worst_is_error else 0), proc.stderr


def test_doctor_fails_when_outputs_cannot_be_written(tmp_path: Path) -> None:
    # A regular file where a directory must go: unwritable even for root, who ignores modes.
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    env = base_env(blocker / "outputs")
    proc = cli(["doctor", "--json"], env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    outputs = next(r for r in json.loads(proc.stdout) if r["name"] == "outputs")
    assert outputs["level"] == "error"
    assert str(blocker) in outputs["reason"]
    assert outputs["remedy"]

    text = cli(["doctor"], env)
    assert text.returncode == 1
    assert "[FAIL] outputs:" in text.stdout
    assert "Traceback" not in text.stdout + text.stderr


def test_doctor_fails_on_a_read_only_outputs_dir(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    try:
        # Root writes into read-only directories: the doctor runs as a user who cannot.
        proc = cli(["doctor", "--json"], base_env(locked / "outputs"), unprivileged=True)
    finally:
        locked.chmod(0o755)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    outputs = next(r for r in json.loads(proc.stdout) if r["name"] == "outputs")
    assert outputs["level"] == "error"
    assert outputs["reason"] == f"Cannot write in {locked}: Permission denied."


# --- dry runs on simulated machines --------------------------------------------------------


def test_dry_run_polaris_uses_pals_mpiexec_and_the_pbs_nodefile(tmp_path: Path) -> None:
    env = pbs_env(tmp_path, "polaris", POLARIS_HOSTS)
    out = dry_run(["--tp", "2", "--pp", "2"], env)
    argv = out["argv"]
    head = ranks_part(argv)
    assert head[0] == str(tmp_path / "bin" / "mpiexec")
    assert "--envall" in head
    assert "--np=12" in head and "--ppn=4" in head  # 3 hosts x 4 A100
    assert f"--hostfile={env['PBS_NODEFILE']}" in head  # every host: PBS's own file
    assert "--cpu-bind=depth" in head and "--depth=8" in head
    assert "--no-vni" not in head
    assert out["hostfile"] == env["PBS_NODEFILE"]
    assert out["launcher"] == "mpiexec"
    assert out["world_size"] == 12
    assert out["sizes"] == {"tp": 2, "pp": 2, "cp": 1, "dp": 3}
    # The sizes reach every rank, remote ones included, through the launcher.
    for flag in ("EZPZ_TP=2", "EZPZ_PP=2", "EZPZ_CP=1", "OMP_NUM_THREADS=8"):
        assert flag in head and head[head.index(flag) - 1] == "--env"
    assert out["env"][SIZE_VARS["tp"]] == "2" and out["env"][SIZE_VARS["pp"]] == "2"
    # Every rank is this Python's command itself, watched from its own interpreter
    # (runtime.in_process) in a run directory still to be named: no wrapper in front.
    run_dir = str(tmp_path / "outputs" / "<run-id>")
    assert argv[len(head) :] == [PY, "-m", "runtime.examples.train"]
    assert f"EZPZ_CAPTURE_IN_PROCESS={run_dir}" in head
    assert not (tmp_path / "outputs").exists()  # a dry run makes no run directory


def test_dry_run_aurora_binds_xpu_tiles(tmp_path: Path) -> None:
    env = pbs_env(tmp_path, "aurora", AURORA_HOSTS)
    out = dry_run(["--cp", "2"], env)
    head = ranks_part(out["argv"])
    assert head[0] == str(tmp_path / "bin" / "mpiexec")
    assert "--envall" in head
    assert "--no-vni" not in head  # ezpz dropped it in v0.18; DAOS users add it as a flag
    assert "--np=24" in head and "--ppn=12" in head  # 2 hosts x 12 tiles
    assert f"--hostfile={env['PBS_NODEFILE']}" in head
    bind = [a for a in head if a.startswith("--cpu-bind=")]
    assert bind == [
        "--cpu-bind=list:1-8:9-16:17-24:25-32:33-40:41-48:53-60:61-68:69-76:77-84:85-92:93-100"
    ]
    assert "EZPZ_CP=2" in head and "OMP_NUM_THREADS=8" in head  # eight cores per tile
    assert out["sizes"] == {"tp": 1, "pp": 1, "cp": 2, "dp": 12}


def test_dry_run_plans_without_a_bad_host_as_the_launch_does(tmp_path: Path) -> None:
    """One of the job's two hosts in bad_hosts.txt: the dry run's world and sizes are those of
    its own argv (one host), and of the run the launch itself records."""
    env = pbs_env(tmp_path, "aurora", AURORA_HOSTS)
    outputs = tmp_path / "outputs"
    outputs.mkdir()
    (outputs / "bad_hosts.txt").write_text(f"{AURORA_HOSTS[1].split('.')[0]}  # a node fault\n")
    out = dry_run(["--tp", "2"], env)
    head = ranks_part(out["argv"])
    assert "--np=12" in head and "--ppn=12" in head  # one host of 12 tiles
    assert out["hostfile_hosts"] == [AURORA_HOSTS[0]]
    assert out["world_size"] == 12, out
    assert out["sizes"] == {"tp": 2, "pp": 1, "cp": 1, "dp": 6}, out
    assert [p["field"] for p in out["problems"]] == ["exclude"]  # the warning says which
    # The real launch (its stand-in launcher fails at once) records the same plan.
    launched = cli(["launch", "--quiet", "--tp", "2"], env)
    assert launched.returncode == 99, launched.stderr
    [run_dir] = run_dirs(outputs)
    record = read_run_toml(run_dir)
    assert record["sizes"] == {**out["sizes"], "world_size": out["world_size"]}
    assert record["hosts"] == out["hostfile_hosts"]
    counts = [a for a in record["launch"]["argv"] if a.startswith(("--np=", "--ppn="))]
    assert counts == ["--np=12", "--ppn=12"]


def test_dry_run_sophia_uses_openmpi_mpirun(tmp_path: Path) -> None:
    env = pbs_env(tmp_path, "sophia", SOPHIA_HOSTS)
    out = dry_run(["--tp", "4"], env)
    head = ranks_part(out["argv"])
    assert out["launcher"] == "mpirun"
    assert head[0] == str(tmp_path / "bin" / "mpirun")
    assert flag_value(head, "-n") == "16" and flag_value(head, "-N") == "8"
    assert flag_value(head, "--hostfile") == env["PBS_NODEFILE"]
    assert "--envall" not in head
    exported = [head[i + 1] for i, a in enumerate(head) if a == "-x"]
    assert {"PATH", "LD_LIBRARY_PATH", "EZPZ_TP=4", "EZPZ_PP=1", "EZPZ_CP=1"} <= set(exported)


@pytest.mark.parametrize(
    ("machine", "hosts", "per_node", "cpus_per_task"),
    [
        ("perlmutter", ["nid001234", "nid001235"], 4, 32),
        ("frontier", ["frontier00101", "frontier00103"], 8, 7),
    ],
)
def test_dry_run_slurm_uses_srun_with_an_explicit_nodelist(
    machine: str, hosts: list[str], per_node: int, cpus_per_task: int, tmp_path: Path
) -> None:
    env = slurm_env(tmp_path, machine)
    out = dry_run(["--tp", "2"], env)
    head = ranks_part(out["argv"])
    assert out["launcher"] == "srun"
    assert head[0] == str(tmp_path / "bin" / "srun")
    assert "-N2" in head and f"-n{2 * per_node}" in head
    assert f"--ntasks-per-node={per_node}" in head
    assert f"--nodelist={','.join(hosts)}" in head
    assert "--mpi=pmi2" in head
    assert f"--cpus-per-task={cpus_per_task}" in head
    assert f"--gpus-per-node={per_node}" in head
    export = next(a for a in head if a.startswith("--export="))
    items = export.removeprefix("--export=").split(",")
    assert items[0] == "ALL"
    assert {"EZPZ_TP=2", "EZPZ_PP=1", "EZPZ_CP=1", f"OMP_NUM_THREADS={cpus_per_task}"} <= set(items)
    assert out["hostfile"] is None

    subset = dry_run(["-n", "1", "--exclude", hosts[0]], env)
    sub_head = ranks_part(subset["argv"])
    assert "-N1" in sub_head and f"-n{per_node}" in sub_head
    assert f"--nodelist={hosts[1]}" in sub_head


@pytest.mark.parametrize(
    ("machine", "addr"),
    [
        ("polaris", POLARIS_HOSTS[0]),
        # Aurora's HSN name does not resolve off Aurora: the nodefile's plain name is used.
        ("aurora", AURORA_HOSTS[0]),
        ("perlmutter", "nid001234"),
    ],
)
def test_dry_run_names_the_rendezvous_the_ranks_get(
    machine: str, addr: str, tmp_path: Path
) -> None:
    if machine == "perlmutter":
        env = slurm_env(tmp_path, machine)
    else:
        env = pbs_env(tmp_path, machine, POLARIS_HOSTS if machine == "polaris" else AURORA_HOSTS)
    out = dry_run(["-n", "2"], env)
    rank_env = out["rank_env"]
    assert rank_env["given_by"] == "runtime.capture"
    names = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK"]
    assert rank_env["vars"] == names
    assert rank_env["MASTER_ADDR"] == addr
    port = rank_env["MASTER_PORT"]
    assert 29500 <= port < 30500
    # ...passed with the launcher's own env flags, so every rank on every host gets them.
    assert out["env"]["MASTER_ADDR"] == addr and out["env"]["MASTER_PORT"] == str(port)
    head = ranks_part(out["argv"])
    if machine == "perlmutter":
        export = next(a for a in head if a.startswith("--export="))
        assert f"MASTER_ADDR={addr}" in export and f"MASTER_PORT={port}" in export
    else:
        assert f"MASTER_ADDR={addr}" in head and f"MASTER_PORT={port}" in head
    assert any(note.startswith("Each rank gets torchrun's RANK") for note in out["notes"])


@pytest.mark.parametrize("machine", ["aurora", "polaris", "perlmutter"])
def test_dry_run_puts_launcher_flags_before_the_program(machine: str, tmp_path: Path) -> None:
    if machine == "perlmutter":
        env = slurm_env(tmp_path, machine)
    else:
        env = pbs_env(tmp_path, machine, AURORA_HOSTS if machine == "aurora" else POLARIS_HOSTS)
    out = dry_run(["--launcher-arg=--cpu-bind=none", "--launcher-arg=--label"], env)
    head = ranks_part(out["argv"])
    assert head[-2:] == ["--cpu-bind=none", "--label"]
    # It replaces the machine's default binding instead of following it.
    assert [a for a in head if a.startswith("--cpu-bind")] == ["--cpu-bind=none"]
    assert out["launcher_args"] == ["--cpu-bind=none", "--label"]
    if machine == "aurora":
        assert any(n.startswith("Your launcher flags replace the default") for n in out["notes"])

    # Without the = form argparse takes the flag for one of its own options: one clear line.
    proc = cli(["launch", "--dry-run", "--launcher-arg", "--cpu-bind=none"], env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--launcher-arg" in proc.stderr


def test_a_launcher_flag_that_sets_the_ranks_is_refused(tmp_path: Path) -> None:
    env = pbs_env(tmp_path, "polaris", POLARIS_HOSTS)
    proc = cli(["launch", "--dry-run", "--launcher-arg=--np=4"], env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    [problem] = json.loads(proc.stdout)["problems"]
    assert problem["field"] == "launcher_args"
    assert problem["message"].startswith("--np=4 is set from the plan's nodes, ranks per node")
    launch = cli(["launch", "--launcher-arg=--np=4"], env)
    assert launch.returncode == 2
    assert launch.stderr.splitlines() == [f"ezpz-tui: {problem['message']}"]


def test_dry_run_on_a_pbs_node_without_mpiexec_says_what_to_do(tmp_path: Path) -> None:
    env = pbs_env(tmp_path, "polaris", POLARIS_HOSTS)
    env["PATH"] = str(stub_tools(tmp_path / "empty", ()))  # no launcher at all on this node
    for launcher in ("auto", "mpiexec", "torchrun"):
        proc = cli(["launch", "--dry-run", "--launcher", launcher], env)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        out = json.loads(proc.stdout)
        assert "argv" not in out
        [problem] = out["problems"]
        assert (problem["level"], problem["field"]) == ("error", "launcher")
        assert "mpiexec" in problem["message"] and "not on PATH on this node" in problem["message"]
        assert "module load" in problem["message"]
    launch = cli(["launch"], env)
    assert launch.returncode == 2
    assert launch.stderr.startswith("ezpz-tui: The launcher for this PBS job is mpiexec")
    assert run_dirs(tmp_path / "outputs") == []


def test_dry_run_subset_writes_a_filtered_hostfile(tmp_path: Path) -> None:
    env = pbs_env(tmp_path, "polaris", POLARIS_HOSTS, slots=4)
    out = dry_run(["-n", "1"], env)
    placeholder = tmp_path / "outputs" / "<run-id>" / "hostfile"
    assert out["hostfile"] == str(placeholder)
    assert out["hostfile_hosts"] == POLARIS_HOSTS[:1]
    head = ranks_part(out["argv"])
    assert f"--hostfile={placeholder}" in head
    assert "--np=4" in head and "--ppn=4" in head
    assert out["world_size"] == 4
    # The note names the file the run will really have, not a scratch directory.
    assert any("1 of 3" in n and str(placeholder) in n for n in out["notes"]), out["notes"]
    assert not (tmp_path / "outputs").exists()


def test_dry_run_exclude_drops_a_host(tmp_path: Path) -> None:
    env = pbs_env(tmp_path, "polaris", POLARIS_HOSTS)
    short = POLARIS_HOSTS[1].split(".")[0]  # a short name excludes the FQDN too
    out = dry_run(["--exclude", short], env)
    assert out["hostfile_hosts"] == [POLARIS_HOSTS[0], POLARIS_HOSTS[2]]
    assert "--np=8" in ranks_part(out["argv"])
    assert out["world_size"] == 8

    unknown = cli(["launch", "--dry-run", "--exclude", "nosuchhost"], env)
    assert unknown.returncode == 2
    problems = json.loads(unknown.stdout)["problems"]
    assert [p["field"] for p in problems] == ["exclude"]
    assert "nosuchhost" in problems[0]["message"]
    assert "argv" not in json.loads(unknown.stdout)


def test_local_sizes_reach_the_rank_environment(tmp_path: Path) -> None:
    out = dry_run(
        ["--ppn", "2", "--cp", "2", "--env", "FOO=bar=baz", "--", "python", "x.py"],
        base_env(tmp_path / "outputs"),
    )
    argv = out["argv"]
    genv = {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "-genv"}
    assert genv["EZPZ_TP"] == "1" and genv["EZPZ_PP"] == "1" and genv["EZPZ_CP"] == "2"
    assert genv["FOO"] == "bar=baz"  # only the first = splits
    assert argv[-2:] == ["python", "x.py"]
    assert flag_value(argv, "-n") == "2"


# --- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["launch", "--tp", "0"], "--tp"),
        (["launch", "--ppn", "2", "--tp", "3", "--", PY, "-c", "pass"], "divisible"),
        (["launch", "--ppn", "2", "--env", "NOEQUALS", "--", PY, "-c", "pass"], "NOEQUALS"),
        (["launch", "--launcher", "nosuch"], "nosuch"),
        (["plot", "no-such-run"], "no-such-run"),
        (["nosuchcommand"], "nosuchcommand"),
    ],
)
def test_bad_input_gives_one_readable_line(args: list[str], needle: str, tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    proc = cli(args, base_env(outputs))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("ezpz-tui")
    assert needle in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert run_dirs(outputs) == []  # refused before anything was made


def test_dry_run_of_an_invalid_plan_lists_every_problem(tmp_path: Path) -> None:
    proc = cli(
        ["launch", "--dry-run", "--ppn", "2", "--tp", "3", "--env", "EZPZ_TP=4"],
        base_env(tmp_path / "outputs"),
    )
    assert proc.returncode == 2
    out = json.loads(proc.stdout)
    assert {p["field"] for p in out["problems"]} == {"sizes", "env"}
    assert "argv" not in out


# --- real runs -----------------------------------------------------------------------------


def train(*args: str) -> list[str]:
    return [PY, "-m", "runtime.examples.train", *args]


@pytest.fixture(scope="module")
def launched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One successful and one failing real launch into the same outputs directory."""
    outputs = tmp_path_factory.mktemp("cli-runs") / "outputs"
    env = base_env(outputs)
    try:
        good = cli(["launch", "--ppn", "2", "--tp", "2", "--", *train("--steps", "5")], env, 180)
        good_dirs = run_dirs(outputs)
        # Both ranks fail alike: each exits 3 only once the other has started, so neither is
        # torn down by the fail-fast before its own exit (on a loaded machine one rank can
        # start a second after the other).
        started = outputs.parent / "started"
        started.mkdir()
        both_exit_3 = (
            "import os, pathlib, sys, time; "
            f"d = pathlib.Path({str(started)!r}); (d / os.environ['RANK']).touch(); "
            "deadline = time.monotonic() + 120\n"
            "while len(list(d.iterdir())) < 2 and time.monotonic() < deadline: time.sleep(0.01)\n"
            "sys.exit(3)"
        )
        bad = cli(["launch", "--ppn", "2", "--", PY, "-c", both_exit_3], env, 180)
        bad_dirs = [d for d in run_dirs(outputs) if d not in good_dirs]
        yield {
            "outputs": outputs,
            "env": env,
            "good": good,
            "good_dir": good_dirs[0] if len(good_dirs) == 1 else None,
            "bad": bad,
            "bad_dir": bad_dirs[0] if len(bad_dirs) == 1 else None,
        }
    finally:
        kill_leftovers(outputs)


def test_launch_demo_leaves_a_complete_run_directory(launched: dict[str, Any]) -> None:
    proc, run_dir = launched["good"], launched["good_dir"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert run_dir is not None
    assert len(list((run_dir / "logs").glob("b0000/rank-*.log"))) == 2
    for rank in (0, 1):
        status = json.loads((run_dir / "status" / "b0000" / f"rank-{rank:05d}.json").read_text())
        assert (status["rank"], status["exit_code"], status["state"]) == (rank, 0, "succeeded")
        lines = (run_dir / "metrics" / "b0000" / f"rank-{rank:05d}.jsonl").read_text().splitlines()
        records = [json.loads(line) for line in lines]
        assert [r["step"] for r in records] == [0, 1, 2, 3, 4]
        assert all(r["rank"] == rank and "loss" in r["metrics"] for r in records)
    record = read_run_toml(run_dir)
    assert record["sizes"]["tp"] == 2 and record["sizes"]["world_size"] == 2
    assert record["plan"]["command"] == train("--steps", "5")
    launch_argv = record["launch"]["argv"]
    assert Path(launch_argv[0]).name == "mpiexec"
    at = launch_argv.index("EZPZ_TP")
    assert launch_argv[at - 1 : at + 2] == ["-genv", "EZPZ_TP", "2"]
    # Provenance: the demo runs as ``-m`` from the repository, so its commit is recorded.
    facts = record["provenance"]
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True)
    assert facts["git"]["commit"] == head.stdout.decode().strip()
    assert facts["torch"].startswith("2.") and facts["python"] == platform.python_version()
    assert re.search(r"\d+\.\d+", facts["launcher_version"]), facts
    state = json.loads((run_dir / "state.json").read_text())
    assert (state["state"], state["exit_code"]) == ("succeeded", 0)
    # Rank 0's log is followed on stdout, rank 1's is not.
    assert "[rank 0]" in proc.stdout and "step 4/5" in proc.stdout
    assert "[rank 1]" not in proc.stdout
    assert f"run succeeded ({run_dir.name})" in proc.stderr


def test_failing_command_exits_with_its_code_and_names_the_ranks(
    launched: dict[str, Any],
) -> None:
    proc, run_dir = launched["bad"], launched["bad_dir"]
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert run_dir is not None
    assert "failed ranks: rank 0 (exit 3), rank 1 (exit 3)" in proc.stderr
    assert "Traceback" not in proc.stderr
    state = json.loads((run_dir / "state.json").read_text())
    assert (state["state"], state["exit_code"]) == ("failed", 3)


def test_runs_json_lists_both(launched: dict[str, Any]) -> None:
    proc = cli(["runs", "--json"], launched["env"])
    assert proc.returncode == 0, proc.stderr
    runs = {r["run_id"]: r for r in json.loads(proc.stdout)}
    good, bad = launched["good_dir"].name, launched["bad_dir"].name
    assert set(runs) == {good, bad}
    assert (runs[good]["state"], runs[good]["exit_code"], runs[good]["tp"]) == ("succeeded", 0, 2)
    assert (runs[bad]["state"], runs[bad]["exit_code"]) == ("failed", 3)
    assert runs[good]["path"] == str(launched["good_dir"])

    table = cli(["runs"], launched["env"])
    assert table.returncode == 0
    assert good in table.stdout and "succeeded" in table.stdout and "failed" in table.stdout


def test_plot_prints_a_metric_or_lists_the_known_ones(launched: dict[str, Any]) -> None:
    run_id = launched["good_dir"].name
    proc = cli(["plot", run_id, "--metric", "loss"], launched["env"])
    assert proc.returncode == 0, proc.stderr
    assert f"loss — {run_id} (2 ranks)" in proc.stdout
    assert len(proc.stdout.splitlines()) > 10  # a chart, not a message

    nope = cli(["plot", run_id[:19], "--metric", "nope"], launched["env"])
    assert nope.returncode == 2
    line = nope.stderr.strip()
    assert "'nope'" in line and "loss" in line and "lr" in line
    assert len(line.splitlines()) == 1


def test_sigint_stops_a_running_launch_cleanly(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    stdout = (tmp_path / "stdout").open("wb")
    stderr = (tmp_path / "stderr").open("wb")
    args = ["launch", "--ppn", "2", "--", *train("--steps", "100000", "--sleep", "0.2")]
    proc = subprocess.Popen(
        [PY, "-m", "ezpz_tui", *args],
        env=base_env(outputs),
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,  # a Ctrl-C in pytest's terminal must not reach it
    )
    try:
        wait_for(lambda: first_run_logged(outputs, "step 1/"), 120, "rank 0 to log a training step")
        (run_dir,) = run_dirs(outputs)
        assert processes_of(run_dir)  # the scan sees the live run
        os.kill(proc.pid, signal.SIGINT)
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stdout.close()
        stderr.close()
        kill_leftovers(outputs)
    err = (tmp_path / "stderr").read_text()
    assert code == 130, err
    assert "stopped (clean)" in err
    assert "Traceback" not in err
    state = json.loads((run_dir / "state.json").read_text())
    assert state["state"] == "stopped"
    assert state.get("stopped_by_user") is True
    assert processes_of(run_dir) == []
    assert "step 1/" in (tmp_path / "stdout").read_text()
