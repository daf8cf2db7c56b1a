"""The profile's split on a device: compute kernels, communication kernels, their overlap and
idle, against the wall time.

No GPU here, so no profiler can record a real kernel: the arithmetic is tested as the pure
function it is, on (name, start, end) lists, and the extraction on torch's own ``FunctionEvent``
objects made as the profiler makes them for a CUDA or XPU kernel (device type and time range).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ezpz_tui.core.watching.profiles import ProfileReport, format_profile
from runtime import kernel_split
from runtime.profiling import summarize


def test_each_kind_is_the_union_of_its_kernels_and_the_overlap_is_counted_once() -> None:
    kernels = [
        ("ampere_sgemm_128x64_nn", 0.0, 4.0),
        ("vectorized_elementwise_kernel", 2.0, 6.0),  # another stream, at the same time
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 5.0, 8.0),  # overlaps compute 5-6
        ("ncclKernel_AllGather_RING_LL_Sum_int8_t", 7.5, 8.5),
        ("Memcpy DtoD (Device -> Device)", 9.0, 9.0),  # empty: nothing
    ]
    got = kernel_split.split(kernels, wall_s=10.0)
    assert got == {
        "compute_s": 6.0,
        "communication_s": 3.5,
        "overlap_s": 1.0,
        "busy_s": 8.5,
        "idle_s": 1.5,
    }


def test_communication_kernels_are_named_by_their_library() -> None:
    names = {
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL": True,
        "ncclKernel_Broadcast_RING_LL_Sum_int8_t": True,
        "xccl_allreduce_kernel": True,
        "oneccl_reduce_scatter": True,
        "gloo:all_reduce": True,
        "sm90_xmma_gemm_bf16bf16_bf16f32": False,
        "at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add>": False,
        "flash_fwd_kernel": False,
    }
    assert {n: bool(kernel_split.COMMUNICATION.search(n)) for n in names} == names


def test_a_busy_device_with_overlap_leaves_communication_its_share() -> None:
    """The case the CPU-time split lost: compute covers the wall, communication runs under it."""
    kernels = [("gemm", 0.0, 1.0), ("ncclDevKernel_AllReduce", 0.2, 0.6)]
    got = kernel_split.split(kernels, wall_s=1.0)
    assert got["compute_s"] == 1.0 and got["communication_s"] == pytest.approx(0.4)
    assert got["overlap_s"] == pytest.approx(0.4) and got["idle_s"] == 0.0


def test_the_busy_time_is_capped_at_the_wall() -> None:
    got = kernel_split.split([("gemm", 0.0, 2.0)], wall_s=1.5)
    assert got["busy_s"] == 1.5 and got["idle_s"] == 0.0


def test_the_device_kernels_are_the_profilers_device_events() -> None:
    pytest.importorskip("torch")
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    events = [
        FunctionEvent(1, "aten::mm", 1, 0, 4000),  # the CPU op that launched it
        FunctionEvent(2, "cudaLaunchKernel", 1, 10, 30),
        FunctionEvent(3, "ampere_sgemm_128x64_nn", 7, 100, 4100, device_type=DeviceType.CUDA),
        FunctionEvent(4, "ncclDevKernel_AllReduce", 8, 3000, 5000, device_type=DeviceType.CUDA),
        FunctionEvent(5, "xccl_allreduce", 9, 6000, 6500, device_type=DeviceType.XPU),
    ]
    kernels = kernel_split.device_kernels(events)
    assert kernels == [
        ("ampere_sgemm_128x64_nn", 100e-6, 4100e-6),
        ("ncclDevKernel_AllReduce", 3000e-6, 5000e-6),
        ("xccl_allreduce", 6000e-6, 6500e-6),
    ]
    got = kernel_split.split(kernels, wall_s=0.01)
    assert got["compute_s"] == pytest.approx(0.004)
    assert got["communication_s"] == pytest.approx(0.0025)
    assert got["overlap_s"] == pytest.approx(0.0011)
    assert got["idle_s"] == pytest.approx(0.01 - 0.0054)


def test_the_summary_takes_the_device_split_where_there_are_kernels() -> None:
    kernels = [("gemm", 0.0, 0.5), ("ncclDevKernel_AllReduce", 0.4, 0.7)]
    on_device = summarize([], 1.0, steps=3, rank=0, kernels=kernels)
    assert on_device["split"] == "device"
    assert (on_device["compute_s"], on_device["overlap_s"]) == (0.5, pytest.approx(0.1))
    assert on_device["communication_s"] == pytest.approx(0.3)
    assert on_device["idle_s"] == pytest.approx(0.3)
    on_cpu = summarize([], 1.0, steps=3, rank=0)
    assert on_cpu["split"] == "cpu" and "overlap_s" not in on_cpu
    report = ProfileReport(
        run_dir=Path("/nowhere"),
        steps=3,
        summaries={0: {**on_device, "steps": 3}, 1: {**on_cpu, "steps": 3}},
    )
    lines = format_profile(report)
    assert lines[0] == (
        "rank 0: 3 steps in 1.00s on the device: compute 50%, communication 30% "
        "(10% overlapping compute), idle 30%; top: "
    )
    assert lines[1].startswith("rank 1: 3 steps in 1.00s: compute 0%, communication 0%, idle")
