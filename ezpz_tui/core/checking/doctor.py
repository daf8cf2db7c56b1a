"""Is this environment ready to launch? One row per check: ok/warning/error, why, what to do.

Each check is bounded in time and never raises: anything that needs torch or mpi4py runs in a
subprocess with a timeout (the TUI process imports neither), a check that runs out of time is a
warning that says so, and a check that crashes is an error row carrying the exception. The
checks run side by side in threads, so the whole doctor takes about as long as its slowest probe
(importing torch); a probe stuck past the deadline (a hung network filesystem) is abandoned.
"""

from __future__ import annotations

import concurrent.futures
import json
import netrc
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from ezpz_tui.core.launching.allocation import MACHINE_KIND, Allocation
from ezpz_tui.core.launching.launcher import Which, detect_launcher_kind
from ezpz_tui.core.launching.plan import LaunchPlan, short_host
from runtime.env import RANK_VARS, expand_nodelist, hostname, pbs_hosts

FREE_SPACE_WARN_BYTES = 5 * 2**30
WALLTIME_WARN_S = 600.0
DEFAULT_TIMEOUT_S = 30.0
# Filesystems whose files other nodes cannot see; rank logs from remote hosts would vanish.
_NODE_LOCAL_FS = frozenset({"tmpfs", "ramfs", "overlay", "devtmpfs"})

_MPI4PY_PROBE = """
import json
try:
    import mpi4py
    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False
    from mpi4py import MPI
    out = {"version": mpi4py.__version__, "library": MPI.Get_library_version().strip()}
except Exception as exc:
    out = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(out))
"""

_TORCH_PROBE = """
import json
try:
    import torch
except Exception as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
    raise SystemExit(0)
out = {"version": torch.__version__, "hip": torch.version.hip}
try:
    from runtime import device
    chosen = device.device_type()
    out["device"], out["device_reason"] = chosen.name, chosen.reason
    out["count"] = device.accelerator_count(chosen.name) if chosen.name in ("cuda", "xpu") else 0
    backend = device.backend(chosen.name)
    out["backend"], out["backend_reason"] = backend.name, backend.reason
except Exception as exc:
    out["device_error"] = f"{type(exc).__name__}: {exc}"
dist = torch.distributed
out["available"] = {
    name: bool(getattr(dist, f"is_{name}_available", lambda: False)())
    for name in ("nccl", "xccl", "gloo", "mpi")
}
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Check:
    """One doctor row."""

    name: str
    level: str  # "ok" | "warning" | "error"
    reason: str
    remedy: str = ""


class _Context:
    """What every check may read, gathered once."""

    def __init__(
        self,
        alloc: Allocation,
        plan: LaunchPlan | None,
        outputs: Path,
        timeout_s: float,
        env: Mapping[str, str],
        python: str,
        which: Which,
    ) -> None:
        self.alloc = alloc
        self.plan = plan
        self.outputs = outputs
        self.timeout_s = timeout_s
        self.env = env
        self.python = python
        self.which = which
        self.ppn = plan.ranks_per_node(alloc) if plan else alloc.accelerators_per_host

    def launcher(self) -> str:
        """The plan's launcher, with "auto" resolved the way a launch would resolve it."""
        chosen = self.plan.launcher if self.plan else "auto"
        if chosen == "auto":
            return detect_launcher_kind(self.alloc, self.which, self.python)
        return chosen

    def python_json(self, code: str) -> dict[str, Any]:
        """Run ``code`` in this Python and read the JSON it prints; raises TimeoutExpired."""
        proc = subprocess.run(
            [self.python, "-c", code],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=self.timeout_s,
            env=dict(self.env),
            stdin=subprocess.DEVNULL,
        )
        lines = proc.stdout.strip().splitlines()
        if not lines:
            tail = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
            return {"error": f"the probe printed nothing ({tail[0]})"}
        try:
            return json.loads(lines[-1])
        except ValueError:
            return {"error": f"the probe printed {lines[-1][:200]!r} instead of its answer"}


def _timed_out(names: tuple[str, ...], seconds: float) -> list[Check]:
    return [
        Check(
            name,
            "warning",
            f"The check did not finish within {seconds:g} s.",
            "Run the doctor again; if it keeps timing out, the filesystem or a module is hung.",
        )
        for name in names
    ]


# --- MPI ------------------------------------------------------------------------------------


def mpi_family(text: str) -> str | None:
    """Which MPI a version string belongs to; launcher and library must be the same family."""
    lowered = text.lower()
    if "open mpi" in lowered or "openrte" in lowered or "prte" in lowered:
        return "Open MPI"
    if "intel(r) mpi" in lowered:
        return "Intel MPI"
    if "mvapich" in lowered:
        return "MVAPICH"
    if "cray" in lowered or "pals" in lowered:
        return "Cray MPICH"
    if "mpich" in lowered or "hydra" in lowered:
        return "MPICH"
    return None


def _compatible(launcher: str, library: str) -> bool:
    """Open MPI pairs only with itself; the MPICH family shares the PMI wire protocol."""
    return (launcher == "Open MPI") == (library == "Open MPI")


def _check_mpi(ctx: _Context) -> list[Check]:
    kind = ctx.launcher()
    try:
        probe = ctx.python_json(_MPI4PY_PROBE)
    except subprocess.TimeoutExpired:
        return _timed_out(("mpi4py", "launcher"), ctx.timeout_s)
    rows = []
    library = ""
    if "error" in probe:
        rows.append(
            Check(
                "mpi4py",
                "warning" if kind == "torchrun" else "error",
                f"mpi4py is not importable: {probe['error']}.",
                "pip install 'ezpz-tui[mpich]', or load the site's mpi4py module; ranks use MPI "
                "to agree on the rendezvous address.",
            )
        )
    else:
        library = probe["library"]
        first = " ".join(library.splitlines()[0].split()) if library else "an unnamed MPI"
        rows.append(Check("mpi4py", "ok", f"mpi4py {probe['version']} with {first}."))
    rows.append(_launcher_row(ctx, kind, library))
    return rows


def _launcher_row(ctx: _Context, kind: str, library: str) -> Check:
    if kind == "torchrun":
        return Check("launcher", "ok", "torchrun runs as python -m torch.distributed.run.")
    local = ctx.alloc.scheduler == "none"
    sibling = Path(ctx.python).parent / kind
    binary = str(sibling) if local and sibling.is_file() else ctx.which(kind)
    if binary is None:
        return Check(
            "launcher",
            "error",
            f"{kind} is not on PATH.",
            "Load the MPI or Slurm module that provides it, or choose another launcher.",
        )
    if kind == "srun":
        return Check("launcher", "ok", f"srun at {binary}; ranks get --mpi=pmi2.")
    try:
        proc = subprocess.run(
            [binary, "--version"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=ctx.timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return _timed_out(("launcher",), ctx.timeout_s)[0]
    except OSError as exc:
        return Check("launcher", "error", f"{binary} cannot run: {exc}.", "Check the module.")
    launcher_family = mpi_family(proc.stdout + proc.stderr)
    library_family = mpi_family(library)
    if launcher_family and library_family and not _compatible(launcher_family, library_family):
        return Check(
            "launcher",
            "error",
            f"{binary} is {launcher_family} but mpi4py uses {library_family}: every rank "
            "would start as its own MPI world of 1.",
            "Put the matching launcher first on PATH, or rebuild mpi4py against this MPI "
            "(pip install --no-binary mpi4py mpi4py).",
        )
    what = launcher_family or "an MPI launcher not recognised from --version"
    return Check("launcher", "ok", f"{kind} at {binary} ({what}).")


# --- scheduler and hosts --------------------------------------------------------------------


def _check_scheduler(ctx: _Context) -> list[Check]:
    alloc = ctx.alloc
    if alloc.scheduler != "none":
        hosts = f"{len(alloc.hosts)} host" + ("" if len(alloc.hosts) == 1 else "s")
        return [
            Check(
                "scheduler",
                "ok",
                f"{alloc.scheduler} job {alloc.job_id} on {alloc.machine}, {hosts}.",
            )
        ]
    if alloc.machine in MACHINE_KIND:
        start = "qsub -I" if alloc.machine not in ("Perlmutter", "Frontier") else "salloc"
        return [
            Check(
                "scheduler",
                "warning",
                f"No job: this looks like a {alloc.machine} login node, and ranks would run here.",
                f"Start an interactive job ({start} ...) and run ezpz-tui inside it.",
            )
        ]
    return [Check("scheduler", "ok", "No PBS or Slurm job: runs use this host only.")]


def _check_hostfile(ctx: _Context) -> list[Check]:
    alloc, env = ctx.alloc, ctx.env
    if alloc.scheduler == "none":
        if env.get("PBS_NODEFILE"):
            return [
                Check(
                    "hostfile",
                    "warning",
                    "PBS_NODEFILE is set without a PBS job; a plain mpiexec from the mpich wheel "
                    "would send ranks to the hosts it lists (ezpz-tui passes -rmk user to "
                    "ignore it).",
                    "unset PBS_NODEFILE",
                )
            ]
        return [Check("hostfile", "ok", "A single host needs no hostfile.")]
    if alloc.scheduler == "PBS":
        nodefile = env.get("PBS_NODEFILE", "")
        if not nodefile:
            return [
                Check(
                    "hostfile",
                    "error",
                    "PBS_JOBID is set but PBS_NODEFILE is not, so the hosts are unknown.",
                    "Run ezpz-tui inside the job's shell (qsub -I), not from another login.",
                )
            ]
        try:
            listed = tuple(pbs_hosts(nodefile))
        except OSError as exc:
            return [
                Check(
                    "hostfile",
                    "error",
                    f"Cannot read PBS_NODEFILE {nodefile}: {exc.strerror or exc}.",
                    "Run ezpz-tui on the job's head node, where PBS writes the nodefile.",
                )
            ]
        source = f"PBS_NODEFILE {nodefile}"
    else:
        spec = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
        try:
            listed = tuple(expand_nodelist(spec))
        except ValueError as exc:
            return [Check("hostfile", "error", f"Cannot read the Slurm node list: {exc}.", "")]
        source = "SLURM_JOB_NODELIST"
    if listed != alloc.hosts:
        return [
            Check(
                "hostfile",
                "warning",
                f"{source} lists {len(listed)} hosts now; {len(alloc.hosts)} were read at start.",
                "Re-read the allocation (restart ezpz-tui) before launching.",
            )
        ]
    here = short_host(hostname())
    if here not in {short_host(h) for h in listed}:
        return [
            Check(
                "hostfile",
                "warning",
                f"This host ({here}) is not one of the job's {len(listed)} hosts.",
                "Run ezpz-tui on the job's head node so the launcher reaches its hosts.",
            )
        ]
    return [Check("hostfile", "ok", f"{source} matches the allocation ({len(listed)} hosts).")]


# --- torch ----------------------------------------------------------------------------------


def _check_torch(ctx: _Context) -> list[Check]:
    try:
        probe = ctx.python_json(_TORCH_PROBE)
    except subprocess.TimeoutExpired:
        return _timed_out(("torch", "backend"), ctx.timeout_s)
    if "error" in probe or "device_error" in probe:
        if "error" in probe:
            reason = f"torch is not importable: {probe['error']}."
            remedy = "Install torch for this machine's accelerators, or load its module."
        else:
            reason = f"torch {probe['version']} cannot pick a device: {probe['device_error']}"
            remedy = "Fix or unset TORCH_DEVICE / TORCH_BACKEND."
        unknown = "No backend can be chosen until torch picks a device."
        return [Check("torch", "error", reason, remedy), Check("backend", "error", unknown)]
    return [_torch_row(ctx, probe), _backend_row(ctx, probe)]


def _torch_row(ctx: _Context, probe: dict[str, Any]) -> Check:
    alloc, version, device = ctx.alloc, probe["version"], probe["device"]
    count = probe.get("count", 0)
    wanted = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu"}.get(alloc.accelerator_kind)
    if wanted and device != wanted:
        return Check(
            "torch",
            "error",
            f"torch {version} uses {device} ({probe['device_reason']}), but the hosts have "
            f"{alloc.accelerators_per_host} {alloc.accelerator_kind} accelerators.",
            f"Install a torch built for {alloc.accelerator_kind}, or check that the devices are "
            "visible (CUDA_VISIBLE_DEVICES, ZE_AFFINITY_MASK).",
        )
    if wanted == "cuda" and (alloc.accelerator_kind == "rocm") != bool(probe.get("hip")):
        build = "ROCm" if probe.get("hip") else "CUDA"
        return Check(
            "torch",
            "error",
            f"torch {version} is a {build} build but the hosts have {alloc.accelerator_kind} GPUs.",
            f"Install the torch wheel built for {alloc.accelerator_kind}.",
        )
    if wanted and count < ctx.ppn:
        return Check(
            "torch",
            "error",
            f"torch {version} sees {count} {device} devices but {ctx.ppn} ranks per node are "
            "planned.",
            "Lower ranks per node, or make every device visible to this process.",
        )
    seen = f"{count} {device} devices" if wanted else f"{device}: {probe['device_reason']}"
    return Check("torch", "ok", f"torch {version}; {seen}.")


def _backend_row(ctx: _Context, probe: dict[str, Any]) -> Check:
    name, reason = probe["backend"], probe["backend_reason"]
    available = probe.get("available", {})
    forced = reason.startswith("forced")
    if name in available and not available[name]:
        return Check(
            "backend",
            "error",
            f"{name} is chosen ({reason}) but this torch does not provide it.",
            "Unset TORCH_BACKEND or install a torch that has it.",
        )
    if ctx.alloc.accelerator_kind != "cpu" and name == "gloo" and not forced:
        return Check(
            "backend",
            "warning",
            f"Collectives fall back to gloo: {reason}.",
            "Install a torch with NCCL (CUDA/ROCm) or XCCL/oneCCL (XPU) for fast collectives.",
        )
    return Check("backend", "ok", f"{name}: {reason}.")


# --- filesystem, environment, time, credentials ---------------------------------------------


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _fs_type(path: Path) -> str | None:
    """Filesystem type of ``path`` from /proc/mounts (longest mount point prefix); Linux only."""
    try:
        mounts = Path("/proc/mounts").read_text(errors="replace").splitlines()
    except OSError:
        return None
    best, fstype = "", None
    target = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, parts[2]
    return fstype


def _check_outputs(ctx: _Context) -> list[Check]:
    outputs = ctx.outputs
    base = _existing_ancestor(outputs)
    if not base.is_dir():
        return [
            Check(
                "outputs",
                "error",
                f"{base} is a file, so the output directory {outputs} cannot be made.",
                "Choose another output directory.",
            )
        ]
    try:
        with tempfile.TemporaryFile(dir=base, prefix=".ezpz-doctor-"):
            pass
    except OSError as exc:
        return [
            Check(
                "outputs",
                "error",
                f"Cannot write in {base}: {exc.strerror or exc}.",
                "Choose a writable output directory (e.g. on the project filesystem).",
            )
        ]
    free = shutil.disk_usage(base).free
    gib = free / 2**30
    if free < FREE_SPACE_WARN_BYTES:
        return [
            Check(
                "outputs",
                "warning",
                f"Only {gib:.1f} GiB free under {base}; logs and checkpoints may fill it.",
                "Free space or choose an output directory on a larger filesystem.",
            )
        ]
    fstype = _fs_type(base)
    others = len(ctx.alloc.hosts) - 1
    if others and fstype in _NODE_LOCAL_FS:
        who = "the other host" if others == 1 else f"the other {others} hosts"
        return [
            Check(
                "outputs",
                "warning",
                f"{base} is on {fstype}, which {who} cannot see: their rank logs would not "
                "reach this directory.",
                "Use an output directory on a shared filesystem (Lustre, GPFS, NFS).",
            )
        ]
    where = "is writable" if base == outputs.absolute() else f"can be created in {base}"
    return [Check("outputs", "ok", f"{outputs} {where}; {gib:.0f} GiB free.")]


def _check_rendezvous_env(ctx: _Context) -> list[Check]:
    stale = [f"{name}={ctx.env[name]}" for name in RANK_VARS if ctx.env.get(name)]
    if not stale:
        return [Check("rank env", "ok", "No MASTER_ADDR, MASTER_PORT or RANK in this shell.")]
    names = " ".join(item.split("=", 1)[0] for item in stale)
    return [
        Check(
            "rank env",
            "warning",
            f"{', '.join(stale)} set in this shell would leak into the ranks and can make a "
            "rendezvous wait 30 minutes for peers that never come; ezpz-tui removes them from "
            "the launcher's environment.",
            f"unset {names}",
        )
    ]


def _check_walltime(ctx: _Context) -> list[Check]:
    alloc = ctx.alloc
    if alloc.scheduler == "none":
        return [Check("walltime", "ok", "No job, so no walltime limit.")]
    left = alloc.walltime_left()
    if left is None:
        return [
            Check(
                "walltime",
                "warning",
                f"Could not read the walltime left from {alloc.scheduler}.",
                "Check with qstat -f $PBS_JOBID or squeue -j $SLURM_JOB_ID.",
            )
        ]
    minutes = left / 60
    if left <= 0:
        return [Check("walltime", "error", "The job is past its walltime.", "Start a new job.")]
    if left < WALLTIME_WARN_S:
        return [
            Check(
                "walltime",
                "warning",
                f"Only {minutes:.0f} minutes of walltime left.",
                "Keep the run short or start a new job.",
            )
        ]
    return [Check("walltime", "ok", f"{minutes / 60:.1f} hours of walltime left.")]


def _check_wandb(ctx: _Context) -> list[Check]:
    if find_spec("wandb") is None:
        return [Check("wandb", "ok", "wandb is not installed; metrics stay in the run directory.")]
    mode = ctx.env.get("WANDB_MODE", "").lower()
    if mode in ("offline", "disabled"):
        return [Check("wandb", "ok", f"wandb is installed and WANDB_MODE={mode}.")]
    if ctx.env.get("WANDB_API_KEY"):
        return [Check("wandb", "ok", "wandb is installed and WANDB_API_KEY is set.")]
    try:
        found = netrc.netrc().authenticators("api.wandb.ai") is not None
    except (OSError, netrc.NetrcParseError):
        found = False
    if found:
        return [Check("wandb", "ok", "wandb is installed and ~/.netrc has api.wandb.ai.")]
    return [
        Check(
            "wandb",
            "warning",
            "wandb is installed but has no credentials: a run that calls wandb.init will fail "
            "or wait for a login prompt no one answers.",
            "wandb login, or export WANDB_MODE=offline.",
        )
    ]


_CHECKS: tuple[tuple[tuple[str, ...], Callable[[_Context], list[Check]]], ...] = (
    (("mpi4py", "launcher"), _check_mpi),
    (("scheduler",), _check_scheduler),
    (("torch", "backend"), _check_torch),
    (("hostfile",), _check_hostfile),
    (("outputs",), _check_outputs),
    (("rank env",), _check_rendezvous_env),
    (("walltime",), _check_walltime),
    (("wandb",), _check_wandb),
)


def _guarded(
    names: tuple[str, ...], check: Callable[[_Context], list[Check]], ctx: _Context
) -> list[Check]:
    try:
        return check(ctx)
    except Exception as exc:  # a crashing check is a row, never a traceback in the UI
        reason = f"The check crashed: {type(exc).__name__}: {exc}"
        return [Check(name, "error", reason, "Please report this message.") for name in names]


def run_checks(
    alloc: Allocation,
    plan: LaunchPlan | None = None,
    *,
    outputs: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
    python: str = sys.executable,
    which: Which = shutil.which,
) -> list[Check]:
    """All checks, in a fixed order, within about ``timeout_s`` (plus a second of grace).

    ``plan`` sets the ranks per node and launcher checked against; ``env`` defaults to this
    process's environment and is also what the probes run with.
    """
    env = os.environ if env is None else env
    ctx = _Context(alloc, plan, Path(outputs), timeout_s, env, python, which)
    pool = ThreadPoolExecutor(max_workers=len(_CHECKS), thread_name_prefix="ezpz-doctor")
    futures: list[tuple[tuple[str, ...], Future[list[Check]]]] = [
        (names, pool.submit(_guarded, names, check, ctx)) for names, check in _CHECKS
    ]
    deadline = time.monotonic() + timeout_s + 1.0
    rows: list[Check] = []
    for names, future in futures:
        try:
            rows.extend(future.result(timeout=max(0.0, deadline - time.monotonic())))
        except concurrent.futures.TimeoutError:
            rows.extend(_timed_out(names, timeout_s))
    pool.shutdown(wait=False, cancel_futures=True)
    return rows


def worst_level(checks: list[Check]) -> str:
    """The most severe level among ``checks`` (for an exit status or a summary badge)."""
    order = {"ok": 0, "warning": 1, "error": 2}
    return max((c.level for c in checks), key=order.__getitem__, default="ok")
