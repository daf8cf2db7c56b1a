"""What this job has: scheduler, hosts, accelerators per host and walltime left.

Everything that reads text (nodelists, ``qstat``/``squeue`` output, vendor tool listings) is a
pure function so it can be tested without the tools; :func:`detect_allocation` only gathers
inputs and calls them. Every external command runs with a timeout, because the UI shows this
within a second of starting and a hung ``qstat`` must not hold it up.

Accelerators per host are found in this order, first answer wins:

1. ``EZPZ_ACCELERATORS_PER_HOST`` (``4`` or ``cuda:4``), for tests and sites nothing else knows;
2. what the job's environment already restricts: ``CUDA_VISIBLE_DEVICES``, ``ZE_AFFINITY_MASK``,
   ``ROCR_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES``, ``SLURM_GPUS_ON_NODE``;
3. the fixed node layout of a known machine (Aurora and Sunspot: 12 XPU tiles, Polaris: 4 A100,
   Sophia: 8 A100, Frontier: 8 MI250X GCDs). This comes before the vendor tools because
   ``xpu-smi`` counts cards while torch (flat hierarchy) counts the two tiles of each card;
4. vendor tools, when ``probe`` is true: ``nvidia-smi -L``, ``xpu-smi discovery``, ``rocm-smi``;
5. otherwise the host is CPU-only and offers :data:`CPU_SLOTS` ranks.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ezpz_tui.core.runs.tools import run_tool
from runtime.env import _expand_counts, hostname, job_hosts, job_id, scheduler

# Two ranks per CPU-only host: enough that the demo really exercises collectives on a laptop or
# CI box, few enough not to oversubscribe a 2-core machine. Ask for more with ranks per node.
CPU_SLOTS = 2
OVERRIDE_VAR = "EZPZ_ACCELERATORS_PER_HOST"
KINDS = ("cuda", "xpu", "rocm", "cpu")

# Accelerator kind of each known machine, and the node layout where every compute node is the
# same. Perlmutter has CPU-only nodes too, so only its kind is known, not its count.
MACHINE_KIND = {
    "Aurora": "xpu",
    "Sunspot": "xpu",
    "Polaris": "cuda",
    "Sirius": "cuda",
    "Sophia": "cuda",
    "Perlmutter": "cuda",
    "Frontier": "rocm",
}
MACHINE_LAYOUT = {
    "Aurora": 12,
    "Sunspot": 12,
    "Polaris": 4,
    "Sirius": 4,
    "Sophia": 8,
    "Frontier": 8,
}

# ALCF HPE Cray EX node names: x<rack row digit><3 digits>c<chassis>s<slot>b<board>n<node>.
_ALCF_NODE = re.compile(r"^x(\d)\d{3}c\d+s\d+b\d+n\d+$")
_ALCF_ROW = {"4": "Aurora", "1": "Sunspot", "3": "Polaris"}
_DOMAIN_WORDS = ("aurora", "sunspot", "sirius", "polaris", "sophia", "perlmutter", "frontier")


@dataclass(frozen=True)
class Allocation:
    """The job as the launcher needs it, read once; the UI counts walltime down from it."""

    scheduler: str  # "PBS" | "SLURM" | "none"
    job_id: str | None
    machine: str
    hosts: tuple[str, ...]
    accelerators_per_host: int
    accelerator_kind: str  # "cuda" | "xpu" | "rocm" | "cpu"
    accelerator_source: str
    walltime_left_s: float | None
    walltime_checked_at: float
    nodefile: str | None
    cpus_per_host: int

    def walltime_left(self, now: float | None = None) -> float | None:
        """Seconds left at ``now``, counted down from the reading so no re-query is needed."""
        if self.walltime_left_s is None:
            return None
        now = time.time() if now is None else now
        return self.walltime_left_s - (now - self.walltime_checked_at)


# --- pure parsing ---------------------------------------------------------------------------


def format_duration(seconds: float | None) -> str:
    """``H:MM:SS`` for walltime left, ``-`` when the scheduler does not say."""
    if seconds is None:
        return "-"
    whole = max(0, int(seconds))
    hours, rem = divmod(whole, 3600)
    return f"{hours}:{rem // 60:02d}:{rem % 60:02d}"


def parse_duration(text: str) -> float | None:
    """Seconds in ``[D-]HH:MM:SS``, ``MM:SS`` or ``SS``; None for UNLIMITED, NOT_SET and junk.

    Both Slurm (``1-02:03:04``) and PBS (``72:00:00``, hours past 24) write durations this way.
    """
    text = text.strip()
    days = 0
    if "-" in text:
        head, text = text.split("-", 1)
        if not head.isdigit():
            return None
        days = int(head)
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        return None
    seconds = 0
    for part in parts:
        seconds = seconds * 60 + int(part)
    return float(days * 86400 + seconds)


def parse_squeue_time_left(output: str) -> float | None:
    """``squeue -h -j JOB -o %L`` prints one line: the time left, or UNLIMITED / NOT_SET."""
    lines = output.strip().splitlines()
    return parse_duration(lines[0]) if lines else None


def _qstat_fields(output: str) -> dict[str, str]:
    """Flatten ``qstat -f`` text or ``qstat -fF json`` into keys like ``Resource_List.walltime``."""
    try:
        data = json.loads(output)
    except ValueError:
        fields = {}
        for line in output.splitlines():
            key, sep, value = line.strip().partition(" = ")
            if sep:
                fields[key.strip()] = value.strip()
        return fields
    jobs = data.get("Jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, dict) or not jobs:
        return {}
    job = next(iter(jobs.values()))
    fields = {}
    for key, value in job.items():
        if isinstance(value, dict):
            fields.update({f"{key}.{k}": str(v) for k, v in value.items()})
        else:
            fields[key] = str(value)
    return fields


def parse_qstat_walltime(output: str, now: float) -> float | None:
    """Walltime left at ``now`` from ``qstat -f`` (text or JSON); None when it does not say.

    The start time (``stime``) gives the exact answer; ``resources_used.walltime`` is only
    refreshed every few minutes by the MOM, so it is the fallback.
    """
    fields = _qstat_fields(output)
    limit = parse_duration(fields.get("Resource_List.walltime", ""))
    if limit is None:
        return None
    start = fields.get("stime")
    if start:
        try:
            started = time.mktime(time.strptime(start, "%a %b %d %H:%M:%S %Y"))
        except ValueError:
            started = None
        if started is not None:
            return limit - (now - started)
    used = parse_duration(fields.get("resources_used.walltime", ""))
    return None if used is None else limit - used


def count_listed_devices(spec: str) -> int:
    """Devices in a ``*_VISIBLE_DEVICES`` / ``ZE_AFFINITY_MASK`` list; 0 when it hides them all."""
    spec = spec.strip()
    if not spec or spec in ("-1", "none", "NoDevFiles"):
        return 0
    return len([item for item in spec.split(",") if item.strip()])


def parse_nvidia_smi(output: str) -> int:
    """``nvidia-smi -L`` prints one ``GPU n: ...`` line per GPU (MIG devices are indented)."""
    return sum(1 for line in output.splitlines() if line.startswith("GPU "))


def parse_xpu_smi(output: str) -> int:
    """Cards in ``xpu-smi discovery`` output, JSON (``-j``) or the boxed table."""
    try:
        data = json.loads(output)
    except ValueError:
        return len(re.findall(r"^\|\s*\d+\s*\|\s*Device Name", output, re.MULTILINE))
    devices = data.get("device_list") if isinstance(data, dict) else None
    return len(devices) if isinstance(devices, list) else 0


def parse_rocm_smi(output: str) -> int:
    """GPUs in ``rocm-smi --showid``: one ``GPU[n]`` index per device, repeated per field."""
    return len(set(re.findall(r"^GPU\[(\d+)\]", output, re.MULTILINE)))


def detect_machine(env: Mapping[str, str], host: str, hosts: Sequence[str] = ()) -> str:
    """Name the machine the way ezpz's ``get_machine`` does, without DNS lookups.

    Site variables first (NERSC_HOST, LMOD_SYSTEM_NAME), then site names in the PBS server and
    submit host, then node-name patterns of this host and of the first allocated host.
    """
    if env.get("NERSC_HOST", "").lower() == "perlmutter":
        return "Perlmutter"
    if env.get("LMOD_SYSTEM_NAME", "").lower() == "frontier":
        return "Frontier"
    names = [env.get("PBS_O_HOST", ""), env.get("PBS_SERVER", ""), host, *hosts[:1]]
    for name in names:
        labels = name.lower().replace("-", ".").split(".")
        for word in _DOMAIN_WORDS:
            if word in labels:
                return word.capitalize()
    for name in (host, *hosts[:1]):
        short = name.split(".")[0].lower()
        match = _ALCF_NODE.match(short)
        if match and match.group(1) in _ALCF_ROW:
            return _ALCF_ROW[match.group(1)]
        if short.startswith("frontier"):
            return "Frontier"
        if short.startswith("sophia"):
            return "Sophia"
        if re.fullmatch(r"nid\d+", short):
            return "Perlmutter"
    return host.split(".")[0]


def accelerators_from_env(env: Mapping[str, str], machine: str) -> tuple[str, int, str] | None:
    """(kind, count, source) from the override or what the job environment restricts to."""
    override = env.get(OVERRIDE_VAR, "").strip()
    if override:
        kind, _, count = override.rpartition(":")
        kind = kind.lower() or MACHINE_KIND.get(machine, "cpu")
        if kind in KINDS and count.isdigit() and int(count) > 0:
            return kind, int(count), f"{OVERRIDE_VAR}={override}"
    hints = (
        ("CUDA_VISIBLE_DEVICES", "cuda"),
        ("ZE_AFFINITY_MASK", "xpu"),
        ("ROCR_VISIBLE_DEVICES", "rocm"),
        ("HIP_VISIBLE_DEVICES", "rocm"),
    )
    for var, kind in hints:
        count = count_listed_devices(env.get(var, ""))
        if count:
            return kind, count, f"{var}={env[var]}"
    gpus = env.get("SLURM_GPUS_ON_NODE", "").strip()
    if gpus.isdigit() and int(gpus) > 0:
        return MACHINE_KIND.get(machine, "cuda"), int(gpus), f"SLURM_GPUS_ON_NODE={gpus}"
    return None


# --- probing --------------------------------------------------------------------------------


def _run(argv: list[str], timeout_s: float) -> str | None:
    """stdout of a tool, or None when it is missing, fails or runs past ``timeout_s``."""
    proc = run_tool(argv, timeout_s)
    return proc.stdout if proc is not None and proc.returncode == 0 else None


_VENDOR_TOOLS: tuple[tuple[str, list[str], Callable[[str], int]], ...] = (
    ("cuda", ["nvidia-smi", "-L"], parse_nvidia_smi),
    ("xpu", ["xpu-smi", "discovery", "-j"], parse_xpu_smi),
    ("rocm", ["rocm-smi", "--showid"], parse_rocm_smi),
)


def probe_accelerators(timeout_s: float) -> tuple[str, int, str] | None:
    """(kind, count, source) from the first vendor tool that lists a device."""
    for kind, argv, parse in _VENDOR_TOOLS:
        output = _run(argv, timeout_s)
        count = parse(output) if output else 0
        if count:
            return kind, count, f"`{' '.join(argv)}` lists {count}"
    return None


def probe_walltime(sched: str, job: str | None, timeout_s: float) -> float | None:
    """Seconds left according to the scheduler; None when it cannot tell in time."""
    if job is None:
        return None
    if sched == "PBS":
        output = _run(["qstat", "-f", job], timeout_s)
        return parse_qstat_walltime(output, time.time()) if output else None
    if sched == "SLURM":
        output = _run(["squeue", "-h", "-j", job, "-o", "%L"], timeout_s)
        return parse_squeue_time_left(output) if output else None
    return None


_NODE_ADDR = re.compile(r"\bNodeAddr=(\S+)")


def parse_node_addr(output: str) -> str | None:
    """The address in ``scontrol show node -o NODE`` output."""
    match = _NODE_ADDR.search(output)
    return match.group(1) if match else None


def probe_node_address(host: str, timeout_s: float = 5.0) -> str | None:
    """Where Slurm reaches ``host`` (its NodeAddr), which a site may set apart from the name;
    None when scontrol cannot tell in time."""
    output = _run(["scontrol", "show", "node", "-o", host], timeout_s)
    return parse_node_addr(output) if output else None


def _walltime_from_env(env: Mapping[str, str], now: float) -> float | None:
    """Slurm 23.02+ exports the projected end; reading it costs no scheduler round trip."""
    end = env.get("SLURM_JOB_END_TIME", "").strip()
    return float(end) - now if end.isdigit() else None


def _cpus_per_host(env: Mapping[str, str]) -> int:
    """CPUs Slurm gave this job on each node (the fewest, where nodes differ), else the CPUs
    this process may run on.

    ``SLURM_JOB_CPUS_PER_NODE`` comes first: salloc's shell has no ``SLURM_CPUS_ON_NODE``, and
    ``salloc -N2 -n2`` on 2-CPU nodes gives the job one CPU per node, not the two this process
    may run on; srun refuses a step asking for more.
    """
    counts = _expand_counts(env.get("SLURM_JOB_CPUS_PER_NODE", "").strip())
    if counts and min(counts) > 0:
        return min(counts)
    slurm = env.get("SLURM_CPUS_ON_NODE", "").strip()
    if slurm.isdigit() and int(slurm) > 0:
        return int(slurm)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def detect_allocation(
    env: Mapping[str, str] | None = None,
    probe: bool = True,
    timeout_s: float = 5.0,
    host: str | None = None,
) -> Allocation:
    """Read the job from ``env`` (default: this process's), probing tools only when ``probe``.

    ``host`` stands in for this machine's hostname so another machine can be simulated. Each
    tool gets ``timeout_s``, and the accelerator and walltime probes run side by side.
    """
    env = os.environ if env is None else env
    host = host or hostname()
    sched = scheduler(env)
    job = job_id(env)
    try:
        hosts = tuple(job_hosts(env))
    except ValueError:  # a nodelist runtime.env cannot expand; launch on this host alone
        hosts = (host,)
    if sched == "none":
        hosts = (host,)
    machine = detect_machine(env, host, hosts)
    nodefile = env.get("PBS_NODEFILE") if sched == "PBS" else None

    now = time.time()
    walltime = _walltime_from_env(env, now)
    found = accelerators_from_env(env, machine)
    if found is None and machine in MACHINE_LAYOUT:
        count = MACHINE_LAYOUT[machine]
        found = MACHINE_KIND[machine], count, f"every {machine} node has {count}"
    if probe and (found is None or walltime is None):
        ask_scheduler = walltime is None and job is not None  # outside a job it has no answer
        if ask_scheduler and found is None:  # both asked at once: each may take its timeout
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=2) as pool:
                wall_future = pool.submit(probe_walltime, sched, job, timeout_s)
                probed = probe_accelerators(timeout_s)
                walltime = wall_future.result()
        else:
            walltime = probe_walltime(sched, job, timeout_s) if ask_scheduler else walltime
            probed = probe_accelerators(timeout_s) if found is None else None
        found = found or probed
        now = time.time()
    if found is None:
        found = "cpu", CPU_SLOTS, f"no accelerator found: {CPU_SLOTS} CPU ranks per host"
    kind, count, source = found
    return Allocation(
        scheduler=sched,
        job_id=job,
        machine=machine,
        hosts=hosts,
        accelerators_per_host=count,
        accelerator_kind=kind,
        accelerator_source=source,
        walltime_left_s=walltime,
        walltime_checked_at=now,
        nodefile=nodefile,
        cpus_per_host=_cpus_per_host(env),
    )
