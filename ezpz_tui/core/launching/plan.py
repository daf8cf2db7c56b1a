"""The launch plan: which hosts, how many ranks, which parallel sizes, what to run.

One frozen object holds every choice (the way torchtitan's ``ParallelDims`` does), so the form,
the command preview, the run's record and a relaunch all describe the same thing. The plan may
be invalid while someone is editing it; :func:`validate` says everything that is wrong at once,
in sentences, instead of raising at the first problem. :func:`check` is the one gate to a
launch: what it lets through (a :class:`CheckedPlan`) is never validated again.

The sizes themselves (which divide, where each rank sits on the (pp, dp, cp, tp) mesh) are
:class:`runtime.layout.Layout`'s to say, the same object every rank builds its mesh from.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.runs.hosts import short_host
from runtime.env import RANK_VARS, RENDEZVOUS_VARS, RUN_DIR_VAR, SIZE_VARS
from runtime.layout import Layout

LAUNCHERS = ("auto", "mpiexec", "srun", "mpirun", "torchrun")
# Staging the environment on each node's own disk: not at all, for this run, or kept for the next.
STAGE_MODES = ("off", "on", "keep")
DEMO_MODULE = "runtime.examples.train"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The user may choose the rendezvous (MASTER_ADDR/MASTER_PORT); the rest is each rank's own.
_LAUNCHER_OWNED = frozenset((*RANK_VARS, RUN_DIR_VAR)) - frozenset(RENDEZVOUS_VARS)


def demo_command() -> tuple[str, ...]:
    """The built-in demo, run by the Python that runs ezpz-tui so its venv comes along."""
    return (sys.executable, "-m", DEMO_MODULE)


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a plan.

    ``field`` names the plan field to highlight; ``sizes`` means tp, pp and cp together.
    """

    level: str  # "error" | "warning"
    field: str
    message: str


class RankPlace(NamedTuple):
    """Where one rank runs and its coordinate on each mesh dimension."""

    host: str
    local_rank: int
    tp_rank: int
    pp_rank: int
    cp_rank: int
    dp_rank: int


@dataclass(frozen=True)
class LaunchPlan:
    """Every launch choice; ``None`` for nodes means all usable, for ppn one per accelerator."""

    nodes: int | None = None
    exclude: tuple[str, ...] = ()
    ppn: int | None = None
    tp: int = 1
    pp: int = 1
    cp: int = 1
    launcher: str = "auto"
    command: tuple[str, ...] = field(default_factory=demo_command)
    env: tuple[tuple[str, str], ...] = ()
    # The launcher's own flags (``--cpu-bind=none``), placed before the program.
    launcher_args: tuple[str, ...] = ()
    # Usable hosts kept out of the run, for a retry after a node fault to swap in.
    spares: int = 0
    # Copy the environment to each node first (:mod:`runtime.stage`): off, on or keep; into
    # ``stage_dir`` on every node ("": the launching node's $TMPDIR, else /tmp).
    stage: str = "off"
    stage_dir: str = ""
    # How many staged nodes a launch goes on with when some cannot copy (those are excluded
    # and the plan shrunk): a count, or a fraction of the plan's nodes; None: every node.
    stage_min_nodes: float | None = None

    def __post_init__(self) -> None:
        # Accept lists and dicts from callers and TOML, store tuples so the plan stays hashable.
        if any(isinstance(x, str) for x in (self.command, self.exclude, self.launcher_args)):
            raise TypeError(
                "command, exclude and launcher_args are lists of strings, never one shell string"
            )
        env = self.env.items() if isinstance(self.env, Mapping) else self.env
        object.__setattr__(self, "exclude", tuple(self.exclude))
        object.__setattr__(self, "command", tuple(self.command))
        object.__setattr__(self, "launcher_args", tuple(self.launcher_args))
        object.__setattr__(self, "env", tuple((str(k), str(v)) for k, v in env))

    def ranks_per_node(self, alloc: Allocation) -> int:
        return alloc.accelerators_per_host if self.ppn is None else self.ppn

    def usable_hosts(self, alloc: Allocation) -> tuple[str, ...]:
        """Allocated hosts minus the excluded ones; a short name excludes its FQDN too."""
        excluded = {short_host(x) for x in self.exclude}
        return tuple(h for h in alloc.hosts if short_host(h) not in excluded)

    def hosts_used(self, alloc: Allocation) -> tuple[str, ...]:
        """The first ``nodes`` usable hosts in allocation order (the head node first); without
        ``nodes``, all but the last ``spares``."""
        usable = self.usable_hosts(alloc)
        if self.nodes is None:
            return usable[: max(len(usable) - max(self.spares, 0), 0)]
        return usable[: max(self.nodes, 0)]

    def world_size(self, alloc: Allocation) -> int:
        return len(self.hosts_used(alloc)) * max(self.ranks_per_node(alloc), 0)

    def layout(self, alloc: Allocation) -> Layout:
        """The parallel sizes on the ranks this plan gets from ``alloc``."""
        ranks_per_node = self.ranks_per_node(alloc)
        return Layout(self.world_size(alloc), self.tp, self.pp, self.cp, ranks_per_node)

    def env_dict(self) -> dict[str, str]:
        return dict(self.env)

    def with_changes(self, **changes: Any) -> LaunchPlan:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """TOML-ready: unset optional fields are left out, since TOML has no null."""
        out: dict[str, Any] = {}
        if self.nodes is not None:
            out["nodes"] = self.nodes
        if self.exclude:
            out["exclude"] = list(self.exclude)
        if self.ppn is not None:
            out["ppn"] = self.ppn
        out.update(tp=self.tp, pp=self.pp, cp=self.cp, launcher=self.launcher)
        if self.launcher_args:
            out["launcher_args"] = list(self.launcher_args)
        if self.spares:
            out["spares"] = self.spares
        if self.stage != "off":
            out["stage"] = self.stage
        if self.stage_dir:
            out["stage_dir"] = self.stage_dir
        if self.stage_min_nodes is not None:
            whole = float(self.stage_min_nodes).is_integer()
            out["stage_min_nodes"] = int(self.stage_min_nodes) if whole else self.stage_min_nodes
        out["command"] = list(self.command)
        if self.env:
            out["env"] = dict(self.env)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LaunchPlan:
        """Read :meth:`to_dict` output (a run's recorded plan); ``ValueError`` says what is
        wrong."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"Unknown launch plan key(s): {', '.join(unknown)}. "
                f"Known keys: {', '.join(sorted(known))}."
            )
        kw: dict[str, Any] = {}
        for name in ("nodes", "ppn", "tp", "pp", "cp", "spares"):
            if name in data:
                kw[name] = _whole_number(name, data[name])
        for name in ("exclude", "command", "launcher_args"):
            if name in data:
                kw[name] = _strings(name, data[name])
        if "launcher" in data:
            if not isinstance(data["launcher"], str):
                raise ValueError(f"'launcher' must be one of {', '.join(LAUNCHERS)}.")
            kw["launcher"] = data["launcher"]
        for name in ("stage", "stage_dir"):
            if name in data:
                if not isinstance(data[name], str):
                    raise ValueError(f"'{name}' must be a string, not {data[name]!r}.")
                kw[name] = data[name]
        if "stage_min_nodes" in data:
            kw["stage_min_nodes"] = min_nodes_value(data["stage_min_nodes"])
        if "env" in data:
            kw["env"] = _env_table(data["env"])
        return cls(**kw)

    def stage_nodes_needed(self, staged: int) -> int:
        """Of ``staged`` nodes, how many must have their copy for the launch to go on."""
        wanted = self.stage_min_nodes
        if wanted is None:
            return staged
        return math.ceil(wanted * staged) if wanted < 1 else int(wanted)


def min_nodes_value(value: Any, name: str = "'stage_min_nodes'") -> float:
    """``stage_min_nodes`` from TOML or the command line: a whole count of nodes (``3``) or a
    fraction of the plan's (``0.9``); ``ValueError`` says what it must be."""
    try:
        number = float(value) if isinstance(value, int | float | str) else math.nan
    except ValueError:
        number = math.nan
    if isinstance(value, bool) or not number > 0 or (number > 1 and not number.is_integer()):
        raise ValueError(
            f"{name} must be a whole number of nodes (3) or a fraction of the "
            f"plan's nodes between 0 and 1 (0.9), not {value!r}."
        )
    return number


def _whole_number(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"'{name}' must be a whole number, not {value!r}.")
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"'{name}' must be a whole number, not {value!r}.") from None


def _strings(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ValueError(f'\'{name}\' must be a list of strings, e.g. ["python", "train.py"].')
    if not all(isinstance(item, str) for item in value):
        raise ValueError(f"Every item of '{name}' must be a string.")
    return tuple(value)


def _env_table(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, Mapping):
        raise ValueError("'env' must be a table of NAME = value pairs.")
    pairs = []
    for key, item in value.items():
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise ValueError(f"env value of {key} must be a string or a number, not {item!r}.")
        pairs.append((str(key), str(item)))
    return tuple(pairs)


def default_plan(alloc: Allocation) -> LaunchPlan:
    """All nodes, one rank per accelerator, no model parallelism, the demo."""
    return LaunchPlan(ppn=alloc.accelerators_per_host)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def validate(plan: LaunchPlan, alloc: Allocation) -> list[Problem]:
    """Every problem with ``plan`` on ``alloc``, errors and warnings, in form order."""
    problems: list[Problem] = []

    def error(name: str, message: str) -> None:
        problems.append(Problem("error", name, message))

    def warning(name: str, message: str) -> None:
        problems.append(Problem("warning", name, message))

    if plan.nodes is not None and plan.nodes < 1:
        error("nodes", f"Nodes must be at least 1, not {plan.nodes}.")
    allocated = {short_host(h) for h in alloc.hosts}
    missing = [x for x in plan.exclude if short_host(x) not in allocated]
    for host in missing:
        error("exclude", f"Excluded host {host} is not in the allocation ({_hosts_text(alloc)}).")
    usable = plan.usable_hosts(alloc)
    if not usable:
        error("exclude", "Every allocated host is excluded, so there is nothing left to run on.")
    elif plan.nodes is not None and plan.nodes > len(usable):
        present = [x for x in plan.exclude if x not in missing]
        after = f" (after excluding {', '.join(present)})" if present else ""
        verb = "is" if len(usable) == 1 else "are"
        error(
            "nodes",
            f"{_plural(plan.nodes, 'node')} asked for but only {len(usable)} {verb} "
            f"allocated{after}.",
        )
    if plan.spares < 0:
        error("nodes", f"Spares must be 0 or more, not {plan.spares}.")
    elif plan.spares and usable and len(usable) - (plan.nodes or 1) < plan.spares:
        error(
            "nodes",
            f"{_plural(plan.spares, 'spare')} asked for but only {len(usable)} usable "
            f"{'host is' if len(usable) == 1 else 'hosts are'} allocated: "
            f"{plan.nodes or 1} for the run leave {len(usable) - (plan.nodes or 1)}.",
        )

    ppn = plan.ranks_per_node(alloc)
    if ppn < 1:
        error("ppn", f"Ranks per node must be at least 1, not {ppn}.")
    elif alloc.accelerator_kind != "cpu" and ppn > alloc.accelerators_per_host:
        error(
            "ppn",
            f"{ppn} ranks per node but the hosts have "
            f"{_plural(alloc.accelerators_per_host, 'accelerator')}.",
        )
    elif alloc.accelerator_kind == "cpu" and ppn > alloc.cpus_per_host:
        warning(
            "ppn",
            f"{ppn} ranks per node but the hosts have {_plural(alloc.cpus_per_host, 'CPU')}, "
            "so ranks will share cores.",
        )

    for reason in plan.layout(alloc).reasons():
        # No ranks at all: the nodes, exclude and ppn problems above already say why.
        if reason.field != "world":
            problems.append(Problem(reason.level, reason.field, reason.message))

    if plan.launcher not in LAUNCHERS:
        error("launcher", f"Launcher {plan.launcher!r} is not one of {', '.join(LAUNCHERS)}.")
    elif plan.launcher == "srun" and alloc.scheduler != "SLURM":
        where = "there is no scheduler job here" if alloc.scheduler == "none" else "this is PBS"
        error("launcher", f"srun needs a Slurm allocation, but {where}.")
    if any(not flag.strip() for flag in plan.launcher_args):
        error("launcher_args", "A launcher flag is empty: remove it or give the flag.")
    if plan.stage not in STAGE_MODES:
        error("stage", f"Staging {plan.stage!r} is not one of {', '.join(STAGE_MODES)}.")
    elif plan.stage_dir and not plan.stage_dir.startswith("/"):
        error("stage_dir", f"The staging directory {plan.stage_dir!r} must be an absolute path.")
    if plan.stage_min_nodes is not None:
        nodes = len(plan.hosts_used(alloc))
        try:
            min_nodes_value(plan.stage_min_nodes)
        except ValueError as exc:
            error("stage_min_nodes", str(exc))
        if plan.stage == "off":
            error("stage_min_nodes", "A minimum of staged nodes needs staging: set stage on.")
        elif plan.stage_min_nodes >= 1 and plan.stage_min_nodes > nodes:
            error(
                "stage_min_nodes",
                f"At least {int(plan.stage_min_nodes)} staged nodes asked for, but the plan "
                f"runs on {_plural(nodes, 'node')}.",
            )

    if not plan.command:
        error("command", "The command is empty: give the program to run, e.g. python train.py.")
    elif not plan.command[0].strip():
        error("command", "The command's first item (the program to run) is empty.")

    by_size_var = {var: name for name, var in SIZE_VARS.items()}
    for key, value in plan.env:
        if not _ENV_NAME.fullmatch(key):
            error("env", f"{key!r} is not a valid environment variable name.")
        elif key in by_size_var:
            name = by_size_var[key]
            error("env", f"{key} comes from the {name.upper()} size; set {name.upper()} instead.")
        elif key in _LAUNCHER_OWNED:
            error("env", f"{key} is set for each rank by the launcher and cannot be overridden.")
        elif key == "MASTER_PORT" and not _is_port(value):
            error("env", f"MASTER_PORT={value!r} is not a port number (1-65535).")
    return problems


def _is_port(text: str) -> bool:
    return text.strip().isdigit() and 1 <= int(text) <= 65535


class LaunchRefused(ValueError):
    """The plan has errors: ``problems`` holds every one as a sentence, ``found`` every
    problem in form order, warnings included."""

    def __init__(self, found: Sequence[Problem]) -> None:
        self.found = list(found)
        self.problems = [p for p in self.found if p.level == "error"]
        super().__init__(" ".join(p.message for p in self.problems))


@dataclass(frozen=True)
class CheckedPlan:
    """A plan without errors on ``alloc`` (made by :func:`check`), with what its run records."""

    plan: LaunchPlan
    alloc: Allocation
    warnings: tuple[Problem, ...]

    @property
    def sizes(self) -> dict[str, int]:
        plan = self.plan
        return {"tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "world_size": self.world_size}

    @property
    def world_size(self) -> int:
        return self.plan.world_size(self.alloc)

    @property
    def meta(self) -> dict[str, Any]:
        """The allocation facts a run records beside its plan."""
        alloc = self.alloc
        return {
            "scheduler": alloc.scheduler,
            "job_id": alloc.job_id,
            "machine": alloc.machine,
            "hosts": list(self.plan.hosts_used(alloc)),
            "ranks_per_node": self.plan.ranks_per_node(alloc),
            "warnings": [p.message for p in self.warnings],
        }


MoreChecks = Callable[[LaunchPlan], Sequence[Problem]]


def check(plan: LaunchPlan, alloc: Allocation, also: MoreChecks | None = None) -> CheckedPlan:
    """``plan`` cleared for launching on ``alloc``; :class:`LaunchRefused` if it has errors.

    ``also`` finds what :func:`validate` cannot, since it looks at this node (is the launcher on
    PATH?); it runs only on a launcher that :func:`validate` found nothing wrong with.
    """
    found = validate(plan, alloc)
    if also is not None and not any(p.field == "launcher" for p in found):
        found += also(plan)
    if any(p.level == "error" for p in found):
        raise LaunchRefused(found)
    return CheckedPlan(plan, alloc, tuple(found))


def _hosts_text(alloc: Allocation, limit: int = 4) -> str:
    names = [short_host(h) for h in alloc.hosts[:limit]]
    more = len(alloc.hosts) - limit
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def rank_layout(plan: LaunchPlan, alloc: Allocation) -> list[RankPlace]:
    """Each rank's host and mesh coordinates, index = global rank; empty if sizes don't fit.

    Block placement (ranks 0..ppn-1 on the first host), as mpiexec --ppn and srun do by default.
    """
    layout = plan.layout(alloc)
    if not layout.valid:
        return []
    hosts = plan.hosts_used(alloc)
    ppn = plan.ranks_per_node(alloc)
    places = []
    for rank in range(layout.world):
        at = layout.coords(rank)
        places.append(
            RankPlace(hosts[rank // ppn], rank % ppn, at["tp"], at["pp"], at["cp"], at["dp"])
        )
    return places
