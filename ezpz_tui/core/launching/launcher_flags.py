"""The launcher flags each machine gets by default, as data, and the user's flags that replace them.

The defaults follow ezpz v0.26.1 (``src/ezpz/pbs.py: get_pbs_launch_cmd``, the PALS ``mpiexec``
of the ALCF machines):

- Aurora, Sunspot (12 XPU tiles a node): ``--cpu-bind=list:1-8:9-16:...:93-100``, eight
  cores per rank, six ranks a socket, each socket's first core (0 and 52) left to the OS, so a
  rank's OpenMP threads have cores of their own. No ``verbose,``: ezpz adds it only when asked
  to be verbose, and PALS would print every rank's binding into every rank's log. ezpz dropped
  ``--no-vni`` in v0.18 (it was a transient network workaround); a job on DAOS still needs it
  and adds it as a flag of its own.
  (Earlier ezpz bound three cores a rank, ``list:2-4:10-12:...``, with ``--no-vni``.)
- Polaris, Sirius: ``--cpu-bind=depth --depth=8``.
- One torchrun per node (torchrun binds its own ranks): ``--cpu-bind=none``.

A ``CPU_BIND`` in the environment is the binding instead, as ezpz reads it (``--cpu-bind=`` in
front of the value is dropped; an empty one asks for nothing, the default stays): PALS mpiexec
and srun get ``--cpu-bind=<CPU_BIND>`` in place of the machine's default (Polaris's
``--depth=8`` goes with it, as in ezpz); Hydra and Open MPI spell binding otherwise and are not
given it.

A flag the user gives with the same option name as a default (``--cpu-bind=none`` or
``--cpu-bind none`` for ``--cpu-bind=...``, ``-d 4`` for ``--depth=8``) replaces that default
instead of following it, so the launcher never sees two answers to one question. The user's flags
go after the launcher's own, right before the program. The options a launch sets from the plan
itself (how many ranks, on which hosts) are the form's to change, never a flag's
(:data:`PLAN_OWNED`): the run's records and its rank count would disagree with what ran.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

CPU_BIND_VAR = "CPU_BIND"  # the site's or the user's binding for the launcher, as ezpz reads it
# Short spellings PALS mpiexec accepts for an option a default spells long.
PALS_ALIASES = {"-d": "--depth"}


# Per launcher family, the options a launch answers from the plan's nodes, ranks and hosts.
PLAN_OWNED = {
    "pals": frozenset({"--np", "-n", "--ppn", "--hostfile", "-f", "--hosts"}),
    "hydra": frozenset({"-n", "-np", "-ppn", "-f", "-hostfile", "-hosts", "-rmk"}),
    "openmpi": frozenset({"-n", "-np", "-N", "--hostfile", "--host", "-H"}),
    "srun": frozenset(
        {"-N", "--nodes", "-n", "--ntasks", "--ntasks-per-node", "--nodelist", "-w", "--export"}
    ),
    "torchrun": frozenset(
        {"--nnodes", "--nproc-per-node", "--nproc_per_node", "--standalone", "--rdzv-endpoint"}
    ),
}


@dataclass(frozen=True)
class MachineFlags:
    """A machine's default launcher flags and the OpenMP threads per rank their binding leaves
    (None: the node's CPUs shared by its ranks)."""

    flags: tuple[str, ...]
    threads_per_rank: int | None = None


INTEL_XPU_CPU_BIND = "list:1-8:9-16:17-24:25-32:33-40:41-48:53-60:61-68:69-76:77-84:85-92:93-100"
INTEL_XPU = MachineFlags((f"--cpu-bind={INTEL_XPU_CPU_BIND}",), threads_per_rank=8)
PALS_DEPTH = MachineFlags(("--cpu-bind=depth", "--depth=8"), threads_per_rank=8)

PALS_DEFAULTS = {
    "Aurora": INTEL_XPU,
    "Sunspot": INTEL_XPU,
    "Polaris": PALS_DEPTH,
    "Sirius": PALS_DEPTH,
}
PALS_UNBOUND = MachineFlags(("--cpu-bind=none",))  # one torchrun per node binds its own ranks


def cpu_bind_asked(environ: Mapping[str, str] = os.environ) -> str | None:
    """The binding ``CPU_BIND`` asks for (``list:1-8:...``, ``depth``), or None."""
    value = environ.get(CPU_BIND_VAR, "").strip().removeprefix("--cpu-bind=").strip()
    return value or None


def cpu_bind_flags(cpu_bind: str | None) -> tuple[str, ...]:
    """The launcher flag for the binding ``CPU_BIND`` asks for (PALS mpiexec and srun)."""
    return (f"--cpu-bind={cpu_bind}",) if cpu_bind else ()


def pals_defaults(machine: str, bind: bool, cpu_bind: str | None = None) -> MachineFlags:
    """The PALS defaults of ``machine``, or the binding ``cpu_bind`` (``CPU_BIND``) asks for
    instead; ``bind`` False: a per-node launcher that binds nothing."""
    if not bind:
        return PALS_UNBOUND
    if cpu_bind:
        return MachineFlags(cpu_bind_flags(cpu_bind))
    return PALS_DEFAULTS.get(machine, MachineFlags(()))


def option_name(item: str, aliases: dict[str, str]) -> str | None:
    """``--cpu-bind=none`` -> ``--cpu-bind``; None for a value (``none`` after ``--cpu-bind``)."""
    if not item.startswith("-") or item == "-":
        return None
    name = item.split("=", 1)[0]
    return aliases.get(name, name)


class Merged(NamedTuple):
    """The defaults kept and the ones a user flag replaced (for the preview's note)."""

    kept: tuple[str, ...]
    replaced: tuple[str, ...]


def merge(defaults: Sequence[str], user: Sequence[str], aliases: dict[str, str]) -> Merged:
    """The defaults minus those whose option the user's flags name again.

    Defaults are single ``--name=value`` items, so dropping one never leaves its value behind.
    """
    named = {option_name(item, aliases) for item in user} - {None}
    kept = tuple(d for d in defaults if option_name(d, aliases) not in named)
    return Merged(kept, tuple(d for d in defaults if d not in kept))


def plan_owned(family: str, user: Sequence[str]) -> list[str]:
    """The user's flags that name an option the plan answers for ``family``."""
    owned = PLAN_OWNED.get(family, frozenset())
    return [item for item in user if option_name(item, {}) in owned]
