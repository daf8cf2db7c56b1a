"""One telemetry sample, as written to ``telemetry/rank-NNNNN.jsonl`` (one JSON object a line).

The line is the contract between the sampler in every rank's capture wrapper and the readers in
the TUI and the CLI (``ezpz-tui top``), which may be another version of this program: fields are
flat and named with their unit, a field the source could not give is left out rather than
written as null, and a reader takes a field of the wrong type as not given and never raises.
Standard library only: ranks import this.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

INTERVAL_VAR = "EZPZ_TELEMETRY_S"
"""Seconds between samples, for the capture wrapper; ``0`` turns the sampler off. The launcher
sets it from config.toml's ``[telemetry] interval`` when that differs from the default."""
DEFAULT_INTERVAL_S = 2.0


@dataclass(frozen=True)
class Sample:
    """A rank's figures at ``time`` (seconds since the epoch).

    ``cpu_pct`` is the rank's process tree (the command and everything below it) in percent of
    one core since the previous sample, so a rank busy on four threads reads 400; ``rss_bytes``
    is the tree's resident memory. The accelerator fields describe the rank's own device, named
    by ``device`` as ``source:id`` (``nvml:0``, ``nvidia-smi:3``, ``xpu-smi:1``,
    ``rocm-smi:card2``), and its model by ``device_name`` as the tool spells it (``NVIDIA H100
    80GB HBM3``): what :mod:`runtime.efficiency.peaks` looks a peak up by.
    """

    time: float
    cpu_pct: float | None = None
    rss_bytes: int | None = None
    procs: int | None = None
    device: str | None = None
    device_name: str | None = None
    util_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    power_w: float | None = None
    temp_c: float | None = None

    @property
    def mem_pct(self) -> float | None:
        """Accelerator memory in use, in percent of the device's total."""
        if self.mem_used_bytes is None or not self.mem_total_bytes:
            return None
        return 100.0 * self.mem_used_bytes / self.mem_total_bytes

    def to_json(self) -> str:
        """The line to append (no newline); fields not given are left out."""
        data = {k: v for k, v in asdict(self).items() if v is not None}
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Sample | None:
        """A sample from a decoded line; ``None`` without a usable ``time``."""
        when = _number(data.get("time"))
        if when is None:
            return None
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name == "time":
                continue
            raw = data.get(f.name)
            if f.name in _TEXTS:
                values[f.name] = raw if isinstance(raw, str) else None
            elif f.name in _INTS:
                number = _number(raw)
                values[f.name] = int(number) if number is not None else None
            else:
                values[f.name] = _number(raw)
        return cls(time=when, **values)


_TEXTS = frozenset({"device", "device_name"})
_INTS = frozenset({"rss_bytes", "procs", "mem_used_bytes", "mem_total_bytes"})


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def parse_line(line: str | bytes) -> Sample | None:
    """A sample from one line of a telemetry file; ``None`` for anything else (a torn line)."""
    try:
        data = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return Sample.from_json(data) if isinstance(data, dict) else None
