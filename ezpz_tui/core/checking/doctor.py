"""Is this environment ready to launch? One row per check: ok/warning/error, why, what to do.

Each check is bounded in time and never raises: anything that needs torch or mpi4py runs in a
subprocess with a timeout (the TUI process imports neither), a check that runs out of time is a
warning that says so, and a check that crashes is an error row carrying the exception. The
checks run side by side in threads, so the whole doctor takes about as long as its slowest probe
(importing torch); a probe stuck past the deadline (a hung network filesystem) is abandoned.
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import sys
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ezpz_tui.core.checking import (
    environment,
    filesystem,
    hosts,
    interpreter,
    mpi,
    staging,
    torch_probe,
)
from ezpz_tui.core.checking.check import Check, Context, Declared, timed_out
from ezpz_tui.core.checking.probe_cache import ProbeCache
from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.launcher import Which
from ezpz_tui.core.launching.plan import LaunchPlan

DEFAULT_TIMEOUT_S = 30.0

CHECKS: tuple[Declared, ...] = (
    mpi.mpi4py_and_launcher,
    hosts.scheduler,
    torch_probe.torch_and_backend,
    interpreter.rank_python,
    hosts.hostfile,
    filesystem.output_dir,
    staging.staging,
    environment.rank_env,
    environment.torchrun_contract,
    environment.walltime,
    environment.wandb,
)
"""Every check, in the order its rows are shown."""


def run_checks(
    alloc: Allocation,
    plan: LaunchPlan | None = None,
    *,
    outputs: Path,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
    python: str = sys.executable,
    which: Which = shutil.which,
    cache: ProbeCache | None = None,
) -> list[Check]:
    """All checks, in a fixed order, within about ``timeout_s`` (plus a second of grace).

    ``plan`` sets the ranks per node and launcher checked against; ``env`` defaults to this
    process's environment and is also what the probes run with. ``cache`` keeps the probes'
    answers (its ``used`` says afterwards whether a kept one was reused) and is saved here.
    """
    env = os.environ if env is None else env
    ctx = Context(alloc, plan, Path(outputs), timeout_s, env, python, which, cache)
    pool = ThreadPoolExecutor(max_workers=len(CHECKS), thread_name_prefix="ezpz-doctor")
    futures: list[tuple[Declared, Future[list[Check]]]] = [
        (check, pool.submit(check.rows, ctx)) for check in CHECKS
    ]
    deadline = time.monotonic() + timeout_s + 1.0
    rows: list[Check] = []
    for check, future in futures:
        try:
            rows.extend(future.result(timeout=max(0.0, deadline - time.monotonic())))
        except concurrent.futures.TimeoutError:
            rows.extend(check.all_rows(timed_out(timeout_s)))
    pool.shutdown(wait=False, cancel_futures=True)
    if cache is not None:
        cache.save()
    return rows


def worst_level(checks: list[Check]) -> str:
    """The most severe level among ``checks`` (for an exit status or a summary badge)."""
    order = {"ok": 0, "warning": 1, "error": 2}
    return max((c.level for c in checks), key=order.__getitem__, default="ok")
