"""A preflight's rank: one rank of a layout, alone, on torch's fake process group.

Before a relaunch stops a healthy run, the new layout runs one step: rank 0 (and the first
rank of the last pipeline stage) as a single process each, on this node's CPU, with
``EZPZ_PREFLIGHT=rank,world``. :func:`runtime.setup` then joins a fake process group of that
world (torch's ``fake`` backend: every collective returns at once, nothing leaves the process;
torchtitan's ``COMM_MODE=fake_backend`` checks a layout the same way; :mod:`runtime.fake_group`),
so the script builds its shard of the model, splits its tensors and runs its step as that rank
would. This module imports no torch (the TUI reads its marks). Its first recorded
step (:meth:`runtime.History.record`) ends the process: the mark it leaves says how far it got
and its peak memory, and nothing after that step runs (no checkpoint, no cleanup's collectives).

The mark is ``<run dir>/preflight-rank-NNNNN.json``, written at :func:`runtime.setup` (phase
``setup``) and again at the step (phase ``step``): a process that ends without one never called
``runtime.setup()``, and cannot be preflighted this way.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

from runtime.atomic import write_atomic
from runtime.env import RUN_DIR_VAR

PREFLIGHT_VAR = "EZPZ_PREFLIGHT"  # "rank,world": this process is that rank of a preflight
SOURCE = "preflight"  # the rank's source (RankInfo.source) in a preflight
SETUP, STEP = "setup", "step"  # the mark's phases


class PreflightError(ValueError):
    """An ``EZPZ_PREFLIGHT`` that names no rank of a world."""


def requested(env: dict[str, str] | None = None) -> tuple[int, int] | None:
    """``(rank, world)`` when this process is a preflight's rank, else None."""
    text = (os.environ if env is None else env).get(PREFLIGHT_VAR, "").strip()
    if not text:
        return None
    rank_text, _, world_text = text.partition(",")
    try:
        rank, world = int(rank_text), int(world_text)
    except ValueError:
        raise PreflightError(f"{PREFLIGHT_VAR}={text!r}: expected RANK,WORLD") from None
    if world < 1 or not 0 <= rank < world:
        raise PreflightError(f"{PREFLIGHT_VAR}={text!r}: rank {rank} is not in a world of {world}")
    return rank, world


def mark_path(run_dir: str | os.PathLike[str], rank: int) -> Path:
    return Path(run_dir) / f"preflight-rank-{rank:05d}.json"


def peak_rss_bytes() -> int:
    """This process's peak resident memory (Linux counts ``ru_maxrss`` in KiB, macOS in bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _write(rank: int, world: int, phase: str, **more: Any) -> None:
    mark = {"rank": rank, "world": world, "phase": phase, "time": time.time(), **more}
    path = mark_path(os.environ.get(RUN_DIR_VAR) or ".", rank)
    write_atomic(path, json.dumps(mark).encode() + b"\n")


def set_up(rank: int, world: int) -> None:
    """Leave the mark that says the script reached :func:`runtime.setup`."""
    _write(rank, world, SETUP)


def step_recorded(step: int) -> NoReturn:
    """The first step is done: leave the mark with the peak memory, and end the process.

    ``os._exit`` rather than ``SystemExit``: a script's ``finally`` or ``except`` blocks would
    go on (a checkpoint save, a barrier), which a preflight has no business running."""
    placed = requested()
    assert placed is not None, "step_recorded outside a preflight"
    _write(*placed, STEP, step=step, peak_rss_bytes=peak_rss_bytes())
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or full: the mark is written
            stream.flush()
    os._exit(0)
