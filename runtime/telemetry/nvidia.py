"""NVIDIA figures: NVML in the wrapper's own process when nvidia-ml-py is installed (the
``nvidia`` extra), else one ``nvidia-smi`` query per sample.

NVML is initialised once and costs microseconds a sample; nvidia-smi starts a process every
time (tens of milliseconds), so it is only the fallback. Both see every GPU of the node,
whatever CUDA_VISIBLE_DEVICES says: the rank's GPU is found by :class:`Pick`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runtime.telemetry.devices import Pick
from runtime.telemetry.tools import Failed, Figures, ToolSource, Unavailable, number

MIB = 1 << 20
NVIDIA_SMI_FIELDS = (
    "index",
    "uuid",
    "name",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "power.draw",
    "temperature.gpu",
)
NVIDIA_SMI = [
    "nvidia-smi",
    f"--query-gpu={','.join(NVIDIA_SMI_FIELDS)}",
    "--format=csv,noheader,nounits",
]


class Nvml:
    """The rank's GPU through NVML; a field the GPU does not report (NVMLError) is left out."""

    name = "NVML"

    def __init__(self, choice: Pick | None) -> None:
        self._pick = choice
        self._nvml: Any = None
        self._handle: Any = None
        self._device = ""
        self._name: str | None = None

    def _open(self) -> None:
        if self._pick is None:
            raise Unavailable("no NVIDIA GPU visible to this rank")
        try:
            import pynvml
        except ImportError:
            raise Unavailable("not installed") from None
        try:
            pynvml.nvmlInit()
            if self._pick.uuid is not None:
                handle = pynvml.nvmlDeviceGetHandleByUUID(self._pick.uuid)
                device = self._pick.uuid
            else:
                index = self._pick.resolve(pynvml.nvmlDeviceGetCount())
                if index is None:
                    raise Unavailable("the rank's GPU is not on this node")
                handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                device = str(index)
        except pynvml.NVMLError as exc:
            raise Unavailable(str(exc) or type(exc).__name__) from None
        self._nvml, self._handle, self._device = pynvml, handle, f"nvml:{device}"
        try:
            name = pynvml.nvmlDeviceGetName(handle)
        except pynvml.NVMLError:
            name = None
        self._name = name.decode(errors="replace") if isinstance(name, bytes) else name

    def read(self) -> Figures:
        if self._handle is None:
            self._open()
        nvml, handle = self._nvml, self._handle
        getters: tuple[Callable[[], Figures], ...] = (
            lambda: {"util_pct": float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)},
            lambda: _memory(nvml.nvmlDeviceGetMemoryInfo(handle)),
            lambda: {"power_w": nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0},
            lambda: {
                "temp_c": float(nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU))
            },
        )
        figures: Figures = {}
        for get in getters:
            try:
                figures.update(get())
            except nvml.NVMLError:
                continue
        if not figures:
            raise Failed("no figure answered")
        named: Figures = {"device_name": self._name} if self._name else {}
        return {"device": self._device, **named, **figures}


def _memory(info: Any) -> Figures:
    return {"mem_used_bytes": int(info.used), "mem_total_bytes": int(info.total)}


class NvidiaSmi(ToolSource):
    """The rank's GPU from one ``nvidia-smi --query-gpu`` of every GPU on the node."""

    name = "nvidia-smi"
    vendor = "NVIDIA"

    def argv(self, choice: Pick) -> list[str]:
        return list(NVIDIA_SMI)

    def parse(self, text: str, choice: Pick) -> Figures:
        return parse_nvidia_smi(text, choice)


def parse_nvidia_smi(text: str, choice: Pick) -> Figures:
    """The rank's row of :data:`NVIDIA_SMI`'s output (memory in MiB, ``[N/A]`` left out)."""
    rows = [[cell.strip() for cell in line.split(",")] for line in text.splitlines()]
    rows = [row for row in rows if len(row) == len(NVIDIA_SMI_FIELDS) and row[0].isdigit()]
    if not rows:
        raise Failed("no GPU row in its output")
    for index, uuid, name, util, used, total, power, temp in rows:
        if not choice.matches(int(index), uuid, len(rows)):
            continue
        figures: Figures = {"device": f"nvidia-smi:{index}"}
        if name and not name.startswith("["):  # [N/A], [Not Supported]
            figures["device_name"] = name
        for name, value, scale in (
            ("util_pct", number(util), None),
            ("mem_used_bytes", number(used), MIB),
            ("mem_total_bytes", number(total), MIB),
            ("power_w", number(power), None),
            ("temp_c", number(temp), None),
        ):
            if value is not None:
                figures[name] = value if scale is None else round(value * scale)
        return figures
    raise Failed("the rank's GPU is not in its output")
