"""AMD GPU figures from ``rocm-smi --json``, one query of every card per sample.

rocm-smi prints a JSON object keyed ``card0``, ``card1``, ... whose values are strings; the
field names differ between ROCm versions and GPUs (an MI250X reports the average package power
and the edge sensor, an MI300X the current socket power and the junction sensor), so each figure
is the first of its known names that holds a number. The amdsmi Python bindings are not used.
"""

from __future__ import annotations

import json
import re
from typing import Any

from runtime.telemetry.devices import Pick
from runtime.telemetry.tools import Failed, Figures, ToolSource, number

ROCM_SMI = [
    "rocm-smi",
    "--showuse",
    "--showmeminfo",
    "vram",
    "--showpower",
    "--showtemp",
    "--showproductname",
    "--json",
]
NAME_FIELDS = ("Card Series", "Card series", "Card SKU")  # the spelling changed between versions
FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("util_pct", ("GPU use (%)",)),
    ("mem_used_bytes", ("VRAM Total Used Memory (B)",)),
    ("mem_total_bytes", ("VRAM Total Memory (B)",)),
    (
        "power_w",
        (
            "Average Graphics Package Power (W)",
            "Current Socket Graphics Package Power (W)",
        ),
    ),
    (
        "temp_c",
        (
            "Temperature (Sensor edge) (C)",
            "Temperature (Sensor junction) (C)",
        ),
    ),
)
_INTS = frozenset({"mem_used_bytes", "mem_total_bytes"})
_CARD = re.compile(r"card(\d+)")


class RocmSmi(ToolSource):
    """The rank's AMD GPU (by index: a UUID in ROCR_VISIBLE_DEVICES is not matched)."""

    name = "rocm-smi"
    vendor = "AMD"

    def argv(self, choice: Pick) -> list[str]:
        return list(ROCM_SMI)

    def parse(self, text: str, choice: Pick) -> Figures:
        return parse_rocm_smi(text, choice)


def parse_rocm_smi(text: str, choice: Pick) -> Figures:
    """The rank's card in :data:`ROCM_SMI`'s output (``N/A`` left out). Anything printed
    before the JSON (warnings) is skipped."""
    start = text.find("{")
    try:
        data: Any = json.loads(text[start:]) if start >= 0 else None
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise Failed("no JSON in its output")
    cards = {}
    for key, fields in data.items():
        match = _CARD.fullmatch(key)
        if match and isinstance(fields, dict):
            cards[int(match.group(1))] = fields
    for index, fields in cards.items():
        if not choice.matches(index, None, len(cards)):
            continue
        figures: Figures = {"device": f"rocm-smi:card{index}"}
        name = next((str(fields[k]) for k in NAME_FIELDS if fields.get(k) not in (None, "N/A")), "")
        if name.strip():
            figures["device_name"] = name.strip()
        for name, keys in FIELDS:
            for key in keys:
                value = number(str(fields.get(key, "")))
                if value is not None:
                    figures[name] = round(value) if name in _INTS else value
                    break
        return figures
    raise Failed("the rank's GPU is not in its output")
