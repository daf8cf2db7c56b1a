"""Which accelerator is this rank's, as the vendor tools number them, and whether one is expected.

The tools (NVML, nvidia-smi, xpu-smi, rocm-smi) see every device on the node whatever the
rank's visible-device variable says, so the rank's own device is found the way the runtime
binds it: the ``local_rank``-th entry of the visible list (wrapping around, as a launcher that
gives every rank the same list does), the only entry when the launcher gave the rank one device,
or ``local_rank`` modulo the node's device count when no variable restricts anything.

Standard library only: the capture wrapper imports this in every rank.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from dataclasses import dataclass

VISIBLE_VARS: dict[str, tuple[str, ...]] = {
    "nvidia": ("CUDA_VISIBLE_DEVICES",),
    "intel": ("ZE_AFFINITY_MASK",),
    "amd": ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"),
}
# Device nodes a driver makes: their presence means figures should be there to read.
DEVICE_NODES = ("/dev/nvidia0", "/dev/kfd", "/dev/dri/renderD*")
_HIDDEN = frozenset({"-1", "none", "NoDevFiles"})


@dataclass(frozen=True)
class Pick:
    """The rank's device among those a tool lists: by UUID, by index, or by position."""

    local_rank: int
    index: int | None = None  # from the visible list; None: local_rank modulo the tool's count
    uuid: str | None = None  # a ``GPU-...``/``MIG-...`` entry of CUDA_VISIBLE_DEVICES

    def resolve(self, count: int) -> int | None:
        """The device index among ``count`` devices a tool lists; None when it cannot be one."""
        if self.uuid is not None:
            return None
        if self.index is not None:
            return self.index if self.index < count else None
        return self.local_rank % count if count > 0 else None

    def matches(self, index: int, uuid: str | None, count: int) -> bool:
        """Whether the tool's device ``index`` (with ``uuid``) is the rank's."""
        if self.uuid is not None:
            return uuid is not None and uuid.lower() == self.uuid.lower()
        if self.index is not None:
            return index == self.index
        return self.resolve(count) == index


def local_rank_of(env: Mapping[str, str]) -> int:
    """LOCAL_RANK as torchrun's contract gives it; 0 when absent or unreadable."""
    try:
        return max(int(env.get("LOCAL_RANK", "0")), 0)
    except ValueError:
        return 0


def visible_entries(vendor: str, env: Mapping[str, str]) -> list[str] | None:
    """The vendor's visible-device list; None when no variable restricts the devices."""
    for var in VISIBLE_VARS[vendor]:
        raw = env.get(var)
        if raw is not None and raw.strip():
            spec = raw.strip()
            if spec in _HIDDEN:
                return []
            return [item.strip() for item in spec.split(",") if item.strip()]
    return None


def pick(vendor: str, local_rank: int, env: Mapping[str, str]) -> Pick | None:
    """This rank's device of ``vendor``; None when its visible list hides every device or names
    one no tool can be asked about."""
    entries = visible_entries(vendor, env)
    if entries is None:
        return Pick(local_rank)
    if not entries:
        return None
    entry = entries[local_rank % len(entries)]  # one entry: the launcher bound the rank to it
    if vendor == "intel":
        entry = entry.split(".", 1)[0]  # "0.1" is device 0, tile 1: the tools count devices
    if entry.isdigit():
        return Pick(local_rank, index=int(entry))
    if vendor == "nvidia" and entry.upper().startswith(("GPU-", "MIG-")):
        return Pick(local_rank, uuid=entry)
    return None


def expected(env: Mapping[str, str] | None = None) -> bool:
    """Whether this node should have accelerator figures: a visible-device variable names a
    device, or a driver made its device nodes. Only decides whether a missing tool is worth a
    line in the rank's log."""
    env = os.environ if env is None else env
    if any(visible_entries(vendor, env) for vendor in VISIBLE_VARS):
        return True
    return any(glob.glob(pattern) for pattern in DEVICE_NODES)
