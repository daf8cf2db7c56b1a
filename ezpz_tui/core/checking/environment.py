"""What the shell and the job hand the ranks: stray rendezvous variables, torchrun's contract,
walltime, wandb login.

Each of these fails late and quietly when wrong (a rendezvous waiting 30 minutes, a job killed
mid-run, a login prompt nobody answers), so they are said before the launch instead.
"""

from __future__ import annotations

import netrc
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path

from ezpz_tui.core.checking.check import Context, Verdict, declare, error, ok, warning
from runtime.env import RANK_VARS, TORCHRUN_VARS

WALLTIME_WARN_S = 600.0


@declare("rank env")
def rank_env(ctx: Context) -> Verdict:
    stale = [f"{name}={ctx.env[name]}" for name in RANK_VARS if ctx.env.get(name)]
    if not stale:
        return ok("No MASTER_ADDR, MASTER_PORT or RANK in this shell.")
    names = " ".join(item.split("=", 1)[0] for item in stale)
    return warning(
        f"{', '.join(stale)} set in this shell would leak into the ranks and can make a "
        "rendezvous wait 30 minutes for peers that never come; ezpz-tui removes them from "
        "the launcher's environment.",
        f"unset {names}",
    )


# Programs that start ranks themselves; as a rank's command each would start a world of its own.
_LAUNCHER_PROGRAMS = frozenset({"torchrun", "deepspeed", "mpiexec", "mpirun", "srun"})
_LAUNCHER_SUBCOMMANDS = {"accelerate": "launch", "lightning": "run", "fabric": "run"}
_LAUNCHER_MODULES = {"torch.distributed.run": "torchrun", "torch.distributed.launch": "torchrun"}


def nested_launcher(command: Sequence[str]) -> str | None:
    """The launcher a command starts (``torchrun train.py``, ``accelerate launch ...``)."""
    words = list(command)
    if not words:
        return None
    program = Path(words[0]).name
    if program in _LAUNCHER_PROGRAMS:
        return program
    sub = _LAUNCHER_SUBCOMMANDS.get(program)
    if sub is not None and words[1:2] == [sub]:
        return f"{program} {sub}"
    if program.startswith("python") and "-m" in words[:-1]:
        return _LAUNCHER_MODULES.get(words[words.index("-m") + 1])
    return None


@declare("torchrun env")
def torchrun_contract(ctx: Context) -> Verdict:
    kind = ctx.launcher()
    nested = nested_launcher(ctx.plan.command) if ctx.plan else None
    names = ", ".join(TORCHRUN_VARS)
    if nested and (kind == "torchrun" or ctx.ppn > 1):
        starts = "torchrun" if kind == "torchrun" else f"{kind} with {ctx.ppn} ranks per node"
        return warning(
            f"The command starts its own launcher ({nested}) and {starts} would start one per "
            "rank: worlds that never meet, or more ranks than the plan says.",
            f"Run the script itself (python train.py): every rank already gets {names}, "
            "MASTER_ADDR and MASTER_PORT; or set 1 rank per node to run one launcher per node.",
        )
    if kind == "torchrun":
        return ok(f"torchrun gives every rank {names}, MASTER_ADDR and MASTER_PORT.")
    return ok(
        f"Every rank gets torchrun's {names}, MASTER_ADDR and MASTER_PORT from {kind} through "
        "runtime.capture: scripts written for torchrun run unchanged."
    )


@declare("walltime")
def walltime(ctx: Context) -> Verdict:
    alloc = ctx.alloc
    if alloc.scheduler == "none":
        return ok("No job, so no walltime limit.")
    left = alloc.walltime_left()
    if left is None:
        return warning(
            f"Could not read the walltime left from {alloc.scheduler}.",
            "Check with qstat -f $PBS_JOBID or squeue -j $SLURM_JOB_ID.",
        )
    minutes = left / 60
    if left <= 0:
        return error("The job is past its walltime.", "Start a new job.")
    if left < WALLTIME_WARN_S:
        return warning(
            f"Only {minutes:.0f} minutes of walltime left.",
            "Keep the run short or start a new job.",
        )
    return ok(f"{minutes / 60:.1f} hours of walltime left.")


@declare("wandb")
def wandb(ctx: Context) -> Verdict:
    if find_spec("wandb") is None:
        return ok("wandb is not installed; metrics stay in the run directory.")
    mode = ctx.env.get("WANDB_MODE", "").lower()
    if mode in ("offline", "disabled"):
        return ok(f"wandb is installed and WANDB_MODE={mode}.")
    if ctx.env.get("WANDB_API_KEY"):
        return ok("wandb is installed and WANDB_API_KEY is set.")
    try:
        found = netrc.netrc().authenticators("api.wandb.ai") is not None
    except (OSError, netrc.NetrcParseError):
        found = False
    if found:
        return ok("wandb is installed and ~/.netrc has api.wandb.ai.")
    return warning(
        "wandb is installed but has no credentials: a run that calls wandb.init will fail "
        "or wait for a login prompt no one answers.",
        "wandb login, or export WANDB_MODE=offline.",
    )
