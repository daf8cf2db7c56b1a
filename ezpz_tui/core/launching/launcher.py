"""The launcher command line for a plan on an allocation, per scheduler and machine.

Follows what ezpz does (``src/ezpz/pbs.py: get_pbs_launch_cmd``, ``src/ezpz/slurm.py:
build_launch_cmd``):

- Aurora, Sunspot: ``mpiexec --envall --line-buffer --np=N --ppn=P --hostfile=F --no-vni
  --cpu-bind=verbose,list:2-4:10-12:...`` (PALS);
- Polaris (and Sirius): the same without ``--no-vni``, bound with ``--cpu-bind=depth --depth=8``;
- Sophia: Open MPI's ``mpirun -n N -N P --hostfile F -x PATH -x LD_LIBRARY_PATH``;
- Slurm (Perlmutter, Frontier): ``srun -u --verbose -NN -nR``;
- no scheduler: the MPICH ``mpiexec`` next to this Python (the PyPI wheel) or on PATH.

and adds what ezpz lacks: a node subset gets its own hostfile (``RUN_DIR/hostfile``) and srun an
explicit ``--nodelist``; srun always gets ``--mpi=pmi2`` (pmix is not loadable with the PyPI
mpich wheel, and without PMI every rank is an MPI world of 1), ``--ntasks-per-node`` and
``--cpus-per-task`` so ranks are not all pinned to one core; a local Hydra gets ``-rmk user`` so
a stray ``PBS_NODEFILE`` cannot send ranks to other hosts. Every launcher sets the sizes
(``EZPZ_TP``/``EZPZ_PP``/``EZPZ_CP``) and ``OMP_NUM_THREADS`` (which mpiexec and srun leave
unset) for every rank, remote ones included, in the launcher's own syntax.

Nothing here starts a process; the only side effect is writing the hostfile into the run
directory.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import LaunchPlan, validate
from runtime.env import SIZE_VARS

Which = Callable[[str], str | None]

PALS_MACHINES = frozenset({"Aurora", "Sunspot", "Polaris", "Sirius"})
INTEL_XPU_MACHINES = frozenset({"Aurora", "Sunspot"})
# ezpz's binding for the 12 XPU tiles of an Aurora/Sunspot node: 3 cores per rank, skipping the
# cores the OS and the network use.
INTEL_XPU_CPU_BIND = "list:2-4:10-12:18-20:26-28:34-36:42-44:54-56:62-64:70-72:78-80:86-88:94-96"
INTEL_XPU_CORES_PER_RANK = 3
POLARIS_DEPTH = 8
# PALS prints each rank's binding with "verbose"; ezpz drops it from 1024 ranks on.
VERBOSE_BIND_MAX_RANKS = 1024
# Past this many hosts srun reads the node list from a file rather than one huge argument.
SRUN_INLINE_NODELIST_MAX = 256
DEFAULT_RDZV_PORT = 29500


@dataclass(frozen=True)
class LaunchCommand:
    """What the supervisor runs: argv, env additions for the launcher, and why it looks so."""

    argv: list[str]
    env: dict[str, str]  # additions/overrides to the launcher's environment only
    hostfile: Path | None
    launcher: str
    notes: list[str]


def _local_binary(name: str, python: str, which: Which) -> str | None:
    """The launcher next to this Python (a venv's mpich wheel) first, then PATH."""
    sibling = Path(python).parent / name
    if sibling.is_file():
        return str(sibling)
    return which(name)


def detect_launcher_kind(
    alloc: Allocation, which: Which = shutil.which, python: str = sys.executable
) -> str:
    """What ``launcher = "auto"`` means here: srun in Slurm, mpirun on Sophia, else mpiexec."""
    if alloc.scheduler == "SLURM" and which("srun"):
        return "srun"
    if alloc.machine == "Sophia":
        return "mpirun"
    for kind in ("mpiexec", "mpirun"):
        found = which(kind) if alloc.scheduler != "none" else _local_binary(kind, python, which)
        if found:
            return kind
    return "torchrun"


def _is_hydra(binary: str) -> bool:
    """MPICH's Hydra, told apart by the ``mpiexec.hydra`` it is installed beside."""
    path = Path(binary)
    return path.is_absolute() and (
        path.name == "mpiexec.hydra" or (path.parent / "mpiexec.hydra").exists()
    )


def _mpi_flavour(kind: str, binary: str, alloc: Allocation) -> str:
    """``pals`` (HPE Cray PALS on ALCF), ``hydra`` (MPICH) or ``openmpi``: their flags differ."""
    if _is_hydra(binary):
        return "hydra"
    if kind == "mpiexec" and alloc.scheduler == "PBS" and alloc.machine in PALS_MACHINES:
        return "pals"
    return "openmpi" if kind == "mpirun" else "hydra"


def _hostfile(alloc: Allocation, hosts: Sequence[str], run_dir: Path, notes: list[str]) -> Path:
    """PBS's own nodefile when every host is used (as ezpz does), else a filtered copy."""
    if alloc.nodefile and tuple(hosts) == alloc.hosts:
        return Path(alloc.nodefile)
    path = run_dir / "hostfile"
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{host}\n" for host in hosts))
    if tuple(hosts) != alloc.hosts:
        notes.append(
            f"Using {len(hosts)} of {len(alloc.hosts)} allocated hosts: {path} lists them."
        )
    else:
        notes.append(f"{path} lists the allocated hosts for the launcher.")
    return path


def _threads(cpus: int, per_node: int) -> int:
    return max(1, cpus // max(per_node, 1))


def _mpi_argv(
    kind: str,
    binary: str,
    alloc: Allocation,
    hosts: Sequence[str],
    per_node: int,
    run_dir: Path,
    env: dict[str, str],
    program: list[str],
    notes: list[str],
    bind: bool,
) -> tuple[list[str], Path | None]:
    """mpiexec/mpirun argv; ``env`` gains OMP_NUM_THREADS to match the CPU binding."""
    flavour = _mpi_flavour(kind, binary, alloc)
    world = len(hosts) * per_node
    hostfile = _hostfile(alloc, hosts, run_dir, notes) if alloc.scheduler != "none" else None
    if flavour == "pals":
        argv = [binary, "--envall", "--line-buffer", f"--np={world}", f"--ppn={per_node}"]
        argv.append(f"--hostfile={hostfile}")
        threads = _threads(alloc.cpus_per_host, per_node)
        if alloc.machine in INTEL_XPU_MACHINES:
            argv.append("--no-vni")
        if not bind:
            argv.append("--cpu-bind=none")
        elif alloc.machine in INTEL_XPU_MACHINES:
            verbose = "verbose," if world < VERBOSE_BIND_MAX_RANKS else ""
            argv.append(f"--cpu-bind={verbose}{INTEL_XPU_CPU_BIND}")
            threads = INTEL_XPU_CORES_PER_RANK
        else:
            argv += ["--cpu-bind=depth", f"--depth={POLARIS_DEPTH}"]
            threads = POLARIS_DEPTH
        env.setdefault("OMP_NUM_THREADS", str(threads))
        for key, value in env.items():
            argv += ["--env", f"{key}={value}"]
    elif flavour == "hydra":
        argv = [binary, *(["-f", str(hostfile)] if hostfile else ["-rmk", "user"])]
        argv += ["-n", str(world), "-ppn", str(per_node)]
        env.setdefault("OMP_NUM_THREADS", str(_threads(alloc.cpus_per_host, per_node)))
        for key, value in env.items():
            argv += ["-genv", key, value]
    else:
        argv = [binary, "-n", str(world), "-N", str(per_node)]
        argv += ["--hostfile", str(hostfile)] if hostfile else []
        argv += ["-x", "PATH", "-x", "LD_LIBRARY_PATH"]
        env.setdefault("OMP_NUM_THREADS", str(_threads(alloc.cpus_per_host, per_node)))
        for key, value in env.items():
            argv += ["-x", f"{key}={value}"]
    return argv + program, hostfile


def _srun_argv(
    binary: str,
    alloc: Allocation,
    hosts: Sequence[str],
    per_node: int,
    run_dir: Path,
    env: dict[str, str],
    program: list[str],
    notes: list[str],
) -> tuple[list[str], Path | None]:
    """srun argv; the step's CPUs are split evenly among the tasks of a node."""
    cpus_per_task = _threads(alloc.cpus_per_host, per_node)
    hostfile = None
    if len(hosts) > SRUN_INLINE_NODELIST_MAX:
        hostfile = _hostfile(alloc, hosts, run_dir, notes)
        nodelist = str(hostfile)
    else:
        nodelist = ",".join(hosts)
        if tuple(hosts) != alloc.hosts:
            notes.append(f"Using {len(hosts)} of {len(alloc.hosts)} allocated hosts.")
    argv = [binary, "-u", "--verbose", f"-N{len(hosts)}", f"-n{len(hosts) * per_node}"]
    argv += [f"--ntasks-per-node={per_node}", f"--nodelist={nodelist}", "--mpi=pmi2"]
    # A stop's SIGINT goes straight to the ranks (not a status print), and one rank dying ends
    # the step instead of leaving its peers waiting in a collective until the walltime ends.
    argv += ["--disable-status", "--kill-on-bad-exit=1"]
    argv.append(f"--cpus-per-task={cpus_per_task}")
    if per_node > alloc.cpus_per_host:
        # More tasks than the job has CPUs on a node: srun refuses the step ("More processors
        # requested than permitted") unless the tasks may share CPUs.
        argv.append("--overcommit")
        notes.append(
            f"{per_node} ranks per node on {alloc.cpus_per_host} allocated CPUs: "
            "srun --overcommit lets them share."
        )
    if alloc.accelerator_kind in ("cuda", "rocm"):
        argv.append(f"--gpus-per-node={alloc.accelerators_per_host}")
    env.setdefault("OMP_NUM_THREADS", str(cpus_per_task))
    exported = [f"{k}={v}" for k, v in env.items() if "," not in v]
    if len(exported) < len(env):
        notes.append("Values with commas reach the ranks through srun's inherited environment.")
    argv.append("--export=" + ",".join(["ALL", *exported]))
    return argv + program, hostfile


def _rank_env(plan: LaunchPlan) -> dict[str, str]:
    env = {SIZE_VARS[name]: str(getattr(plan, name)) for name in ("tp", "pp", "cp")}
    env.update(plan.env_dict())
    return env


def build_launch(
    plan: LaunchPlan,
    alloc: Allocation,
    run_dir: Path,
    python: str = sys.executable,
    which: Which = shutil.which,
    rdzv_port: int = DEFAULT_RDZV_PORT,
) -> LaunchCommand:
    """The launch of ``plan`` into ``run_dir``; ``ValueError`` lists every error in the plan.

    ``which`` finds launchers (tests pass their own); ``rdzv_port`` is torchrun's multi-node
    rendezvous port on the first host.
    """
    errors = [p.message for p in validate(plan, alloc) if p.level == "error"]
    if errors:
        raise ValueError("The plan cannot be launched: " + " ".join(errors))
    run_dir = Path(run_dir).absolute()
    kind = plan.launcher
    if kind == "auto":
        kind = detect_launcher_kind(alloc, which, python)
    hosts = plan.hosts_used(alloc)
    ppn = plan.ranks_per_node(alloc)
    env = _rank_env(plan)
    notes: list[str] = []
    capture = ["-m", "runtime.capture", "--run-dir", str(run_dir), "--", *plan.command]

    if kind == "torchrun":
        program = [python, "-m", "torch.distributed.run"]
        if alloc.scheduler == "none":
            program += ["--standalone", "--nnodes", "1", "--nproc-per-node", str(ppn)]
            env.setdefault("OMP_NUM_THREADS", str(_threads(alloc.cpus_per_host, ppn)))
            return LaunchCommand(program + capture, env, None, "torchrun", notes)
        program += ["--nnodes", str(len(hosts)), "--nproc-per-node", str(ppn)]
        program += ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"{hosts[0]}:{rdzv_port}"]
        program += ["--rdzv-id", run_dir.name, *capture]
        # torchrun starts the ranks of one node; a per-node launcher starts one torchrun each.
        env.setdefault("OMP_NUM_THREADS", str(_threads(alloc.cpus_per_host, ppn)))
        if alloc.scheduler == "SLURM" and which("srun"):
            notes.append("srun starts one torchrun per node; torchrun starts that node's ranks.")
            argv, hostfile = _srun_argv(
                which("srun") or "srun", alloc, hosts, 1, run_dir, env, program, notes
            )
        else:
            wrapper = "mpirun" if alloc.machine == "Sophia" else "mpiexec"
            notes.append(f"{wrapper} starts one torchrun per node; torchrun starts its ranks.")
            binary = which(wrapper) or wrapper
            argv, hostfile = _mpi_argv(
                wrapper, binary, alloc, hosts, 1, run_dir, env, program, notes, bind=False
            )
        return LaunchCommand(argv, env, hostfile, "torchrun", notes)

    program = [python, *capture]
    if kind == "srun":
        argv, hostfile = _srun_argv(
            which("srun") or "srun", alloc, hosts, ppn, run_dir, env, program, notes
        )
        return LaunchCommand(argv, env, hostfile, kind, notes)
    local = alloc.scheduler == "none"
    binary = _local_binary(kind, python, which) if local else which(kind)
    if binary is None:
        notes.append(f"{kind} is not on PATH here; load the module that provides it.")
    argv, hostfile = _mpi_argv(
        kind, binary or kind, alloc, hosts, ppn, run_dir, env, program, notes, bind=True
    )
    return LaunchCommand(argv, env, hostfile, kind, notes)


def format_argv(argv: Sequence[str]) -> str:
    """The argv as one line a person can paste into a shell (for the preview only)."""
    return shlex.join(argv)
