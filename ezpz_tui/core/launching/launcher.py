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

The MPI families (PALS, Hydra, Open MPI) ask for the same things in different words, so one
builder serves them all from a table of their spellings (:data:`_MPI_STYLES`); srun has its own.
Building a launch starts nothing and writes nothing: a :class:`Launch` is a value, which the run
store records (writing the hostfile it names) and the supervisor starts.
"""

from __future__ import annotations

import shlex
import shutil
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import CheckedPlan, LaunchPlan
from ezpz_tui.core.launching.rendezvous import (
    PortFree,
    Rendezvous,
    choose,
    contract_note,
    port_free,
    same_name,
)
from runtime.env import SIZE_VARS
from runtime.rundir import RunDir

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


@dataclass(frozen=True)
class LaunchConfig:
    """What building a launch takes from this machine: the Python the ranks run, how launchers
    are found, this host's name and whether a port is free here (tests pass their own)."""

    python: str = sys.executable
    which: Which = shutil.which
    this_host: str = field(default_factory=socket.gethostname)
    port_free: PortFree = port_free
    address: Callable[[str], str] = same_name  # how a host is reached (Slurm's NodeAddr)


@dataclass(frozen=True)
class Launch:
    """One launch, decided before anything starts: what the supervisor runs and the run store
    records. ``env`` holds additions to the launcher's environment only; ``hostfile_hosts``
    is what the run's own hostfile lists (empty when the scheduler's nodefile is used as is)."""

    run_dir: Path
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    launcher: str = ""
    hostfile: Path | None = None
    hostfile_hosts: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    cwd: Path | None = None
    rendezvous: Rendezvous | None = None  # None: torchrun --standalone picks its own
    world_size: int | None = None  # ranks the launcher starts: each should write a status


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


def _threads(cpus: int, per_node: int) -> int:
    return max(1, cpus // max(per_node, 1))


@dataclass
class _Step:
    """One launcher invocation being put together: where, how many per node, what each runs."""

    alloc: Allocation
    hosts: tuple[str, ...]
    per_node: int
    run_dir: Path
    env: dict[str, str]  # gains OMP_NUM_THREADS to match the CPU binding
    program: list[str]
    notes: list[str]
    hostfile: Path | None = None
    hostfile_hosts: tuple[str, ...] = ()
    rendezvous: Rendezvous | None = None

    @property
    def world(self) -> int:
        return len(self.hosts) * self.per_node

    def use_hostfile(self) -> Path:
        """PBS's own nodefile when every host is used (as ezpz does), else the run's own."""
        alloc, hosts = self.alloc, self.hosts
        if alloc.nodefile and hosts == alloc.hosts:
            self.hostfile = Path(alloc.nodefile)
            return self.hostfile
        self.hostfile, self.hostfile_hosts = RunDir(self.run_dir).hostfile, hosts
        if hosts != alloc.hosts:
            self.notes.append(
                f"Using {len(hosts)} of {len(alloc.hosts)} allocated hosts: "
                f"{self.hostfile} lists them."
            )
        else:
            self.notes.append(f"{self.hostfile} lists the allocated hosts for the launcher.")
        return self.hostfile

    def launch(self, argv: list[str], launcher: str) -> Launch:
        return Launch(
            run_dir=self.run_dir,
            argv=tuple(argv),
            env=self.env,
            launcher=launcher,
            hostfile=self.hostfile,
            hostfile_hosts=self.hostfile_hosts,
            notes=tuple(self.notes),
            rendezvous=self.rendezvous,
            world_size=self.world,
        )


@dataclass(frozen=True)
class _MpiStyle:
    """How one MPI launcher family spells the same request; ``{...}`` fields are filled in."""

    lead: tuple[str, ...]
    counts: tuple[str, ...]  # {world} ranks, {ppn} per node
    hostfile: tuple[str, ...]  # {path}
    no_hostfile: tuple[str, ...]
    hostfile_first: bool
    exports: tuple[str, ...]
    env: tuple[str, ...]  # one variable: {key}, {value}


_MPI_STYLES = {
    "pals": _MpiStyle(
        lead=("--envall", "--line-buffer"),
        counts=("--np={world}", "--ppn={ppn}"),
        hostfile=("--hostfile={path}",),
        no_hostfile=(),
        hostfile_first=False,
        exports=(),
        env=("--env", "{key}={value}"),
    ),
    "hydra": _MpiStyle(
        lead=(),
        counts=("-n", "{world}", "-ppn", "{ppn}"),
        hostfile=("-f", "{path}"),
        no_hostfile=("-rmk", "user"),
        hostfile_first=True,
        exports=(),
        env=("-genv", "{key}", "{value}"),
    ),
    "openmpi": _MpiStyle(
        lead=(),
        counts=("-n", "{world}", "-N", "{ppn}"),
        hostfile=("--hostfile", "{path}"),
        no_hostfile=(),
        hostfile_first=False,
        exports=("-x", "PATH", "-x", "LD_LIBRARY_PATH"),
        env=("-x", "{key}={value}"),
    ),
}


def _fill(template: Sequence[str], **values: object) -> list[str]:
    return [item.format(**values) for item in template]


def _pals_binding(step: _Step, bind: bool) -> tuple[list[str], int]:
    """ezpz's PALS CPU binding for the machine, and the OpenMP threads it leaves each rank."""
    alloc = step.alloc
    xpu = alloc.machine in INTEL_XPU_MACHINES
    flags = ["--no-vni"] if xpu else []
    if not bind:
        return [*flags, "--cpu-bind=none"], _threads(alloc.cpus_per_host, step.per_node)
    if xpu:
        verbose = "verbose," if step.world < VERBOSE_BIND_MAX_RANKS else ""
        return [*flags, f"--cpu-bind={verbose}{INTEL_XPU_CPU_BIND}"], INTEL_XPU_CORES_PER_RANK
    return [*flags, "--cpu-bind=depth", f"--depth={POLARIS_DEPTH}"], POLARIS_DEPTH


def _mpi_argv(kind: str, binary: str, step: _Step, bind: bool) -> list[str]:
    """mpiexec/mpirun argv in the style of the MPI that ``binary`` is."""
    flavour = _mpi_flavour(kind, binary, step.alloc)
    style = _MPI_STYLES[flavour]
    hostfile = step.use_hostfile() if step.alloc.scheduler != "none" else None
    where = _fill(style.hostfile, path=hostfile) if hostfile else list(style.no_hostfile)
    counts = _fill(style.counts, world=step.world, ppn=step.per_node)
    if flavour == "pals":
        binding, threads = _pals_binding(step, bind)
    else:
        binding, threads = [], _threads(step.alloc.cpus_per_host, step.per_node)
    step.env.setdefault("OMP_NUM_THREADS", str(threads))
    argv = [binary, *style.lead, *(where + counts if style.hostfile_first else counts + where)]
    argv += [*binding, *style.exports]
    for key, value in step.env.items():
        argv += _fill(style.env, key=key, value=value)
    return argv + step.program


def _srun_argv(binary: str, step: _Step) -> list[str]:
    """srun argv; the step's CPUs are split evenly among the tasks of a node."""
    alloc, hosts, per_node, notes = step.alloc, step.hosts, step.per_node, step.notes
    cpus_per_task = _threads(alloc.cpus_per_host, per_node)
    if len(hosts) > SRUN_INLINE_NODELIST_MAX:
        nodelist = str(step.use_hostfile())
    else:
        nodelist = ",".join(hosts)
        if hosts != alloc.hosts:
            notes.append(f"Using {len(hosts)} of {len(alloc.hosts)} allocated hosts.")
    argv = [binary, "-u", "--verbose", f"-N{len(hosts)}", f"-n{step.world}"]
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
    step.env.setdefault("OMP_NUM_THREADS", str(cpus_per_task))
    exported = [f"{k}={v}" for k, v in step.env.items() if "," not in v]
    if len(exported) < len(step.env):
        notes.append("Values with commas reach the ranks through srun's inherited environment.")
    argv.append("--export=" + ",".join(["ALL", *exported]))
    return argv + step.program


def _rank_env(plan: LaunchPlan) -> dict[str, str]:
    env = {SIZE_VARS[name]: str(getattr(plan, name)) for name in ("tp", "pp", "cp")}
    env.update(plan.env_dict())
    return env


def build_launch(checked: CheckedPlan, run_dir: Path, config: LaunchConfig | None = None) -> Launch:
    """The launch of a checked plan into ``run_dir``; reads nothing but ``config.which``.

    Nothing is written: the run store writes the hostfile a launch names when it records it.
    """
    config = config or LaunchConfig()
    plan, alloc, python, which = checked.plan, checked.alloc, config.python, config.which
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
        env.setdefault("OMP_NUM_THREADS", str(_threads(alloc.cpus_per_host, ppn)))
        if alloc.scheduler == "none":
            program += ["--standalone", "--nnodes", "1", "--nproc-per-node", str(ppn)]
            notes.append(contract_note(kind, None))
            return _Step(alloc, hosts, ppn, run_dir, env, [], notes).launch(program + capture, kind)
        meet = _rendezvous(checked, hosts, run_dir, config)
        program += ["--nnodes", str(len(hosts)), "--nproc-per-node", str(ppn)]
        program += ["--rdzv-backend", "c10d", "--rdzv-endpoint", meet.endpoint()]
        program += ["--rdzv-id", run_dir.name, *capture]
        notes.append(contract_note(kind, meet))
        # torchrun starts the ranks of one node; a per-node launcher starts one torchrun each.
        step = _Step(alloc, hosts, 1, run_dir, env, program, notes, rendezvous=meet)
        if alloc.scheduler == "SLURM" and which("srun"):
            notes.append("srun starts one torchrun per node; torchrun starts that node's ranks.")
            return step.launch(_srun_argv(which("srun") or "srun", step), kind)
        wrapper = "mpirun" if alloc.machine == "Sophia" else "mpiexec"
        notes.append(f"{wrapper} starts one torchrun per node; torchrun starts its ranks.")
        return step.launch(_mpi_argv(wrapper, which(wrapper) or wrapper, step, bind=False), kind)

    meet = _rendezvous(checked, hosts, run_dir, config)
    env.update(meet.env())
    notes.append(contract_note(kind, meet))
    step = _Step(alloc, hosts, ppn, run_dir, env, [python, *capture], notes, rendezvous=meet)
    if kind == "srun":
        return step.launch(_srun_argv(which("srun") or "srun", step), kind)
    local = alloc.scheduler == "none"
    binary = _local_binary(kind, python, which) if local else which(kind)
    if binary is None:
        notes.append(f"{kind} is not on PATH here; load the module that provides it.")
    return step.launch(_mpi_argv(kind, binary or kind, step, bind=True), kind)


def _rendezvous(
    checked: CheckedPlan, hosts: Sequence[str], run_dir: Path, config: LaunchConfig
) -> Rendezvous:
    given = checked.plan.env_dict()
    machine = checked.alloc.machine
    here = config.this_host
    return choose(hosts, machine, run_dir.name, here, given, config.port_free, config.address)


def format_argv(argv: Sequence[str]) -> str:
    """The argv as one line a person can paste into a shell (for the preview only)."""
    return shlex.join(argv)
