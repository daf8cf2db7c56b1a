"""torch as the ranks will see it: its build, the device and collective backend it picks.

The probe imports torch in a subprocess (the TUI process never imports it) and asks
`runtime.device` the same questions a rank asks at setup, so the doctor's answer is the ranks'.
"""

from __future__ import annotations

from typing import Any

from ezpz_tui.core.checking.check import Context, Verdict, declare, error, ok, warning

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


@declare("torch", "backend")
def torch_and_backend(ctx: Context) -> tuple[Verdict, Verdict]:
    probe = ctx.python_json(_TORCH_PROBE)
    if "error" in probe:
        reason = f"torch is not importable: {probe['error']}."
        remedy = "Install torch for this machine's accelerators, or load its module."
    elif "device_error" in probe:
        reason = f"torch {probe['version']} cannot pick a device: {probe['device_error']}"
        remedy = "Fix or unset TORCH_DEVICE / TORCH_BACKEND."
    else:
        return _torch(ctx, probe), _backend(ctx, probe)
    return error(reason, remedy), error("No backend can be chosen until torch picks a device.")


def _torch(ctx: Context, probe: dict[str, Any]) -> Verdict:
    alloc, version, device = ctx.alloc, probe["version"], probe["device"]
    count = probe.get("count", 0)
    wanted = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu"}.get(alloc.accelerator_kind)
    if wanted and device != wanted:
        return error(
            f"torch {version} uses {device} ({probe['device_reason']}), but the hosts have "
            f"{alloc.accelerators_per_host} {alloc.accelerator_kind} accelerators.",
            f"Install a torch built for {alloc.accelerator_kind}, or check that the devices are "
            "visible (CUDA_VISIBLE_DEVICES, ZE_AFFINITY_MASK).",
        )
    if wanted == "cuda" and (alloc.accelerator_kind == "rocm") != bool(probe.get("hip")):
        build = "ROCm" if probe.get("hip") else "CUDA"
        return error(
            f"torch {version} is a {build} build but the hosts have {alloc.accelerator_kind} GPUs.",
            f"Install the torch wheel built for {alloc.accelerator_kind}.",
        )
    if wanted and count < ctx.ppn:
        return error(
            f"torch {version} sees {count} {device} devices but {ctx.ppn} ranks per node are "
            "planned.",
            "Lower ranks per node, or make every device visible to this process.",
        )
    seen = f"{count} {device} devices" if wanted else f"{device}: {probe['device_reason']}"
    return ok(f"torch {version}; {seen}.")


def _backend(ctx: Context, probe: dict[str, Any]) -> Verdict:
    name, reason = probe["backend"], probe["backend_reason"]
    available = probe.get("available", {})
    forced = reason.startswith("forced")
    if name in available and not available[name]:
        return error(
            f"{name} is chosen ({reason}) but this torch does not provide it.",
            "Unset TORCH_BACKEND or install a torch that has it.",
        )
    if ctx.alloc.accelerator_kind != "cpu" and name == "gloo" and not forced:
        return warning(
            f"Collectives fall back to gloo: {reason}.",
            "Install a torch with NCCL (CUDA/ROCm) or XCCL/oneCCL (XPU) for fast collectives.",
        )
    return ok(f"{name}: {reason}.")
