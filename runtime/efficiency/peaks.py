"""Peak FLOP/s per device and dtype, from the sourced table ``peaks.json`` or a measurement.

A device is looked up by the name its vendor's tools (NVML, nvidia-smi, rocm-smi, xpu-smi) or
torch give it: the first entry whose every ``match`` word is in the name (the table's order
puts the longer names first); a name the table does not hold gives ``None``, never a guess, and
so does a dtype the table has no figure for on that device. An entry whose vendor publishes no
per-device figure in that form carries ``derived``, the arithmetic its figures come from, and
its peak says so (``(derived)``, not ``(datasheet)``). A measured peak (the CPU matmul probe,
:mod:`ezpz_tui.core.watching.probe`) is a :class:`Peak` too, with ``measured`` set, so whatever
shows an MFU can say which kind of peak it divides by. Standard library only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("peaks.json")
DTYPES = {
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "tf32": "tf32",
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
}
"""Each dtype spelling accepted (config, torch's names) and the table's name for it."""


@dataclass(frozen=True)
class Peak:
    """Peak dense TFLOPS of one device in one dtype, and where the figure comes from."""

    tflops: float
    dtype: str
    device: str  # the table's device, or what was measured ("cpu on host x")
    source: str  # a datasheet URL, "measured: ...", or "config"
    clock: str = ""
    measured: bool = False
    derived: str = ""  # the arithmetic, for a figure computed rather than read off a sheet

    @property
    def kind(self) -> str:
        """Where the figure comes from, in a word: measured, config, derived or datasheet."""
        if self.measured:
            return "measured"
        if self.source == "config":
            return "config"
        return "derived" if self.derived else "datasheet"

    @property
    def label(self) -> str:
        """``H100 SXM5 bf16 989 TFLOPS (datasheet)``: what an MFU is a fraction of."""
        return f"{self.device} {self.dtype} {self.tflops:.4g} TFLOPS ({self.kind})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "tflops": self.tflops,
            "dtype": self.dtype,
            "device": self.device,
            "source": self.source,
            "clock": self.clock,
            "measured": self.measured,
            "derived": self.derived,
            "label": self.label,
        }


def dtype_name(text: str) -> str | None:
    """The table's name for ``text`` (``bfloat16`` -> ``bf16``); None for one it does not know."""
    return DTYPES.get(text.strip().lower())


@cache
def table() -> tuple[dict[str, Any], ...]:
    """The table's devices, in the order they are matched."""
    return tuple(json.loads(TABLE.read_text())["devices"])


def _matches(entry: dict[str, Any], name: str) -> bool:
    lowered = name.lower()
    return all(word.lower() in lowered for word in entry["match"])


def resolve(device_name: str | None, dtype: str = "bf16") -> Peak | None:
    """The table's peak for the device named ``device_name`` in ``dtype``; None when the
    device or its figure in that dtype is not in the table."""
    wanted = dtype_name(dtype)
    if not device_name or wanted is None:
        return None
    entry = next((e for e in table() if _matches(e, device_name)), None)
    if entry is None or wanted not in entry["tflops"]:
        return None
    return Peak(
        tflops=float(entry["tflops"][wanted]),
        dtype=wanted,
        device=entry["device"],
        source=entry["source"],
        clock=entry["clock"],
        derived=entry.get("derived", ""),
    )
