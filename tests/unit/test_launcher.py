"""Launcher argv per machine, exactly, plus two real local launches through runtime.capture."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from ezpz_tui.core.launching.allocation import Allocation, detect_allocation
from ezpz_tui.core.launching.launcher import (
    Launch,
    LaunchConfig,
    Which,
    build_launch,
    detect_launcher_kind,
    format_argv,
    launcher_problems,
)
from ezpz_tui.core.launching.launcher_flags import INTEL_XPU_CPU_BIND
from ezpz_tui.core.launching.plan import LaunchPlan, LaunchRefused, check
from ezpz_tui.core.launching.rendezvous import run_port
from runtime.env import RANK_VARS

PY = "/venv/bin/python"  # a Python with no launcher beside it, as on a site module system
CMD = ("python", "train.py", "--lr", "1e-3")
PALS = "/opt/cray/pals/1.4/bin/mpiexec"
TOOLS = {"mpiexec": PALS, "mpirun": "/opt/openmpi/bin/mpirun", "srun": "/usr/bin/srun"}

POLARIS = [f"x3006c0s{n}b0n0.hsn.cm.polaris.alcf.anl.gov" for n in (13, 19, 1)]
AURORA = [f"x4102c5s{n}b0n0.hostmgmt2102.cm.aurora.alcf.anl.gov" for n in (2, 3)]
SUNSPOT = ["x1921c0s0b0n0.hostmgmt2000.cm.americas.sgi.com", "x1921c0s1b0n0.hostmgmt2000.cm"]
SOPHIA = ["sophia-gpu-07.lab.alcf.anl.gov", "sophia-gpu-08.lab.alcf.anl.gov"]


def which(name: str) -> str | None:
    return TOOLS.get(name)


def launch_of(
    plan: LaunchPlan,
    alloc: Allocation,
    run_dir: Path,
    python: str = PY,
    which: Which = shutil.which,
    this_host: str = "login01",
) -> Launch:
    """The launch as built on ``this_host`` (a login node unless a test says otherwise), where
    every port is free and every high-speed-network name resolves."""
    config = LaunchConfig(
        python, which, this_host, port_free=lambda _port: True, resolves=lambda _name: True
    )
    return build_launch(check(plan, alloc), run_dir, config)


def capture(run_dir: Path, command: tuple[str, ...] = CMD, python: str = PY) -> list[str]:
    return [python, "-m", "runtime.capture", "--run-dir", str(run_dir), "--", *command]


def pbs(tmp_path: Path, hosts: list[str], job: str, **extra: str) -> Allocation:
    nodefile = tmp_path / "pbs_nodefile"
    nodefile.write_text("".join(f"{h}\n" for h in hosts))
    env = {"PBS_JOBID": job, "PBS_NODEFILE": str(nodefile), **extra}
    return detect_allocation(env, probe=False, host=hosts[0].split(".")[0])


def perlmutter() -> Allocation:
    env = {
        "SLURM_JOB_ID": "31337",
        "SLURM_JOB_NODELIST": "nid[001140-001141,001144]",
        "NERSC_HOST": "perlmutter",
        "SLURM_GPUS_ON_NODE": "4",
        "SLURM_CPUS_ON_NODE": "128",
    }
    return detect_allocation(env, probe=False, host="nid001140")


def frontier() -> Allocation:
    env = {
        "SLURM_JOB_ID": "2718",
        "SLURM_JOB_NODELIST": "frontier[00001-00002,00010]",
        "LMOD_SYSTEM_NAME": "frontier",
        "SLURM_CPUS_ON_NODE": "112",
    }
    return detect_allocation(env, probe=False, host="frontier00001")


def env_flags(flag: str, env: dict[str, str]) -> list[str]:
    out: list[str] = []
    for key, value in env.items():
        out += [flag, f"{key}={value}"]
    return out


def sizes(
    tp: int = 1, pp: int = 1, cp: int = 1, omp: int | None = None, meet: str | None = None
) -> dict[str, str]:
    """The env a launch passes its ranks; ``meet``: the MASTER_ADDR of a run dir named run."""
    env = {"EZPZ_TP": str(tp), "EZPZ_PP": str(pp), "EZPZ_CP": str(cp)}
    if meet is not None:
        env.update(MASTER_ADDR=meet, MASTER_PORT=str(run_port("run")))
    if omp is not None:
        env["OMP_NUM_THREADS"] = str(omp)
    return env


# --- PBS: Polaris, Aurora, Sunspot, Sophia ----------------------------------------------------


def test_polaris_all_nodes(tmp_path: Path) -> None:
    alloc = pbs(tmp_path, POLARIS, "1234567.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov")
    run_dir = tmp_path / "run"
    launch = launch_of(LaunchPlan(ppn=4, tp=2, command=CMD), alloc, run_dir, PY, which)
    env = sizes(tp=2, omp=8, meet=POLARIS[0])  # the nodefile already names the HSN
    assert list(launch.argv) == [
        PALS,
        "--envall",
        "--line-buffer",
        "--np=12",
        "--ppn=4",
        f"--hostfile={alloc.nodefile}",
        "--cpu-bind=depth",
        "--depth=8",
        *env_flags("--env", env),
        *capture(run_dir),
    ]
    assert launch.env == env
    assert launch.hostfile == Path(alloc.nodefile or "")
    assert launch.launcher == "mpiexec"
    assert not run_dir.exists()  # all nodes: PBS's own nodefile, nothing written


def test_polaris_subset_writes_a_filtered_hostfile(tmp_path: Path) -> None:
    alloc = pbs(tmp_path, POLARIS, "1234567.polaris-pbs-01")
    run_dir = tmp_path / "run"
    plan = LaunchPlan(nodes=1, exclude=("x3006c0s13b0n0",), ppn=2, command=CMD)
    launch = launch_of(plan, alloc, run_dir, PY, which)
    hostfile = run_dir / "hostfile"
    assert launch.hostfile == hostfile
    assert launch.hostfile_hosts == (POLARIS[1],)
    assert not run_dir.exists()  # the run store writes it when it records the launch
    assert list(launch.argv[:6]) == [
        PALS,
        "--envall",
        "--line-buffer",
        "--np=2",
        "--ppn=2",
        f"--hostfile={hostfile}",
    ]
    assert any("1 of 3 allocated hosts" in note for note in launch.notes)


def test_polaris_nodes_without_exclusion(tmp_path: Path) -> None:
    alloc = pbs(tmp_path, POLARIS, "1.polaris-pbs-01")
    launch = launch_of(LaunchPlan(nodes=2, command=CMD), alloc, tmp_path / "r", PY, which)
    assert launch.hostfile == tmp_path / "r" / "hostfile"
    assert list(launch.hostfile_hosts) == POLARIS[:2]
    assert "--np=8" in launch.argv


@pytest.mark.parametrize(
    ("hosts", "machine", "hsn"),
    [
        (AURORA, "Aurora", "x4102c5s2b0n0.hsn.cm.aurora.alcf.anl.gov"),
        (SUNSPOT, "Sunspot", "x1921c0s0b0n0.hsn.cm.sunspot.alcf.anl.gov"),
    ],
)
def test_intel_xpu_machines(tmp_path: Path, hosts: list[str], machine: str, hsn: str) -> None:
    alloc = pbs(tmp_path, hosts, "8765.pbs-0001")
    assert alloc.machine == machine
    run_dir = tmp_path / "run"
    plan = LaunchPlan(ppn=12, tp=2, pp=2, cp=3, command=CMD)
    launch = launch_of(plan, alloc, run_dir, PY, which)
    env = sizes(tp=2, pp=2, cp=3, omp=8, meet=hsn)  # eight cores per tile, as ezpz v0.26.1
    assert list(launch.argv) == [
        PALS,
        "--envall",
        "--line-buffer",
        "--np=24",
        "--ppn=12",
        f"--hostfile={alloc.nodefile}",
        f"--cpu-bind={INTEL_XPU_CPU_BIND}",
        *env_flags("--env", env),
        *capture(run_dir),
    ]
    assert launch.env == env


def test_aurora_excluding_a_host(tmp_path: Path) -> None:
    alloc = pbs(tmp_path, AURORA, "8765.aurora-pbs-0001")
    run_dir = tmp_path / "run"
    plan = LaunchPlan(exclude=(AURORA[0],), ppn=6, command=CMD)
    launch = launch_of(plan, alloc, run_dir, PY, which)
    assert launch.hostfile_hosts == (AURORA[1],)
    assert list(launch.argv[3:6]) == ["--np=6", "--ppn=6", f"--hostfile={run_dir / 'hostfile'}"]


def test_sophia_uses_open_mpi_mpirun(tmp_path: Path) -> None:
    alloc = pbs(tmp_path, SOPHIA, "99.sophia-pbs-01.lab.alcf.anl.gov")
    run_dir = tmp_path / "run"
    plan = LaunchPlan(ppn=8, env={"NCCL_DEBUG": "INFO"}, command=CMD)
    launch = launch_of(plan, alloc, run_dir, PY, which)
    env = {
        **sizes(),
        "NCCL_DEBUG": "INFO",
        "MASTER_ADDR": SOPHIA[0],  # its full name, as ezpz gives it
        "MASTER_PORT": str(run_port("run")),
        "OMP_NUM_THREADS": str(max(1, alloc.cpus_per_host // 8)),
    }
    assert launch.launcher == "mpirun"
    assert list(launch.argv) == [
        "/opt/openmpi/bin/mpirun",
        "-n",
        "16",
        "-N",
        "8",
        "--hostfile",
        str(alloc.nodefile),
        "-x",
        "PATH",
        "-x",
        "LD_LIBRARY_PATH",
        *env_flags("-x", env),
        *capture(run_dir),
    ]


def test_generic_pbs_cluster_gets_hydra_style(tmp_path: Path) -> None:
    alloc = pbs(tmp_path, ["node01", "node02"], "5.cluster")
    plan = LaunchPlan(ppn=2, command=CMD)
    launch = launch_of(plan, alloc, tmp_path / "r", PY, {"mpiexec": "/usr/bin/mpiexec"}.get)
    assert list(launch.argv[:7]) == [
        "/usr/bin/mpiexec",
        "-f",
        str(alloc.nodefile),
        "-n",
        "4",
        "-ppn",
        "2",
    ]
    assert list(launch.argv[7:10]) == ["-genv", "EZPZ_TP", "1"]


# --- Slurm: Perlmutter, Frontier -------------------------------------------------------------


def test_perlmutter_all_nodes(tmp_path: Path) -> None:
    alloc = perlmutter()
    run_dir = tmp_path / "run"
    launch = launch_of(LaunchPlan(ppn=4, tp=4, command=CMD), alloc, run_dir, PY, which)
    assert launch.launcher == "srun"
    assert list(launch.argv) == [
        "/usr/bin/srun",
        "-u",
        "--verbose",
        "-N3",
        "-n12",
        "--ntasks-per-node=4",
        "--nodelist=nid001140,nid001141,nid001144",
        "--mpi=pmi2",
        "--disable-status",
        "--kill-on-bad-exit=1",
        "--cpus-per-task=32",
        "--gpus-per-node=4",
        "--export=ALL,EZPZ_TP=4,EZPZ_PP=1,EZPZ_CP=1,MASTER_ADDR=nid001140,"
        f"MASTER_PORT={run_port('run')},OMP_NUM_THREADS=32",
        *capture(run_dir),
    ]
    assert launch.hostfile is None
    assert launch.env == sizes(tp=4, omp=32, meet="nid001140")


def test_perlmutter_subset_names_its_nodes(tmp_path: Path) -> None:
    alloc = perlmutter()
    plan = LaunchPlan(nodes=1, exclude=("nid001140",), ppn=2, command=CMD)
    launch = launch_of(plan, alloc, tmp_path / "run", PY, which)
    assert list(launch.argv[3:12]) == [
        "-N1",
        "-n2",
        "--ntasks-per-node=2",
        "--nodelist=nid001141",
        "--mpi=pmi2",
        "--disable-status",
        "--kill-on-bad-exit=1",
        "--cpus-per-task=64",
        "--gpus-per-node=4",
    ]


def test_frontier(tmp_path: Path) -> None:
    alloc = frontier()
    run_dir = tmp_path / "run"
    plan = LaunchPlan(ppn=8, pp=2, env={"OMP_NUM_THREADS": "7"}, command=CMD)
    launch = launch_of(plan, alloc, run_dir, PY, which)
    assert list(launch.argv) == [
        "/usr/bin/srun",
        "-u",
        "--verbose",
        "-N3",
        "-n24",
        "--ntasks-per-node=8",
        "--nodelist=frontier00001,frontier00002,frontier00010",
        "--mpi=pmi2",
        "--disable-status",
        "--kill-on-bad-exit=1",
        "--cpus-per-task=14",
        "--gpus-per-node=8",
        "--export=ALL,EZPZ_TP=1,EZPZ_PP=2,EZPZ_CP=1,OMP_NUM_THREADS=7,"
        f"MASTER_ADDR=frontier00001,MASTER_PORT={run_port('run')}",
        *capture(run_dir),
    ]


def test_srun_reads_a_long_node_list_from_a_file(tmp_path: Path) -> None:
    env = {
        "SLURM_JOB_ID": "1",
        "SLURM_JOB_NODELIST": "nid[000001-000300]",
        "NERSC_HOST": "perlmutter",
    }
    env["SLURM_GPUS_ON_NODE"] = "4"
    alloc = detect_allocation(env, probe=False)
    run_dir = tmp_path / "run"
    launch = launch_of(LaunchPlan(nodes=299, command=CMD), alloc, run_dir, PY, which)
    hostfile = run_dir / "hostfile"
    assert f"--nodelist={hostfile}" in launch.argv
    assert list(launch.hostfile_hosts) == [f"nid{i:06d}" for i in range(1, 300)]


def test_srun_values_with_commas_stay_out_of_export(tmp_path: Path) -> None:
    plan = LaunchPlan(env={"NCCL_SOCKET_IFNAME": "hsn0,hsn1"}, command=CMD)
    launch = launch_of(plan, perlmutter(), tmp_path / "r", PY, which)
    export = next(a for a in launch.argv if a.startswith("--export="))
    assert "NCCL_SOCKET_IFNAME" not in export
    assert launch.env["NCCL_SOCKET_IFNAME"] == "hsn0,hsn1"
    assert any("commas" in note for note in launch.notes)


# --- torchrun ---------------------------------------------------------------------------------


def test_torchrun_on_perlmutter_runs_one_per_node(tmp_path: Path) -> None:
    run_dir = tmp_path / "20261122-103105-tp1pp1cp1"
    plan = LaunchPlan(ppn=4, launcher="torchrun", command=CMD)
    launch = launch_of(plan, perlmutter(), run_dir, PY, which)
    assert launch.launcher == "torchrun"
    assert list(launch.argv) == [
        "/usr/bin/srun",
        "-u",
        "--verbose",
        "-N3",
        "-n3",
        "--ntasks-per-node=1",
        "--nodelist=nid001140,nid001141,nid001144",
        "--mpi=pmi2",
        "--disable-status",
        "--kill-on-bad-exit=1",
        "--cpus-per-task=128",
        "--gpus-per-node=4",
        "--export=ALL,EZPZ_TP=1,EZPZ_PP=1,EZPZ_CP=1,OMP_NUM_THREADS=32",
        PY,
        "-m",
        "torch.distributed.run",
        "--nnodes",
        "3",
        "--nproc-per-node",
        "4",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"nid001140:{run_port(run_dir.name)}",
        "--rdzv-id",
        run_dir.name,
        *capture(run_dir)[1:],
    ]


def test_torchrun_on_polaris_is_not_cpu_bound(tmp_path: Path) -> None:
    alloc = pbs(tmp_path, POLARIS, "1.polaris-pbs-01")
    run_dir = tmp_path / "run"
    # A port the user chose is the rendezvous port, never replaced.
    env = {"MASTER_PORT": "29600"}
    plan = LaunchPlan(nodes=2, ppn=4, launcher="torchrun", env=env, command=CMD)
    launch = launch_of(plan, alloc, run_dir, PY, which)
    omp = max(1, alloc.cpus_per_host // 4)
    assert list(launch.argv[:7]) == [
        PALS,
        "--envall",
        "--line-buffer",
        "--np=2",
        "--ppn=1",
        f"--hostfile={run_dir / 'hostfile'}",
        "--cpu-bind=none",
    ]
    assert list(launch.argv[7:17]) == env_flags("--env", {**sizes(), **env, **sizes(omp=omp)})
    assert f"{POLARIS[0]}:29600" in launch.argv


# --- no scheduler -----------------------------------------------------------------------------


def local_alloc() -> Allocation:
    return detect_allocation({}, probe=False, host="laptop")


def test_local_uses_the_venv_mpiexec(tmp_path: Path) -> None:
    alloc = local_alloc()
    run_dir = tmp_path / "run"
    venv_bin = Path(sys.executable).parent
    assert (venv_bin / "mpiexec.hydra").exists(), "the test venv has the mpich wheel"
    plan = LaunchPlan(ppn=2, command=CMD)
    launch = launch_of(plan, alloc, run_dir, sys.executable, which, this_host="laptop")
    omp = str(max(1, alloc.cpus_per_host // 2))
    assert list(launch.argv) == [
        str(venv_bin / "mpiexec"),
        "-rmk",
        "user",
        "-n",
        "2",
        "-ppn",
        "2",
        "-genv",
        "EZPZ_TP",
        "1",
        "-genv",
        "EZPZ_PP",
        "1",
        "-genv",
        "EZPZ_CP",
        "1",
        "-genv",
        "MASTER_ADDR",
        "127.0.0.1",  # every rank on this host
        "-genv",
        "MASTER_PORT",
        str(run_port("run")),
        "-genv",
        "OMP_NUM_THREADS",
        omp,
        *capture(run_dir, python=sys.executable),
    ]
    assert launch.hostfile is None
    assert not run_dir.exists()


def test_local_mpirun_from_the_mpich_wheel_is_still_hydra(tmp_path: Path) -> None:
    plan = LaunchPlan(ppn=2, launcher="mpirun", command=CMD)
    launch = launch_of(plan, local_alloc(), tmp_path, sys.executable, which)
    assert list(launch.argv[:3]) == [str(Path(sys.executable).parent / "mpirun"), "-rmk", "user"]


def test_local_torchrun_is_standalone(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    plan = LaunchPlan(ppn=2, launcher="torchrun", command=CMD)
    launch = launch_of(plan, local_alloc(), run_dir, PY, which)
    assert list(launch.argv) == [
        PY,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nnodes",
        "1",
        "--nproc-per-node",
        "2",
        *capture(run_dir)[1:],
    ]


def test_launcher_kind_for_auto() -> None:
    assert detect_launcher_kind(perlmutter(), which) == "srun"
    # On a job, auto is the machine's launcher even where this node lacks it (then a problem).
    assert detect_launcher_kind(perlmutter(), lambda name: None, PY) == "srun"
    assert detect_launcher_kind(local_alloc(), lambda name: None, sys.executable) == "mpiexec"
    assert detect_launcher_kind(local_alloc(), lambda name: None, PY) == "torchrun"
    only_mpirun = {"mpirun": "/usr/bin/mpirun"}.get
    assert detect_launcher_kind(local_alloc(), only_mpirun, PY) == "mpirun"


def test_sophia_auto_is_mpirun(tmp_path: Path) -> None:
    assert detect_launcher_kind(pbs(tmp_path, SOPHIA, "1.sophia"), which) == "mpirun"


def test_invalid_plan_is_refused_with_every_reason(tmp_path: Path) -> None:
    with pytest.raises(LaunchRefused) as info:
        launch_of(LaunchPlan(ppn=3, tp=2, command=()), local_alloc(), tmp_path, PY, which)
    assert str(info.value) == (
        "World size 3 is not divisible by tp*pp*cp = 2. "
        "The command is empty: give the program to run, e.g. python train.py."
    )
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("launcher", "needle"),
    [
        ("auto", "The launcher for this PBS job is mpiexec, which is not on PATH on this node"),
        ("mpiexec", "mpiexec is not on PATH on this node"),
        ("torchrun", "torchrun needs mpiexec to start one torchrun per node, and mpiexec is not"),
    ],
)
def test_a_launcher_missing_from_this_node_is_an_error(
    tmp_path: Path, launcher: str, needle: str
) -> None:
    """Never a silent fallback to torchrun, nor a bare ``mpiexec`` that fails when started."""
    alloc = pbs(tmp_path, POLARIS, "1.polaris-pbs-01")
    plan = LaunchPlan(launcher=launcher, command=CMD)
    nowhere: Which = lambda _name: None  # noqa: E731
    with pytest.raises(LaunchRefused) as info:
        launch_of(plan, alloc, tmp_path, PY, nowhere)
    [problem] = info.value.problems
    assert (problem.level, problem.field) == ("error", "launcher")
    assert problem.message.startswith(needle)
    assert "module load cray-pals" in problem.message  # the remedy
    # check() lists it beside the plan's own problems, so the form and --dry-run show them all.
    bad = plan.with_changes(tp=5)
    with pytest.raises(LaunchRefused) as both:
        check(bad, alloc, lambda p: launcher_problems(p, alloc, nowhere, PY))
    assert [p.field for p in both.value.problems] == ["sizes", "launcher"]


def test_a_launcher_that_cannot_work_here_is_reported_once(tmp_path: Path) -> None:
    alloc = pbs(tmp_path, POLARIS, "1.polaris-pbs-01")
    plan = LaunchPlan(launcher="srun", command=CMD)
    with pytest.raises(LaunchRefused) as info:
        check(plan, alloc, lambda p: launcher_problems(p, alloc, lambda _name: None, PY))
    assert [p.message for p in info.value.problems] == [
        "srun needs a Slurm allocation, but this is PBS."
    ]


def test_without_a_scheduler_auto_is_torchrun_when_no_mpi_is_here(tmp_path: Path) -> None:
    plan = LaunchPlan(ppn=2, command=CMD)
    assert launcher_problems(plan, local_alloc(), lambda _name: None, PY) == []
    assert launch_of(plan, local_alloc(), tmp_path, PY, lambda _: None).launcher == "torchrun"


# --- the plan's own launcher flags -----------------------------------------------------------


def test_launcher_flags_go_before_the_program_on_every_launcher(tmp_path: Path) -> None:
    flags = ("--cpu-bind=none", "--label")
    cases = [
        (pbs(tmp_path, AURORA, "8765.aurora-pbs-0001"), PALS),
        (pbs(tmp_path, POLARIS, "1.polaris-pbs-01"), PALS),
        (perlmutter(), "/usr/bin/srun"),
    ]
    for alloc, binary in cases:
        run_dir = tmp_path / "run"
        launch = launch_of(LaunchPlan(launcher_args=flags, command=CMD), alloc, run_dir, PY, which)
        argv = list(launch.argv)
        assert argv[0] == binary
        program = argv.index(PY)
        assert argv[program - 2 : program] == list(flags), argv
        assert argv[program:] == capture(run_dir)
        assert argv.count("--cpu-bind=none") == 1


@pytest.mark.parametrize(
    "flags",
    [("--cpu-bind=none",), ("--cpu-bind", "none")],
)
def test_a_user_flag_replaces_the_machine_default_of_the_same_name(
    tmp_path: Path, flags: tuple[str, ...]
) -> None:
    alloc = pbs(tmp_path, AURORA, "8765.aurora-pbs-0001")
    plan = LaunchPlan(ppn=12, launcher_args=flags, command=CMD)
    launch = launch_of(plan, alloc, tmp_path / "run", PY, which)
    head = list(launch.argv[: launch.argv.index(PY)])
    assert not [a for a in head if a.startswith("--cpu-bind=") and a != "--cpu-bind=none"]
    assert head[-len(flags) :] == list(flags)
    # Without the default binding, the ranks share the node's CPUs, and the preview says so.
    omp = str(max(1, alloc.cpus_per_host // 12))
    assert launch.env["OMP_NUM_THREADS"] == omp
    assert any(
        note.startswith(f"Your launcher flags replace the default --cpu-bind={INTEL_XPU_CPU_BIND}")
        and f"OMP_NUM_THREADS={omp}" in note
        for note in launch.notes
    ), launch.notes


def test_polaris_depth_is_replaced_by_its_short_spelling(tmp_path: Path) -> None:
    alloc = pbs(tmp_path, POLARIS, "1.polaris-pbs-01")
    plan = LaunchPlan(ppn=4, launcher_args=("-d", "16"), command=CMD)
    head = list(launch_of(plan, alloc, tmp_path / "run", PY, which).argv)
    assert "--cpu-bind=depth" in head and "--depth=8" not in head
    assert head[head.index(PY) - 2 : head.index(PY)] == ["-d", "16"]


def test_aurora_default_has_no_no_vni_and_daos_users_add_it(tmp_path: Path) -> None:
    alloc = pbs(tmp_path, AURORA, "8765.aurora-pbs-0001")
    default = launch_of(LaunchPlan(command=CMD), alloc, tmp_path / "a", PY, which)
    assert "--no-vni" not in default.argv
    daos = LaunchPlan(launcher_args=("--no-vni",), command=CMD)
    launch = launch_of(daos, alloc, tmp_path / "b", PY, which)
    assert launch.argv.count("--no-vni") == 1
    assert f"--cpu-bind={INTEL_XPU_CPU_BIND}" in launch.argv  # nothing replaced
    assert launch.env["OMP_NUM_THREADS"] == "8"


def test_sophia_meets_on_the_first_host_by_its_full_name(tmp_path: Path) -> None:
    """A nodefile of short names, as a job's hostname gives them: MASTER_ADDR gets the
    ``.lab.alcf.anl.gov`` domain ezpz gives it, which the other nodes resolve."""
    alloc = pbs(tmp_path, [h.split(".")[0] for h in SOPHIA], "99.sophia-pbs-01.lab.alcf.anl.gov")
    assert alloc.machine == "Sophia"
    launch = launch_of(LaunchPlan(ppn=8, command=CMD), alloc, tmp_path / "run", PY, which)
    assert launch.env["MASTER_ADDR"] == "sophia-gpu-07.lab.alcf.anl.gov"
    assert launch.rendezvous is not None and launch.rendezvous.why.startswith(
        "first host by its full name;"
    )


@pytest.mark.parametrize(
    ("hosts", "job", "default"),
    [
        (AURORA, "8765.aurora-pbs-0001", (f"--cpu-bind={INTEL_XPU_CPU_BIND}",)),
        (POLARIS, "1.polaris-pbs-01", ("--cpu-bind=depth", "--depth=8")),
    ],
)
def test_cpu_bind_in_the_environment_is_the_binding(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    hosts: list[str],
    job: str,
    default: tuple[str, ...],
) -> None:
    """As ezpz: CPU_BIND (a leading ``--cpu-bind=`` dropped) replaces the machine's binding,
    ``--depth`` included; an empty one leaves the default; a launcher flag still wins."""
    alloc = pbs(tmp_path, hosts, job)
    plan = LaunchPlan(ppn=4, command=CMD)

    def binding() -> tuple[list[str], Launch]:
        launch = launch_of(plan, alloc, tmp_path / "run", PY, which)
        head = list(launch.argv[: launch.argv.index(PY)])
        return [a for a in head if a.startswith(("--cpu-bind", "--depth"))], launch

    monkeypatch.setenv("CPU_BIND", " --cpu-bind=list:2-4:10-12:18-20:26-28 ")
    bound, launch = binding()
    assert bound == ["--cpu-bind=list:2-4:10-12:18-20:26-28"]
    assert launch.env["OMP_NUM_THREADS"] == str(max(1, alloc.cpus_per_host // 4))
    assert "--cpu-bind=list:2-4:10-12:18-20:26-28: from CPU_BIND in the environment." in (
        launch.notes
    )
    monkeypatch.setenv("CPU_BIND", " ")
    assert binding()[0] == list(default)
    monkeypatch.setenv("CPU_BIND", "depth")
    plan = plan.with_changes(launcher_args=("--cpu-bind=none",))
    assert binding()[0] == ["--cpu-bind=none"]


def test_srun_gets_the_cpu_bind_of_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CPU_BIND", "cores")
    launch = launch_of(LaunchPlan(ppn=4, command=CMD), perlmutter(), tmp_path / "run", PY, which)
    head = list(launch.argv[: launch.argv.index(PY)])
    assert [a for a in head if a.startswith("--cpu-bind")] == ["--cpu-bind=cores"]
    monkeypatch.setenv("CPU_BIND", "")
    launch = launch_of(LaunchPlan(ppn=4, command=CMD), perlmutter(), tmp_path / "run", PY, which)
    assert not [a for a in launch.argv if a.startswith("--cpu-bind")]


def test_a_local_hydra_is_not_given_cpu_bind_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CPU_BIND", "cores")
    plan = LaunchPlan(ppn=2, command=CMD)
    launch = launch_of(plan, local_alloc(), tmp_path / "run", sys.executable, which, "laptop")
    assert not [a for a in launch.argv if "cpu-bind" in a]
    assert any(n.startswith("CPU_BIND=cores is not passed on: mpiexec") for n in launch.notes)


@pytest.mark.parametrize(
    ("alloc_of", "flags", "named"),
    [
        (lambda tmp: pbs(tmp, POLARIS, "1.polaris-pbs-01"), ("--np=4", "--label"), ["--np=4"]),
        (
            lambda tmp: perlmutter(),
            ("-N", "1", "--nodelist=nid001140"),
            ["-N", "--nodelist=nid001140"],
        ),
        (lambda tmp: local_alloc(), ("-ppn", "1"), ["-ppn"]),
    ],
)
def test_a_flag_may_not_answer_what_the_plan_answers(
    tmp_path: Path, alloc_of: Callable[[Path], Allocation], flags: tuple[str, ...], named: list[str]
) -> None:
    """Ranks and hosts come from the form: a flag that set them would make the run's records
    (world size, hostfile, one status per rank) disagree with what ran."""
    alloc = alloc_of(tmp_path)
    plan = LaunchPlan(ppn=2, launcher_args=flags, command=CMD)
    problems = launcher_problems(plan, alloc, which, sys.executable)
    assert [(p.level, p.field) for p in problems] == [("error", "launcher_args")] * len(named)
    for problem, flag in zip(problems, named, strict=True):
        assert problem.message.startswith(f"{flag} is set from the plan's nodes, ranks per node")


def test_torchrun_gets_the_flags_after_its_own(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    plan = LaunchPlan(ppn=2, launcher="torchrun", launcher_args=("--max-restarts=1",), command=CMD)
    argv = list(launch_of(plan, local_alloc(), run_dir, PY, which).argv)
    assert argv[argv.index("-m", 3) - 1] == "--max-restarts=1"
    assert argv[argv.index("--max-restarts=1") + 1 :] == capture(run_dir)[1:]


def test_format_argv_quotes_for_a_shell() -> None:
    assert format_argv(["python", "-c", "print('hi there')"]) == (
        "python -c 'print('\"'\"'hi there'\"'\"')'"
    )


# --- real launches on this machine -------------------------------------------------------------


def _run(argv: list[str], env_extra: dict[str, str], run_dir: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    env.update(env_extra)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    statuses = sorted((run_dir / "status").glob("b0000/rank-*.json"))
    assert [json.loads(p.read_text())["state"] for p in statuses] == ["succeeded"] * 2


PRINT_ENV = (
    sys.executable,
    "-c",
    "import os; print(os.environ['EZPZ_TP'], os.environ['EZPZ_CP'], os.environ['OMP_NUM_THREADS'])",
)


@pytest.mark.mpi
def test_local_mpiexec_really_starts_two_ranks(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (tmp_path / "stray_nodefile").write_text("elsewhere1\nelsewhere2\n")
    plan = LaunchPlan(ppn=2, tp=2, cp=1, env={"OMP_NUM_THREADS": "1"}, command=PRINT_ENV)
    launch = launch_of(plan, local_alloc(), run_dir, sys.executable)
    # -rmk user keeps the mpich wheel's mpiexec from following a stray PBS_NODEFILE
    _run(launch.argv, {**launch.env, "PBS_NODEFILE": str(tmp_path / "stray_nodefile")}, run_dir)
    for rank in (0, 1):
        assert (run_dir / "logs" / "b0000" / f"rank-{rank:05d}.log").read_text() == "2 1 1\n"


def test_local_torchrun_really_starts_two_ranks(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    plan = LaunchPlan(ppn=2, cp=2, launcher="torchrun", command=PRINT_ENV)
    launch = launch_of(plan, local_alloc(), run_dir, sys.executable)
    _run(launch.argv, launch.env, run_dir)
    omp = launch.env["OMP_NUM_THREADS"]
    for rank in (0, 1):
        assert (run_dir / "logs" / "b0000" / f"rank-{rank:05d}.log").read_text() == f"1 2 {omp}\n"
