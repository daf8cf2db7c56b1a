"""A profiled rank's time on its device: how long compute kernels ran, how long communication
kernels ran, how long the two overlapped, and how long the device ran nothing.

On a GPU the CPU's view misleads: a kernel's launch is CPU time and its run device time, so
adding the two counts it twice, and a collective's kernel overlaps the compute kernels of
other streams, so summing each op's own time leaves communication almost nothing once compute
is clamped to the wall. Here each kind is the union of its kernels' intervals (kernels on
several streams that run at once count once), the overlap is the time both kinds ran, and idle
is the wall time no kernel covered. Standard library only: :mod:`runtime.profiling` hands it the
device events of ``torch.profiler`` (:func:`device_kernels`); a run with none (a CPU run) keeps
the CPU-time split there.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

Kernel = tuple[str, float, float]
"""A device kernel's name, start and end, in seconds."""

COMMUNICATION = re.compile(
    r"ccl|gloo|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast", re.IGNORECASE
)
"""A communication kernel's name: NCCL's and RCCL's (``ncclDevKernel_AllReduce_Sum_f32_RING_LL``,
``ncclKernel_...``), oneCCL's on XPU (``xccl``, ``ccl``), gloo's, or a collective's own name.
Every other kernel (GEMMs, element-wise ops, copies) is compute: the device was busy on the
model's work."""

DEVICE_TYPES = frozenset({"CUDA", "XPU", "PrivateUse1"})
"""The ``torch.autograd.DeviceType`` names of the profiler's events that ran on a device."""


def device_kernels(events: Iterable[Any]) -> list[Kernel]:
    """The device kernels among ``torch.profiler``'s events (``prof.events()``), in seconds:
    the ``FunctionEvent``\\ s whose ``device_type`` is a device, by their ``time_range``
    (microseconds from the trace's start)."""
    kernels = []
    for event in events:
        kind = getattr(getattr(event, "device_type", None), "name", None)
        if kind in DEVICE_TYPES:
            span = event.time_range
            kernels.append((str(event.name), span.start / 1e6, span.end / 1e6))
    return kernels


def union(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """The intervals merged: sorted, none overlapping, empty ones dropped."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted((s, e) for s, e in intervals if e > s):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def length(merged: list[tuple[float, float]]) -> float:
    """The time a merged list of intervals covers."""
    return sum(end - start for start, end in merged)


def overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """The time two merged lists of intervals both cover."""
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, end - start)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def split(kernels: Iterable[Kernel], wall_s: float) -> dict[str, float]:
    """``wall_s`` of profiled steps split by what the device ran: ``compute_s`` and
    ``communication_s`` (each kind's union), ``overlap_s`` (both at once, inside each of the
    two), ``idle_s`` (neither) and ``busy_s`` (either); the device's busy time is capped at the
    wall, since its clock and the wall's are read apart."""
    compute, communication = [], []
    for name, start, end in kernels:
        (communication if COMMUNICATION.search(name) else compute).append((start, end))
    computing, communicating = union(compute), union(communication)
    both = overlap(computing, communicating)
    busy = min(length(computing) + length(communicating) - both, wall_s)
    return {
        "compute_s": length(computing),
        "communication_s": length(communicating),
        "overlap_s": both,
        "busy_s": busy,
        "idle_s": max(0.0, wall_s - busy),
    }
