"""Accelerator sources: which device is the rank's, what each vendor tool's output gives, and
how the chain of sources drops the ones that cannot answer.

The tools are the stand-ins in tests/standins (the real tools' output formats, a fixed node of
four devices whose figures differ per device); NVML is tests/fixtures/nvml.py in sys.modules.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from runtime.telemetry import devices
from runtime.telemetry.accelerator import Accelerator, sources_for
from runtime.telemetry.amd import RocmSmi
from runtime.telemetry.devices import Pick, expected, pick
from runtime.telemetry.intel import XpuSmi
from runtime.telemetry.nvidia import MIB, NvidiaSmi, Nvml
from runtime.telemetry.tools import Failed, Figures, ToolRunner, Unavailable
from tests.fixtures.nvml import GIB, fake_nvml, uuid_of

STANDINS = Path(__file__).resolve().parents[1] / "standins"
TIMEOUT_S = 5.0  # a stand-in is a Python script: on two busy cores it can take a while to start


@pytest.fixture
def standins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-ins first on PATH, then this Python (their ``python3``), nothing else."""
    monkeypatch.setenv("PATH", f"{STANDINS}{os.pathsep}{Path(sys.executable).parent}")


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError


# --- which device is the rank's -------------------------------------------------------------


@pytest.mark.parametrize(
    ("vendor", "env", "local_rank", "want"),
    [
        ("nvidia", {}, 5, Pick(5)),
        ("nvidia", {"CUDA_VISIBLE_DEVICES": "2,3"}, 1, Pick(1, index=3)),
        ("nvidia", {"CUDA_VISIBLE_DEVICES": "2,3"}, 2, Pick(2, index=2)),  # wraps around
        ("nvidia", {"CUDA_VISIBLE_DEVICES": "3"}, 1, Pick(1, index=3)),  # bound to one GPU
        (
            "nvidia",
            {"CUDA_VISIBLE_DEVICES": f"{uuid_of(0)},{uuid_of(2)}"},
            1,
            Pick(1, uuid=uuid_of(2)),
        ),
        ("nvidia", {"CUDA_VISIBLE_DEVICES": "-1"}, 0, None),
        ("nvidia", {"CUDA_VISIBLE_DEVICES": ""}, 1, Pick(1)),  # set but empty: no restriction
        ("intel", {"ZE_AFFINITY_MASK": "0.0,0.1,1.0,1.1"}, 2, Pick(2, index=1)),
        ("intel", {"ZE_AFFINITY_MASK": "3.1"}, 0, Pick(0, index=3)),
        ("amd", {"ROCR_VISIBLE_DEVICES": "1,2", "HIP_VISIBLE_DEVICES": "0"}, 1, Pick(1, index=2)),
        ("amd", {"HIP_VISIBLE_DEVICES": "0,3"}, 1, Pick(1, index=3)),
    ],
)
def test_the_ranks_device(vendor: str, env: dict, local_rank: int, want: Pick | None) -> None:
    assert pick(vendor, local_rank, env) == want


def test_position_among_a_tools_devices() -> None:
    assert Pick(5).resolve(4) == 1
    assert Pick(1, index=3).resolve(4) == 3
    assert Pick(1, index=7).resolve(4) is None  # a GPU this node does not have
    assert Pick(0, uuid=uuid_of(2)).matches(2, uuid_of(2).lower(), 4)
    assert not Pick(0, uuid=uuid_of(2)).matches(0, uuid_of(0), 4)


def test_a_device_is_expected_from_the_env_or_the_driver_nodes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(devices, "DEVICE_NODES", (str(tmp_path / "nvidia0"),))
    assert not expected({})
    assert not expected({"CUDA_VISIBLE_DEVICES": "-1"})
    assert expected({"ZE_AFFINITY_MASK": "0.1"})
    (tmp_path / "nvidia0").touch()
    assert expected({})


# --- each source ----------------------------------------------------------------------------


def test_nvidia_smi_gives_the_ranks_gpu(standins: None) -> None:
    runner = ToolRunner()
    one = NvidiaSmi(pick("nvidia", 1, {}), runner, TIMEOUT_S).read()
    assert one == {
        "device": "nvidia-smi:1",
        "device_name": "NVIDIA H100 80GB HBM3",
        "util_pct": 17.0,
        "mem_used_bytes": 2048 * MIB,
        "mem_total_bytes": 81920 * MIB,
        "power_w": 101.5,
        "temp_c": 41.0,
    }
    three = NvidiaSmi(pick("nvidia", 3, {}), runner, TIMEOUT_S).read()
    assert three["util_pct"] == 37.0 and "power_w" not in three  # [N/A] is left out
    env = {"CUDA_VISIBLE_DEVICES": f"{uuid_of(3)},{uuid_of(2)}"}
    by_uuid = NvidiaSmi(pick("nvidia", 1, env), runner, TIMEOUT_S).read()
    assert (by_uuid["device"], by_uuid["util_pct"]) == ("nvidia-smi:2", 27.0)


def test_xpu_smi_gives_the_ranks_card_for_a_tile(standins: None) -> None:
    runner = ToolRunner()
    env = {"ZE_AFFINITY_MASK": "0.0,0.1,1.0,1.1"}
    figures = XpuSmi(pick("intel", 3, env), runner, TIMEOUT_S).read()
    assert figures["device"] == "xpu-smi:1"
    assert figures["device_name"] == "Intel(R) Data Center GPU Max 1550"  # from discovery
    assert (figures["util_pct"], figures["power_w"], figures["temp_c"]) == (17.0, 201.0, 51.0)
    assert figures["mem_used_bytes"] == 2048 * MIB
    assert figures["mem_total_bytes"] == pytest.approx(65536 * MIB, rel=0.005)  # derived
    # No mask: the whole node is dumped and the rank takes its place among the cards.
    first = XpuSmi(pick("intel", 4, {}), runner, TIMEOUT_S).read()
    assert (first["device"], first["util_pct"]) == ("xpu-smi:0", 7.0)
    assert "power_w" not in first  # N/A


def test_rocm_smi_reads_either_generations_field_names(standins: None) -> None:
    runner = ToolRunner()
    mi250 = RocmSmi(pick("amd", 1, {}), runner, TIMEOUT_S).read()
    assert mi250 == {
        "device": "rocm-smi:card1",
        "device_name": "AMD INSTINCT MI250X",
        "util_pct": 17.0,
        "mem_used_bytes": 2 * GIB,
        "mem_total_bytes": 64 * GIB,
        "power_w": 301.0,
        "temp_c": 61.0,  # the edge sensor first
    }
    mi300 = RocmSmi(pick("amd", 0, {"ROCR_VISIBLE_DEVICES": "2"}), runner, TIMEOUT_S).read()
    assert (mi300["power_w"], mi300["temp_c"]) == (302.0, 62.0)  # socket power, junction
    assert mi300["device_name"] == "AMD Instinct MI300X"  # "Card series", the other spelling


def test_nvml_gives_the_ranks_gpu_and_leaves_out_what_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nvml = fake_nvml(failing={"power"})
    monkeypatch.setitem(sys.modules, "pynvml", nvml)
    source = Nvml(pick("nvidia", 0, {"CUDA_VISIBLE_DEVICES": "2"}))
    for _ in range(3):
        figures = source.read()
    assert figures == {
        "device": "nvml:2",
        "device_name": "NVIDIA H100 80GB HBM3",
        "util_pct": 27.0,
        "mem_used_bytes": 3 * GIB,
        "mem_total_bytes": 80 * GIB,
        "temp_c": 42.0,
    }
    assert nvml.calls["init"] == 1 and nvml.calls["handle"] == 1  # once, not per sample
    by_uuid = Nvml(pick("nvidia", 1, {"CUDA_VISIBLE_DEVICES": f"{uuid_of(0)},{uuid_of(3)}"}))
    assert by_uuid.read()["util_pct"] == 37.0


def test_nvml_that_answers_nothing_fails_and_one_that_cannot_start_is_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml({"util", "memory", "power", "temp"}))
    with pytest.raises(Failed):
        Nvml(Pick(0)).read()
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml({"init"}))
    with pytest.raises(Unavailable, match="Not Supported"):
        Nvml(Pick(0)).read()
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(Unavailable, match="not installed"):
        Nvml(Pick(0)).read()
    with pytest.raises(Unavailable):
        Nvml(Pick(0, index=9)).read()


# --- the chain ------------------------------------------------------------------------------


def test_the_first_source_that_answers_is_used(standins: None, no_nvml: None) -> None:
    runner = ToolRunner()
    notes: list[str] = []
    chain = Accelerator(sources_for(1, {}, runner, TIMEOUT_S), True, notes.append)
    assert chain.read()["device"] == "nvidia-smi:1"
    assert chain.dropped == {"NVML": "not installed"}
    assert notes == []


def test_a_hanging_tool_is_killed_and_dropped_and_sampling_goes_on(
    standins: None, no_nvml: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EZPZ_STANDIN_HANG", "1")  # the stand-in sleeps an hour
    runner = ToolRunner()
    smi = NvidiaSmi(Pick(0), runner, 0.5)
    asked: list[float] = []
    read = smi.read

    def counted() -> Figures:
        asked.append(time.monotonic())
        return read()

    monkeypatch.setattr(smi, "read", counted)
    chain = Accelerator([smi], True, lambda _line: None)
    for attempt in range(3):
        started = time.monotonic()
        assert chain.read() == {}
        # Cut off after its 0.5 s (about 0.51 s here), not after the hour.
        assert time.monotonic() - started < 10.0, f"try {attempt} waited for the hung tool"
    assert chain.dropped["nvidia-smi"].startswith("no answer in 0.5 s")
    assert len(asked) == 3
    assert chain.read() == {}
    assert len(asked) == 3, "dropped: not asked again"


def test_a_tool_that_vanishes_is_dropped_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_nvml: None
) -> None:
    for name in ("nvidia-smi", "xpu-smi"):
        shutil.copy(STANDINS / name, tmp_path / name)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{Path(sys.executable).parent}")
    chain = Accelerator(sources_for(0, {}, ToolRunner(), TIMEOUT_S), True, lambda _line: None)
    assert chain.read()["device"] == "nvidia-smi:0"
    (tmp_path / "nvidia-smi").unlink()
    assert chain.read()["device"] == "xpu-smi:0"
    assert chain.dropped["nvidia-smi"] == "not found"


def test_no_source_writes_one_line_only_where_a_device_was_expected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_nvml: None
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no tool at all
    notes: list[str] = []
    chain = Accelerator(sources_for(0, {}, ToolRunner(), TIMEOUT_S), True, notes.append)
    for _ in range(3):
        assert chain.read() == {}
    assert notes == [
        "ezpz telemetry: no accelerator figures (NVML: not installed; nvidia-smi: not found; "
        "xpu-smi: not found; rocm-smi: not found): host figures only"
    ]
    quiet: list[str] = []
    chain = Accelerator(sources_for(0, {}, ToolRunner(), TIMEOUT_S), False, quiet.append)
    assert chain.read() == {} and quiet == []
