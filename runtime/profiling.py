"""Profile a rank's next N steps on request, without editing the script: ``torch.profiler``
started and stopped by the runtime's step hook.

``ezpz-tui profile RUN --steps N`` and ``P`` in the TUI write ``p<N>`` into every rank's
Flight Recorder FIFO (:mod:`runtime.flight`, whose thread keeps the request); :func:`step`, which
``History.record`` calls once per step, starts the profiler at the next step boundary, and
stops it N steps later. Each rank then writes ``profiles/rank-NNNNN.json`` (a Chrome trace: open
it in Perfetto) and ``profiles/rank-NNNNN.summary.json``: the steps' wall time split into
compute, communication and idle, and the top operators by their own time. On a GPU the split is
the device's (:mod:`runtime.kernel_split`: compute kernels, communication kernels, the time
they overlapped, and the time no kernel ran); on a CPU, where there are no kernels, it is the
operators' own CPU time (the collectives' ops are communication, the rest compute, idle the
wall time left). A script without ``History`` adds ``runtime.profiling.step()`` at
the end of its step. Nothing is profiled, and a step pays one dictionary look-up, until asked.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from runtime import kernel_split
from runtime.env import RUN_DIR_VAR, rank_info_or_single
from runtime.flight import SHARED_NAME
from runtime.rundir import RunDir

TOP = 8  # operators named in the summary
# The ops whose time is communication, whatever the backend calls them.
_COMM = re.compile(
    r"all_?reduce|all_?gather|reduce_?scatter|broadcast|barrier|all_?to_?all|"
    r"\bsend\b|\brecv\b|gloo|nccl|c10d|record_param_comms",
    re.IGNORECASE,
)

_state: dict[str, Any] = {}  # the profiler while it runs: prof, steps left, start


def step() -> None:
    """Mark the end of a step: start a profile asked for, or count one down and finish it."""
    if not _state:
        recorder = sys.modules.get(SHARED_NAME)
        asked = getattr(recorder, "profile_requests", None)
        if asked and "torch" in sys.modules:  # a script without torch has nothing to profile
            steps = asked[-1]
            asked.clear()
            with contextlib.suppress(Exception):  # a rank must never fail because of this
                _start(steps)
        return
    _state["left"] -= 1
    if _state["left"] <= 0:
        state = dict(_state)
        _state.clear()
        with contextlib.suppress(Exception):
            _finish(state)


def _start(steps: int) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    elif hasattr(torch, "xpu") and torch.xpu.is_available():
        activities.append(ProfilerActivity.XPU)
    prof = profile(activities=activities)
    prof.__enter__()
    _state.update(prof=prof, left=steps, steps=steps, start=time.perf_counter())


def summarize(
    events: Any,
    wall_s: float,
    steps: int,
    rank: int,
    kernels: list[kernel_split.Kernel] | None = None,
) -> dict[str, Any]:
    """The split of ``wall_s`` into compute, communication and idle, and the top operators, from
    ``torch.profiler``'s ``key_averages()``; times in seconds. With device ``kernels`` (a GPU
    run) the split is theirs, overlap included (``split: device``); without, the operators' own
    CPU time (``split: cpu``)."""
    rows = []
    for e in events:
        device = getattr(e, "self_device_time_total", 0) or 0
        own = (e.self_cpu_time_total + device) / 1e6
        rows.append((own, e.key, e.count))
    rows.sort(reverse=True)
    if kernels:
        parts: dict[str, Any] = {"split": "device", **kernel_split.split(kernels, wall_s)}
    else:
        parts = {"split": "cpu", **_cpu_split(rows, wall_s)}
    return {
        "rank": rank,
        "steps": steps,
        "wall_s": wall_s,
        **parts,
        "top": [
            {"name": name, "self_s": own, "calls": calls, "communication": bool(_COMM.search(name))}
            for own, name, calls in rows[:TOP]
        ],
    }


def _cpu_split(rows: list[tuple[float, str, int]], wall_s: float) -> dict[str, float]:
    """The operators' own CPU time: the collectives' ops are communication, the rest compute
    (capped at the wall: threads' time can add up to more), idle the wall left."""
    comm = sum(own for own, name, _ in rows if _COMM.search(name))
    compute = sum(own for own, name, _ in rows if not _COMM.search(name))
    compute = min(compute, wall_s)
    comm = min(comm, wall_s - compute)
    return {
        "compute_s": compute,
        "communication_s": comm,
        "idle_s": max(0.0, wall_s - compute - comm),
    }


def _finish(state: dict[str, Any]) -> None:
    prof, wall = state["prof"], time.perf_counter() - state["start"]
    prof.__exit__(None, None, None)
    rank = rank_info_or_single().rank
    run = RunDir(Path(os.environ.get(RUN_DIR_VAR) or "."), fresh=True)
    run.profile_trace(rank).parent.mkdir(parents=True, exist_ok=True)  # made on request only
    prof.export_chrome_trace(str(run.profile_trace(rank)))
    kernels = kernel_split.device_kernels(prof.events())
    summary = summarize(prof.key_averages(), wall, state["steps"], rank, kernels)
    summary["trace"] = str(run.profile_trace(rank))
    path = run.profile_summary(rank)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(summary))
    os.replace(tmp, path)
