"""Which accelerator and which collective backend a rank should use, and why.

Each answer carries a one-line reason, because the doctor and the run log must be able to say
*why* a run ended up on gloo rather than nccl; a silent CPU fallback on a GPU node is the most
expensive mistake a researcher can make on an allocation.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DEVICE_TYPES = ("xpu", "cuda", "mps", "cpu")
BACKENDS = ("nccl", "xccl", "ccl", "gloo", "mpi")


@dataclass(frozen=True)
class Choice:
    name: str
    reason: str


def _torch() -> Any:
    import torch

    return torch


def _xpu_available(torch: Any) -> bool:
    xpu = getattr(torch, "xpu", None)
    return bool(xpu is not None and xpu.is_available())


def _mps_available(torch: Any) -> bool:
    mps = getattr(getattr(torch, "backends", None), "mps", None)
    return bool(mps is not None and mps.is_available())


def is_rocm(torch: Any | None = None) -> bool:
    torch = torch or _torch()
    return getattr(torch.version, "hip", None) is not None


def device_type(env: Mapping[str, str] | None = None) -> Choice:
    """Pick xpu > cuda > mps > cpu, unless TORCH_DEVICE says otherwise.

    A forced device that is not there is an error rather than a fallback: the user asked for it.
    """
    env = os.environ if env is None else env
    torch = _torch()
    available = {
        "xpu": _xpu_available(torch),
        "cuda": torch.cuda.is_available(),
        "mps": _mps_available(torch),
        "cpu": True,
    }
    forced = env.get("TORCH_DEVICE", "").strip().lower()
    if forced:
        kind = forced.split(":", 1)[0]
        if kind not in available:
            raise ValueError(
                f"TORCH_DEVICE={forced!r} is not a device type; "
                f"use one of {', '.join(DEVICE_TYPES)}."
            )
        if not available[kind]:
            raise RuntimeError(
                f"TORCH_DEVICE={forced!r} was set but torch reports no {kind} device here."
            )
        return Choice(kind, f"forced by TORCH_DEVICE={forced}")
    for kind in DEVICE_TYPES:
        if available[kind]:
            if kind == "cuda" and is_rocm(torch):
                return Choice("cuda", "ROCm GPU found (torch.version.hip set)")
            if kind == "cpu":
                return Choice("cpu", "no xpu, cuda or mps device is available to torch")
            return Choice(kind, f"torch.{kind} is available")
    raise AssertionError("cpu is always available")  # pragma: no cover


def accelerator_count(kind: str) -> int:
    torch = _torch()
    if kind == "cuda":
        return torch.cuda.device_count()
    if kind == "xpu":
        return torch.xpu.device_count()
    return 1


def _ccl_importable() -> bool:
    try:
        import oneccl_bindings_for_pytorch  # noqa: F401
    except ImportError:
        return False
    return True


def backend(kind: str, env: Mapping[str, str] | None = None) -> Choice:
    """nccl for CUDA/ROCm, xccl (then oneCCL's ccl) for XPU, gloo otherwise; TORCH_BACKEND wins."""
    env = os.environ if env is None else env
    forced = env.get("TORCH_BACKEND", "").strip().lower()
    if forced:
        if forced not in BACKENDS:
            raise ValueError(
                f"TORCH_BACKEND={forced!r} is not a backend; use one of {', '.join(BACKENDS)}."
            )
        return Choice(forced, f"forced by TORCH_BACKEND={forced}")
    dist = _torch().distributed
    if kind == "cuda":
        if dist.is_nccl_available():
            flavour = "RCCL" if is_rocm() else "NCCL"
            return Choice("nccl", f"{flavour} is built into this torch")
        return Choice("gloo", "GPU found but this torch has no NCCL: falling back to gloo")
    if kind == "xpu":
        if getattr(dist, "is_xccl_available", lambda: False)():
            return Choice("xccl", "XCCL is built into this torch")
        if _ccl_importable():
            return Choice("ccl", "no XCCL in this torch; oneccl_bindings_for_pytorch provides ccl")
        return Choice("gloo", "XPU found but neither XCCL nor oneCCL bindings: using gloo")
    return Choice("gloo", f"gloo is the collective backend for {kind} tensors")


def get_device(local_rank: int | None = None, env: Mapping[str, str] | None = None) -> Any:
    """The torch.device this rank should use (bound to its local rank on multi-GPU nodes)."""
    torch = _torch()
    kind = device_type(env).name
    if kind in ("cuda", "xpu"):
        if local_rank is None:
            from runtime.env import get_local_rank

            local_rank = get_local_rank()
        count = accelerator_count(kind)
        return torch.device(kind, local_rank % max(count, 1))
    return torch.device(kind)
