"""Where this process sits in the job, read from the launcher's environment.

Everything here is a plain function of ``os.environ`` (or an explicit mapping) so that the
launcher, the capture wrapper and the UI can ask the same questions without importing torch or
initialising MPI. Asking MPI itself is the job of :mod:`runtime.dist`, and only when no launcher
variable answers.

Order matters (docs/pitfalls.md): under ``mpiexec`` inside a Slurm allocation every rank sees
``SLURM_PROCID=0``, so torchrun's and the MPI launchers' variables are read before Slurm's, and
Slurm's only count when ``srun`` started the task (a step id is present).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

# Per launcher: (rank, local rank, world size, local world size, node index); each field lists
# the variables that can answer it, first found wins. Most specific launcher first.
_Names = tuple[str, ...]
_LAUNCHER_VARS: tuple[tuple[str, _Names, _Names, _Names, _Names, _Names], ...] = (
    (
        "torchrun",
        ("RANK",),
        ("LOCAL_RANK",),
        ("WORLD_SIZE",),
        ("LOCAL_WORLD_SIZE",),
        ("GROUP_RANK",),
    ),
    (
        "pals",
        ("PALS_RANKID",),
        ("PALS_LOCAL_RANKID", "PMI_LOCAL_RANK"),
        ("PMI_SIZE", "PALS_SIZE"),
        ("PALS_LOCAL_SIZE", "PMI_LOCAL_SIZE"),
        ("PALS_NODEID",),
    ),
    (
        "pmi",
        ("PMI_RANK",),
        ("MPI_LOCALRANKID", "PMI_LOCAL_RANK"),
        ("PMI_SIZE",),
        ("MPI_LOCALNRANKS", "PMI_LOCAL_SIZE"),
        (),
    ),
    (
        "openmpi",
        ("OMPI_COMM_WORLD_RANK",),
        ("OMPI_COMM_WORLD_LOCAL_RANK",),
        ("OMPI_COMM_WORLD_SIZE",),
        ("OMPI_COMM_WORLD_LOCAL_SIZE",),
        ("OMPI_COMM_WORLD_NODE_RANK",),
    ),
    ("slurm", ("SLURM_PROCID",), ("SLURM_LOCALID",), ("SLURM_NTASKS",), (), ("SLURM_NODEID",)),
)

# torchrun's per-rank contract: what ``init_process_group()``'s default ``env://`` rendezvous,
# Accelerate and Lightning read. The capture wrapper derives the first five from whichever
# launcher started the rank; the supervisor picks the last two once per run.
TORCHRUN_VARS: tuple[str, ...] = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
)
RENDEZVOUS_VARS: tuple[str, ...] = ("MASTER_ADDR", "MASTER_PORT")

# Which launcher's variables the capture wrapper derived the torchrun contract from: once it has
# set RANK, a rank would otherwise read itself as started by torchrun.
RANK_SOURCE_VAR = "EZPZ_RANK_SOURCE"

# Variables a launcher sets per rank; a launch scrubs them so a stale value from the shell the
# TUI was started in can never make every rank believe it is rank 0 of a different job.
RANK_VARS: tuple[str, ...] = (*TORCHRUN_VARS, *RENDEZVOUS_VARS, RANK_SOURCE_VAR)

# Parallelism sizes travel from the launch plan to every rank through these.
SIZE_VARS: dict[str, str] = {"tp": "EZPZ_TP", "pp": "EZPZ_PP", "cp": "EZPZ_CP"}
RUN_DIR_VAR = "EZPZ_RUN_DIR"
# Set by the launcher when a rank's own interpreter watches it (runtime.in_process): the run
# directory, read once by the rank's sitecustomize and removed, so no process it starts reads it.
CAPTURE_IN_PROCESS_VAR = "EZPZ_CAPTURE_IN_PROCESS"


@dataclass(frozen=True)
class RankInfo:
    """Placement of one process as the launcher described it."""

    rank: int
    local_rank: int
    world_size: int
    local_world_size: int
    node_index: int
    source: str  # which launcher's variables answered: torchrun, pals, pmi, openmpi, slurm, none


def _int(env: Mapping[str, str], name: str) -> int | None:
    try:
        return int(env.get(name, "").strip())
    except ValueError:
        return None


def _first_int(env: Mapping[str, str], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = _int(env, name)
        if value is not None:
            return value
    return None


def _slurm_started_task(env: Mapping[str, str]) -> bool:
    # An interactive salloc shell or a batch script has no step; srun tasks do.
    return "SLURM_STEP_ID" in env or "SLURM_STEPID" in env


def rank_info(env: Mapping[str, str] | None = None) -> RankInfo | None:
    """Read placement from launcher variables; ``None`` when no launcher set any."""
    env = os.environ if env is None else env
    for source, rank_v, local_v, size_v, local_size_v, node_v in _LAUNCHER_VARS:
        rank = _first_int(env, rank_v)
        if rank is None:
            continue
        if source == "slurm" and not _slurm_started_task(env):
            continue
        size = _first_int(env, size_v)
        if size is None or size < 1 or not 0 <= rank < size:
            continue
        local = _first_int(env, local_v)
        local_size = _first_int(env, local_size_v)
        node = _first_int(env, node_v)
        if None in (local, local_size, node) and _slurm_started_task(env):
            # srun --mpi=pmi2 sets PMI_RANK/PMI_SIZE but nothing per node; the step knows.
            slurm = _slurm_placement(env, rank, size)
            if slurm is not None:
                local = slurm[0] if local is None else local
                local_size = slurm[1] if local_size is None else local_size
                node = slurm[2] if node is None else node
        if local_size is None or local_size < 1:
            local_size = size
        if local is None:
            local = rank % local_size
        if node is None:
            node = rank // local_size
        if source == "torchrun":
            source = env.get(RANK_SOURCE_VAR) or source
        return RankInfo(rank, local, size, local_size, node, source)
    return None


def torchrun_env(info: RankInfo) -> dict[str, str]:
    """torchrun's per-rank variables for a rank placed by any launcher."""
    values = (info.rank, info.local_rank, info.world_size, info.local_world_size, info.node_index)
    return {name: str(value) for name, value in zip(TORCHRUN_VARS, values, strict=True)}


def _expand_counts(spec: str) -> list[int]:
    """Slurm's per-node counts: ``"2(x3),1"`` -> ``[2, 2, 2, 1]``; ``[]`` when unreadable."""
    counts: list[int] = []
    for part in filter(None, spec.split(",")):
        value, _, repeat = part.partition("(x")
        if not value.isdigit() or (repeat and not repeat.rstrip(")").isdigit()):
            return []
        counts += [int(value)] * (int(repeat.rstrip(")")) if repeat else 1)
    return counts


def _slurm_placement(env: Mapping[str, str], rank: int, size: int) -> tuple[int, int, int] | None:
    """(local rank, tasks on this node, node index) from the srun step that started this task.

    Only trusted when the step describes the same task the other launcher variables do: under
    mpiexec inside an allocation Hydra's proxies are srun tasks too, with other numbers.
    """
    if _int(env, "SLURM_PROCID") != rank or _int(env, "SLURM_NTASKS") != size:
        return None
    local, node = _int(env, "SLURM_LOCALID"), _int(env, "SLURM_NODEID")
    if local is None or node is None:
        return None
    spec = env.get("SLURM_STEP_TASKS_PER_NODE") or env.get("SLURM_TASKS_PER_NODE", "")
    counts = _expand_counts(spec)
    per_node = counts[node] if node < len(counts) else None
    return local, per_node or size, node


def rank_info_or_single(env: Mapping[str, str] | None = None) -> RankInfo:
    """Placement, or rank 0 of 1 when nothing says otherwise (a plain ``python train.py``)."""
    return rank_info(env) or RankInfo(0, 0, 1, 1, 0, "none")


def get_rank() -> int:
    return rank_info_or_single().rank


def get_world_size() -> int:
    return rank_info_or_single().world_size


def get_local_rank() -> int:
    return rank_info_or_single().local_rank


def sizes_from_env(env: Mapping[str, str] | None = None) -> dict[str, int]:
    """TP/PP/CP the launcher passed down; missing or unreadable values mean 1."""
    env = os.environ if env is None else env
    out = {}
    for key, var in SIZE_VARS.items():
        value = _int(env, var)
        out[key] = value if value is not None and value > 0 else 1
    return out


# --- scheduler facts -------------------------------------------------------------------------


def scheduler(env: Mapping[str, str] | None = None) -> str:
    """``PBS``, ``SLURM`` or ``none``, from the job's environment."""
    env = os.environ if env is None else env
    if env.get("PBS_JOBID"):
        return "PBS"
    if env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID"):
        return "SLURM"
    return "none"


def job_id(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    return env.get("PBS_JOBID") or env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID") or None


def hostname() -> str:
    import socket  # here, not at the top: every rank imports this module, few ask its host

    return socket.gethostname()


def pbs_hosts(nodefile: str | os.PathLike[str]) -> list[str]:
    """Hosts of a PBS nodefile in first-seen order; PBS repeats a host once per slot."""
    seen: dict[str, None] = {}
    with open(nodefile, errors="replace") as lines:
        text = lines.read()
    for line in text.splitlines():
        host = line.strip()
        if host and not host.startswith("#"):
            seen.setdefault(host, None)
    return list(seen)


def expand_nodelist(spec: str) -> list[str]:
    """Expand Slurm's compressed host list, e.g. ``nid[001-003,007],login-1x[1-2]``.

    Handles several bracket groups per name (``a[1-2]b[3-4]``), zero padding, and commas both
    between names and inside brackets, the forms ``scontrol show hostnames`` understands.
    """
    hosts: list[str] = []
    for item in _split_top_level(spec.strip()):
        hosts.extend(_expand_one(item))
    return hosts


def _split_top_level(spec: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(spec):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        elif ch == "," and depth == 0:
            items.append(spec[start:i])
            start = i + 1
    items.append(spec[start:])
    return [s.strip() for s in items if s.strip()]


def _expand_one(item: str) -> list[str]:
    open_at = item.find("[")
    if open_at < 0:
        return [item]
    close_at = item.find("]", open_at)
    if close_at < 0:
        raise ValueError(f"unbalanced '[' in host list entry {item!r}")
    prefix, body, rest = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
    tails = _expand_one(rest) if rest else [""]
    out = []
    for part in body.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            if not (lo.isdigit() and hi.isdigit()) or int(hi) < int(lo):
                raise ValueError(f"bad range {part!r} in host list entry {item!r}")
            width = len(lo)
            numbers = [str(n).zfill(width) for n in range(int(lo), int(hi) + 1)]
        elif part.isdigit():
            numbers = [part]
        else:
            raise ValueError(f"bad host list element {part!r} in {item!r}")
        out.extend(f"{prefix}{n}{tail}" for n in numbers for tail in tails)
    return out


def job_hosts(env: Mapping[str, str] | None = None) -> list[str]:
    """Hosts of the current allocation in order; this host alone outside a scheduler."""
    env = os.environ if env is None else env
    sched = scheduler(env)
    if sched == "PBS" and env.get("PBS_NODEFILE"):
        try:
            hosts = pbs_hosts(env["PBS_NODEFILE"])
        except OSError:
            hosts = []
        if hosts:
            return hosts
    if sched == "SLURM":
        spec = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
        if spec:
            return expand_nodelist(spec)
    return [hostname()]
