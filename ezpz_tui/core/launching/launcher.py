"""The launcher command line for a plan on an allocation, per scheduler and machine.

Follows what ezpz does (``src/ezpz/pbs.py: get_pbs_launch_cmd``, ``src/ezpz/slurm.py:
build_launch_cmd``):

- Aurora, Sunspot, Polaris, Sirius: PALS ``mpiexec --envall --line-buffer --np=N --ppn=P
  --hostfile=F`` and the machine's CPU binding, kept as data in :mod:`.launcher_flags` (ezpz
  v0.26.1's: eight cores per XPU tile on Aurora and Sunspot, no ``--no-vni``;
  ``--cpu-bind=depth --depth=8`` on Polaris), or the one ``CPU_BIND`` asks for, as ezpz reads
  it (srun gets that too);
- Sophia: Open MPI's ``mpirun -n N -N P --hostfile F -x PATH -x LD_LIBRARY_PATH``;
- Slurm (Perlmutter, Frontier): ``srun -u --verbose -NN -nR``;
- no scheduler: the MPICH ``mpiexec`` next to this Python (the PyPI wheel) or on PATH, else
  torchrun on this host.

and adds what ezpz lacks: a node subset gets its own hostfile (``RUN_DIR/hostfile``) and srun an
explicit ``--nodelist``; srun always gets ``--mpi=pmi2`` (pmix is not loadable with the PyPI
mpich wheel, and without PMI every rank is an MPI world of 1), ``--ntasks-per-node`` and
``--cpus-per-task`` so ranks are not all pinned to one core; a local Hydra gets ``-rmk user`` so
a stray ``PBS_NODEFILE`` cannot send ranks to other hosts. Every launcher sets the sizes
(``EZPZ_TP``/``EZPZ_PP``/``EZPZ_CP``) and ``OMP_NUM_THREADS`` (which mpiexec and srun leave
unset) for every rank, remote ones included, in the launcher's own syntax.

The plan's own launcher flags (``launcher_args``) go right after the launcher's flags, before the
program (torchrun's, after its own, when torchrun is the plan's launcher); one that names a
machine default's option replaces that default. A launcher that is not
on this node is a :class:`~.plan.Problem` (:func:`find_launcher`), never a silent fallback to
another launcher or a bare name that fails when started.

The MPI families (PALS, Hydra, Open MPI) ask for the same things in different words, so one
builder serves them all from a table of their spellings (:data:`_MPI_STYLES`); srun has its own.
Building a launch starts nothing and writes nothing: a :class:`Launch` is a value, which the run
store records (writing the hostfile it names) and the supervisor starts. A plan that stages its
environment (``stage``) gets a :class:`~.staging.Staging` too: the copy and the removal, each in
the same launcher's words with one process a node, and the ranks' interpreter is the copy's (a
bare ``python`` in the command too), the copy's ``bin`` first on their ``PATH`` and their
``VIRTUAL_ENV`` (or ``CONDA_PREFIX``) the copy.
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.launcher_flags import (
    CPU_BIND_VAR,
    PALS_ALIASES,
    cpu_bind_asked,
    cpu_bind_flags,
    merge,
    pals_defaults,
    plan_owned,
)
from ezpz_tui.core.launching.plan import CheckedPlan, LaunchPlan, LaunchRefused, Problem
from ezpz_tui.core.launching.rank_program import in_process_env, watched_in_process
from ezpz_tui.core.launching.rendezvous import (
    PortFree,
    Rendezvous,
    Resolves,
    choose,
    contract_note,
    port_free,
    resolves,
    same_name,
)
from runtime.env import SIZE_VARS
from runtime.rundir import RunDir

TYPE_CHECKING = False
if TYPE_CHECKING:  # staging is imported by a launch that stages, not by every launch's start
    from ezpz_tui.core.launching.staging import Staging

Which = Callable[[str], str | None]

PALS_MACHINES = frozenset({"Aurora", "Sunspot", "Polaris", "Sirius"})
# Past this many hosts srun reads the node list from a file rather than one huge argument.
SRUN_INLINE_NODELIST_MAX = 256


@dataclass(frozen=True)
class LaunchConfig:
    """What building a launch takes from this machine: the Python the ranks run, how launchers
    are found, this host's name, whether a port is free here, the binding ``CPU_BIND`` asks
    for, the environment (its ``$TMPDIR`` is where staging copies to by default; tests pass
    their own)."""

    python: str = sys.executable
    which: Which = shutil.which
    this_host: str = field(default_factory=socket.gethostname)
    port_free: PortFree = port_free
    address: Callable[[str], str] = same_name  # how a host is reached (Slurm's NodeAddr)
    resolves: Resolves = resolves  # whether a name (a host's HSN name) resolves here
    cpu_bind: str | None = field(default_factory=cpu_bind_asked)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))  # $TMPDIR


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
    walltime_end: float | None = None  # when the job's walltime ends (epoch s), when known
    stage: Staging | None = None  # the environment staged on every node before the ranks


def _local_binary(name: str, python: str, which: Which) -> str | None:
    """The launcher next to this Python (a venv's mpich wheel) first, then PATH."""
    sibling = Path(python).parent / name
    if sibling.is_file():
        return str(sibling)
    return which(name)


def _find(name: str, alloc: Allocation, which: Which, python: str) -> str | None:
    """Where the launcher ``name`` is on this node: beside this Python too when there is no
    scheduler (a venv's mpich wheel); on a job, only the site's own on PATH."""
    return _local_binary(name, python, which) if alloc.scheduler == "none" else which(name)


def detect_launcher_kind(
    alloc: Allocation, which: Which = shutil.which, python: str = sys.executable
) -> str:
    """What ``launcher = "auto"`` means here: srun in Slurm, mpirun on Sophia, mpiexec (or an
    mpirun found instead) on other PBS machines; with no scheduler an MPI launcher found here,
    else torchrun. On a job the answer is the machine's launcher even when this node lacks it:
    :func:`find_launcher` then says what to do."""
    if alloc.scheduler == "SLURM":
        return "srun"
    if alloc.machine == "Sophia":
        return "mpirun"
    for kind in ("mpiexec", "mpirun"):
        if _find(kind, alloc, which, python):
            return kind
    return "torchrun" if alloc.scheduler == "none" else "mpiexec"


@dataclass(frozen=True)
class Starter:
    """What a plan's launcher means on this node: its ``kind``, and the program that starts the
    ranks (``name`` found at ``binary``); for torchrun on a job, the per-node launcher that
    starts one torchrun a node; both empty for torchrun on this host alone."""

    kind: str
    name: str = ""
    binary: str = ""


def _starter_name(kind: str, alloc: Allocation) -> str | None:
    if kind != "torchrun":
        return kind
    if alloc.scheduler == "none":
        return None
    if alloc.scheduler == "SLURM":
        return "srun"
    return "mpirun" if alloc.machine == "Sophia" else "mpiexec"


# How to get each launcher onto PATH, said in the problem when it is missing.
MODULE_HINTS = {
    "mpiexec": "module load cray-pals on the ALCF machines, your site's MPI module elsewhere",
    "mpirun": "module load openmpi, or your site's MPI module",
    "srun": "Slurm's srun is normally in /usr/bin; ask your site",
}


def find_launcher(
    launcher: str, alloc: Allocation, which: Which = shutil.which, python: str = sys.executable
) -> Starter | Problem:
    """The launcher ``launcher`` (a plan's, ``auto`` included) means on this node, or why it
    cannot start the ranks here: a problem with the reason and the remedy."""
    kind = detect_launcher_kind(alloc, which, python) if launcher == "auto" else launcher
    name = _starter_name(kind, alloc)
    if name is None:
        return Starter(kind)
    binary = _find(name, alloc, which, python)
    if binary is not None:
        return Starter(kind, name, binary)
    if name != kind:
        what = f"torchrun needs {name} to start one torchrun per node, and {name}"
    elif launcher == "auto":
        what = f"The launcher for this {alloc.scheduler} job is {name}, which"
    else:
        what = name
    return Problem(
        "error",
        "launcher",
        f"{what} is not on PATH on this node: load the module that provides it "
        f"({MODULE_HINTS[name]}) and start ezpz-tui again, or choose another launcher.",
    )


def launcher_problems(
    plan: LaunchPlan, alloc: Allocation, which: Which = shutil.which, python: str = sys.executable
) -> list[Problem]:
    """What only this node can tell about the plan's launcher, as problems :func:`~.plan.check`
    lists: it is missing here, or a launcher flag names an option the plan itself answers
    (which depends on the MPI found)."""
    found = find_launcher(plan.launcher, alloc, which, python)
    if isinstance(found, Problem):
        return [found]
    if found.kind in ("srun", "torchrun"):
        family = found.kind
    else:
        family = _mpi_flavour(found.kind, found.binary, alloc)
    return [
        Problem(
            "error",
            "launcher_args",
            f"{flag} is set from the plan's nodes, ranks per node and hosts: change those "
            "fields instead of giving it as a launcher flag.",
        )
        for flag in plan_owned(family, plan.launcher_args)
    ]


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
    stage: Staging | None = None

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
            stage=self.stage,
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


def _mpi_argv(
    kind: str,
    binary: str,
    step: _Step,
    bind: bool,
    user: Sequence[str] = (),
    cpu_bind: str | None = None,
) -> list[str]:
    """mpiexec/mpirun argv in the style of the MPI that ``binary`` is; ``user``: the plan's own
    launcher flags, which replace the machine's defaults for the options they name;
    ``cpu_bind``: the binding ``CPU_BIND`` asks for, in place of the machine's."""
    flavour = _mpi_flavour(kind, binary, step.alloc)
    style = _MPI_STYLES[flavour]
    hostfile = step.use_hostfile() if step.alloc.scheduler != "none" else None
    where = _fill(style.hostfile, path=hostfile) if hostfile else list(style.no_hostfile)
    counts = _fill(style.counts, world=step.world, ppn=step.per_node)
    threads = _threads(step.alloc.cpus_per_host, step.per_node)
    binding: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    if flavour == "pals":
        defaults = pals_defaults(step.alloc.machine, bind, cpu_bind)
        binding, replaced = merge(defaults.flags, user, PALS_ALIASES)
        if not replaced and defaults.threads_per_rank:
            threads = defaults.threads_per_rank  # the binding's cores per rank
        if cpu_bind and not replaced:
            step.notes.append(f"{binding[0]}: from {CPU_BIND_VAR} in the environment.")
    elif cpu_bind:
        step.notes.append(
            f"{CPU_BIND_VAR}={cpu_bind} is not passed on: {kind} spells binding otherwise "
            "(give it as a launcher flag)."
        )
    step.env.setdefault("OMP_NUM_THREADS", str(threads))
    if replaced:
        step.notes.append(
            f"Your launcher flags replace the default {' '.join(replaced)}; each rank gets "
            f"OMP_NUM_THREADS={step.env['OMP_NUM_THREADS']} (set it in env to choose)."
        )
    argv = [binary, *style.lead, *(where + counts if style.hostfile_first else counts + where)]
    argv += [*binding, *style.exports]
    for key, value in step.env.items():
        argv += _fill(style.env, key=key, value=value)
    return [*argv, *user, *step.program]


def _srun_argv(
    binary: str, step: _Step, user: Sequence[str] = (), cpu_bind: str | None = None
) -> list[str]:
    """srun argv; the step's CPUs are split evenly among the tasks of a node; ``user``: the
    plan's own launcher flags; ``cpu_bind``: the binding ``CPU_BIND`` asks for, unless a flag
    of the user's names it."""
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
    binding = merge(cpu_bind_flags(cpu_bind), user, {}).kept
    if binding:
        argv += binding
        notes.append(f"{binding[0]}: from {CPU_BIND_VAR} in the environment.")
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
    return [*argv, *user, *step.program]


def _rank_env(plan: LaunchPlan) -> dict[str, str]:
    env = {SIZE_VARS[name]: str(getattr(plan, name)) for name in ("tp", "pp", "cp")}
    env.update(plan.env_dict())
    return env


def build_launch(checked: CheckedPlan, run_dir: Path, config: LaunchConfig | None = None) -> Launch:
    """The launch of a checked plan into ``run_dir``; reads nothing but ``config.which`` and
    ``config.resolves``. :class:`~.plan.LaunchRefused` when the launcher is not on this node.

    Nothing is written: the run store writes the hostfile a launch names when it records it.
    """
    config = config or LaunchConfig()
    plan, alloc, python = checked.plan, checked.alloc, config.python
    starter = find_launcher(plan.launcher, alloc, config.which, python)
    if isinstance(starter, Problem):
        raise LaunchRefused([starter])
    kind, binary = starter.kind, starter.binary
    run_dir = Path(run_dir).absolute()
    hosts = plan.hosts_used(alloc)
    ppn = plan.ranks_per_node(alloc)
    env = _rank_env(plan)
    user = plan.launcher_args
    notes: list[str] = []
    staging = _staging(checked, starter, run_dir, config)
    command = staging.swap(plan.command) if staging else list(plan.command)
    python = staging.swap([python])[0] if staging else python
    if staging:
        env.update(staging.rank_env({**config.environ, **plan.env_dict()}))
        notes.append(f"The ranks run from {staging.dest}, a copy of {staging.source} on each node.")
    capture = ["-m", "runtime.capture", "--run-dir", str(run_dir), "--", *command]

    if kind == "torchrun":
        program = [python, "-m", "torch.distributed.run"]
        env.setdefault("OMP_NUM_THREADS", str(_threads(alloc.cpus_per_host, ppn)))
        if not binary:
            program += ["--standalone", "--nnodes", "1", "--nproc-per-node", str(ppn), *user]
            notes.append(contract_note(kind, None))
            step = _Step(alloc, hosts, ppn, run_dir, env, [], notes, stage=staging)
            return step.launch(program + capture, kind)
        meet = _rendezvous(checked, hosts, run_dir, config)
        program += ["--nnodes", str(len(hosts)), "--nproc-per-node", str(ppn)]
        program += ["--rdzv-backend", "c10d", "--rdzv-endpoint", meet.endpoint()]
        program += ["--rdzv-id", run_dir.name, *user, *capture]
        notes.append(contract_note(kind, meet))
        # torchrun starts the ranks of one node; a per-node launcher starts one torchrun each.
        step = _Step(alloc, hosts, 1, run_dir, env, program, notes, rendezvous=meet, stage=staging)
        if starter.name == "srun":
            notes.append("srun starts one torchrun per node; torchrun starts that node's ranks.")
            return step.launch(_srun_argv(binary, step), kind)
        notes.append(f"{starter.name} starts one torchrun per node; torchrun starts its ranks.")
        return step.launch(_mpi_argv(starter.name, binary, step, bind=False), kind)

    meet = _rendezvous(checked, hosts, run_dir, config)
    env.update(meet.env())
    notes.append(contract_note(kind, meet))
    program = [python, *capture]
    if not staging and watched_in_process(command, python, config.which):
        given = env.get("PYTHONPATH", config.environ.get("PYTHONPATH", ""))
        env.update(in_process_env(run_dir, given))
        program = command
    step = _Step(alloc, hosts, ppn, run_dir, env, program, notes, rendezvous=meet, stage=staging)
    bind = config.cpu_bind
    if kind == "srun":
        return step.launch(_srun_argv(binary, step, user, bind), kind)
    return step.launch(_mpi_argv(kind, binary, step, bind=True, user=user, cpu_bind=bind), kind)


def _staging(
    checked: CheckedPlan, starter: Starter, run_dir: Path, config: LaunchConfig
) -> Staging | None:
    """The plan's staging: the copy and the removal, each run once per node by the launcher
    that starts the ranks (or directly, for torchrun on this host alone); None when off.
    :class:`~.plan.LaunchRefused` when the rank interpreter is in no environment to copy."""
    plan, alloc, python = checked.plan, checked.alloc, config.python
    if plan.stage == "off":
        return None
    from ezpz_tui.core.launching.staging import (
        Staging,
        environment_of,
        node_commands,
        pack_path,
        stage_dest,
    )

    source = environment_of(python)
    if isinstance(source, Problem):
        raise LaunchRefused([source])
    dest = stage_dest(plan, source, run_dir.name, config.environ)
    keep = plan.stage == "keep"
    copy, remove = node_commands(python, source, dest, keep, pack_path(source))
    hosts = plan.hosts_used(alloc)
    return Staging(
        str(source),
        dest,
        keep,
        tuple(_per_node(starter, alloc, hosts, run_dir, copy)),
        tuple(_per_node(starter, alloc, hosts, run_dir, remove)),
        hosts,
    )


def _per_node(
    starter: Starter, alloc: Allocation, hosts: tuple[str, ...], run_dir: Path, program: list[str]
) -> list[str]:
    """``program`` run once on each of ``hosts`` by the launcher (no binding, none of the
    plan's launcher flags: they are the ranks')."""
    if not starter.binary:
        return program
    step = _Step(alloc, hosts, 1, run_dir, {}, program, [])
    name = starter.name
    if name == "srun":
        return _srun_argv(starter.binary, step)
    return _mpi_argv(name, starter.binary, step, bind=False)


def _rendezvous(
    checked: CheckedPlan, hosts: Sequence[str], run_dir: Path, config: LaunchConfig
) -> Rendezvous:
    given = checked.plan.env_dict()
    machine = checked.alloc.machine
    here = config.this_host
    return choose(
        hosts,
        machine,
        run_dir.name,
        here,
        given,
        config.port_free,
        config.address,
        config.resolves,
    )


def format_argv(argv: Sequence[str]) -> str:
    """The argv as one line a person can paste into a shell (for the preview only)."""
    return shlex.join(argv)
