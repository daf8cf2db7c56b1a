"""The peak table: the device names the telemetry sources read from the tools (the stand-ins in
tests/standins, NVML from tests/fixtures/nvml.py) resolve to a sourced peak; any other name, or
a dtype the table has no figure for, resolves to nothing rather than a guess."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

from runtime.efficiency.peaks import TABLE, Peak, resolve, table
from runtime.telemetry.amd import RocmSmi
from runtime.telemetry.devices import pick
from runtime.telemetry.intel import XpuSmi
from runtime.telemetry.nvidia import NvidiaSmi, Nvml
from runtime.telemetry.tools import ToolRunner
from tests.fixtures.nvml import fake_nvml

STANDINS = Path(__file__).resolve().parents[1] / "standins"
TIMEOUT_S = 5.0


@pytest.fixture
def standins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{STANDINS}{os.pathsep}{Path(sys.executable).parent}")


def test_the_stand_ins_device_names_resolve_to_their_datasheet_peaks(
    standins: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = ToolRunner()
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    names = {
        "nvml": Nvml(pick("nvidia", 0, {})).read()["device_name"],
        "nvidia-smi": NvidiaSmi(pick("nvidia", 0, {}), runner, TIMEOUT_S).read()["device_name"],
        "rocm-smi": RocmSmi(pick("amd", 0, {}), runner, TIMEOUT_S).read()["device_name"],
        "xpu-smi": XpuSmi(pick("intel", 0, {}), runner, TIMEOUT_S).read()["device_name"],
    }
    peaks = {source: resolve(str(name), "bf16") for source, name in names.items()}
    got = {source: (p.device, p.tflops) for source, p in peaks.items() if p is not None}
    assert got == {
        "nvml": ("NVIDIA H100 SXM5", 989.4),
        "nvidia-smi": ("NVIDIA H100 SXM5", 989.4),
        "rocm-smi": ("AMD Instinct MI250X (one GCD)", 191.5),
        "xpu-smi": ("Intel Data Center GPU Max 1550 (one tile)", 419.4),
    }
    for source, peak in peaks.items():
        assert peak is not None and peak.source.startswith("https://") and peak.clock
        kind = "(derived)" if source == "xpu-smi" else "(datasheet)"
        assert not peak.measured and peak.label.endswith(kind)


@pytest.mark.parametrize(
    ("name", "dtype", "want"),
    [
        ("NVIDIA H100 PCIe", "bfloat16", 756.5),
        ("NVIDIA H100 NVL", "bf16", 835.5),
        ("NVIDIA GH200 480GB", "bf16", 989.4),  # not the H200 entry, though it holds "H200"
        ("NVIDIA H200 NVL", "fp32", 60.0),
        ("NVIDIA A100-SXM4-80GB", "tf32", 156.0),
        ("NVIDIA A100 80GB PCIe", "float16", 312.0),
        ("NVIDIA B200", "bf16", 2250.0),
        ("AMD Instinct MI355X", "bf16", 2516.6),
        ("NVIDIA GeForce RTX 4090", "bf16", None),  # not in the table: no guess
        ("Tesla T4", "fp32", None),
        ("AMD Instinct MI250X", "tf32", None),  # the MI250X has no TF32 figure
        ("NVIDIA H100 80GB HBM3", "int8", None),  # not a dtype the table knows
        ("", "bf16", None),
    ],
)
def test_a_name_resolves_to_its_entry_or_to_nothing(name: str, dtype: str, want: float | None):
    peak = resolve(name, dtype)
    assert (peak.tflops if peak is not None else None) == want


def test_every_entry_names_its_source_and_clock_and_only_dense_dtypes() -> None:
    for entry in table():
        assert entry["source"].startswith("https://") and entry["clock"], entry["device"]
        assert set(entry["tflops"]) <= {"bf16", "fp16", "tf32", "fp32"}, entry["device"]
        assert all(v > 0 for v in entry["tflops"].values())


def test_the_tables_text_says_the_matching_and_the_fields_the_code_reads() -> None:
    """Its 'about' names only fields entries have and the code reads (no rule it does not
    implement), and its order rule holds: every entry is the one its own match words find,
    not shadowed by an earlier, shorter one."""
    about = json.loads(TABLE.read_text())["about"]
    assert set(re.findall(r"'(\w+)'", about)) == {"match", "derived"}
    fields = {"device", "match", "tflops", "clock", "source", "derived"}
    for entry in table():
        assert set(entry) <= fields, entry["device"]
        dtype = next(iter(entry["tflops"]))
        found = resolve(" ".join(entry["match"]), dtype)
        assert found is not None and found.device == entry["device"]
    assert resolve("NVIDIA H100 NVL", "bf16").device == "NVIDIA H100 NVL"  # type: ignore[union-attr]


def test_a_derived_peak_shows_its_arithmetic_and_says_derived() -> None:
    (entry,) = [e for e in table() if "derived" in e]
    # per tile: 64 Xe cores x 8 XMX engines x 512 FLOPs a clock x 1.6 GHz
    assert entry["tflops"]["bf16"] == pytest.approx(64 * 8 * 512 * 1.6e9 / 1e12, abs=0.05)
    assert entry["tflops"]["fp32"] == pytest.approx(64 * 256 * 1.6e9 / 1e12, abs=0.05)
    assert "x 1.6 GHz = 419.4 TFLOPS" in entry["derived"]
    peak = resolve("Intel(R) Data Center GPU Max 1550", "bf16")
    assert peak is not None and peak.kind == "derived" and peak.derived == entry["derived"]
    assert peak.label == "Intel Data Center GPU Max 1550 (one tile) bf16 419.4 TFLOPS (derived)"
    assert peak.as_dict()["derived"] == entry["derived"]
    assert Peak(1.0, "bf16", "x", "https://example.org").kind == "datasheet"
