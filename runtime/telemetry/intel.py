"""Intel GPU figures from ``xpu-smi dump`` (XPU Manager), one short dump per sample.

The dump's metric ids (``xpu-smi dump -h``): 0 GPU utilization (%), 1 power (W), 3 core
temperature (C), 5 memory utilization (%), 18 memory used (MiB). The dump has no total memory,
so it is derived from the used memory and its utilization (left out while nothing is used).
Its columns follow the order the metrics were asked in, after ``Timestamp, DeviceId``; the
headers' wording changed between versions, so they are not matched by name. The dump has no
device name either: ``xpu-smi discovery`` is asked once for it, after the first dump.
"""

from __future__ import annotations

import re

from runtime.telemetry.devices import Pick
from runtime.telemetry.nvidia import MIB
from runtime.telemetry.tools import (
    Failed,
    Figures,
    ToolRunner,
    ToolSource,
    Unavailable,
    number,
)

METRICS = ("util_pct", "power_w", "temp_c", "mem_pct", "mem_used_mib")
METRIC_IDS = "0,1,3,5,18"
DISCOVERY = ["xpu-smi", "discovery"]
_NAME_ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*Device Name:\s*(.*?)\s*\|?\s*$", re.MULTILINE)


def xpu_smi_argv(choice: Pick) -> list[str]:
    """One dump of the rank's device, or of every device (``-d -1``) when the rank's is found
    by its position among them."""
    device = "-1" if choice.index is None else str(choice.index)
    return ["xpu-smi", "dump", "-d", device, "-m", METRIC_IDS, "-n", "1"]


class XpuSmi(ToolSource):
    """The rank's Intel GPU (a whole card: the tiles ZE_AFFINITY_MASK names share its figures)."""

    name = "xpu-smi"
    vendor = "Intel"

    def __init__(self, choice: Pick | None, runner: ToolRunner, timeout_s: float) -> None:
        super().__init__(choice, runner, timeout_s)
        self._device_name: str | None = None
        self._named = False  # discovery asked once, whatever it answered

    def read(self) -> Figures:
        figures = super().read()
        if not self._named:
            self._named = True
            index = str(figures["device"]).rpartition(":")[2]
            try:
                text = self._runner.run(list(DISCOVERY), self._timeout_s)
            except (Failed, Unavailable):
                text = ""
            self._device_name = device_names(text).get(int(index)) if index.isdigit() else None
        if self._device_name:
            figures["device_name"] = self._device_name
        return figures

    def argv(self, choice: Pick) -> list[str]:
        return xpu_smi_argv(choice)

    def parse(self, text: str, choice: Pick) -> Figures:
        return parse_xpu_smi(text, choice)


def device_names(text: str) -> dict[int, str]:
    """Each device's name in ``xpu-smi discovery``'s table, by device id."""
    return {int(index): name for index, name in _NAME_ROW.findall(text) if name}


def parse_xpu_smi(text: str, choice: Pick) -> Figures:
    """The rank's row of a dump of :data:`METRIC_IDS` (``N/A`` left out)."""
    lines = [line for line in text.splitlines() if line.strip()]
    start = next((i for i, line in enumerate(lines) if line.startswith("Timestamp")), None)
    if start is None:
        raise Failed("no dump header in its output")
    rows = [[cell.strip() for cell in line.split(",")] for line in lines[start + 1 :]]
    rows = [row for row in rows if len(row) == 2 + len(METRICS) and row[1].isdigit()]
    for row in rows:
        if not choice.matches(int(row[1]), None, len(rows)):
            continue
        values = dict(zip(METRICS, (number(cell) for cell in row[2:]), strict=True))
        figures: Figures = {"device": f"xpu-smi:{row[1]}"}
        for name in ("util_pct", "power_w", "temp_c"):
            if values[name] is not None:
                figures[name] = values[name]
        used, pct = values["mem_used_mib"], values["mem_pct"]
        if used is not None:
            figures["mem_used_bytes"] = round(used * MIB)
            if pct:
                figures["mem_total_bytes"] = round(used * MIB * 100.0 / pct)
        return figures
    raise Failed("the rank's GPU is not in its output")
