"""Device and backend choice on hardware this machine lacks: only the availability probes fake."""

from __future__ import annotations

import sys
import types

import pytest
import torch
import torch.distributed as dist

from runtime import device


@pytest.fixture
def no_accelerators(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.xpu, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(torch.version, "hip", None)
    return monkeypatch


def test_cpu_and_gloo(no_accelerators: pytest.MonkeyPatch) -> None:
    choice = device.device_type({})
    assert choice.name == "cpu"
    assert "no xpu, cuda or mps" in choice.reason
    assert device.backend("cpu", {}).name == "gloo"


def test_cuda_gets_nccl(no_accelerators: pytest.MonkeyPatch) -> None:
    no_accelerators.setattr(torch.cuda, "is_available", lambda: True)
    no_accelerators.setattr(dist, "is_nccl_available", lambda: True)
    assert device.device_type({}).name == "cuda"
    choice = device.backend("cuda", {})
    assert (choice.name, "NCCL" in choice.reason) == ("nccl", True)


def test_cuda_without_nccl_falls_back_to_gloo_and_says_so(
    no_accelerators: pytest.MonkeyPatch,
) -> None:
    no_accelerators.setattr(dist, "is_nccl_available", lambda: False)
    choice = device.backend("cuda", {})
    assert choice.name == "gloo" and "no NCCL" in choice.reason


def test_rocm_is_cuda_with_rccl(no_accelerators: pytest.MonkeyPatch) -> None:
    no_accelerators.setattr(torch.cuda, "is_available", lambda: True)
    no_accelerators.setattr(torch.version, "hip", "6.2.0")
    no_accelerators.setattr(dist, "is_nccl_available", lambda: True)
    assert "ROCm" in device.device_type({}).reason
    assert "RCCL" in device.backend("cuda", {}).reason


def test_xpu_wins_over_cuda_and_gets_xccl(no_accelerators: pytest.MonkeyPatch) -> None:
    no_accelerators.setattr(torch.xpu, "is_available", lambda: True)
    no_accelerators.setattr(torch.cuda, "is_available", lambda: True)
    no_accelerators.setattr(dist, "is_xccl_available", lambda: True, raising=False)
    assert device.device_type({}).name == "xpu"
    assert device.backend("xpu", {}).name == "xccl"


def test_xpu_falls_back_to_ccl_then_gloo(no_accelerators: pytest.MonkeyPatch) -> None:
    no_accelerators.setattr(dist, "is_xccl_available", lambda: False, raising=False)
    no_accelerators.setitem(sys.modules, "oneccl_bindings_for_pytorch", None)
    assert device.backend("xpu", {}).name == "gloo"
    no_accelerators.setitem(
        sys.modules, "oneccl_bindings_for_pytorch", types.ModuleType("oneccl_bindings_for_pytorch")
    )
    assert device.backend("xpu", {}).name == "ccl"


def test_mps(no_accelerators: pytest.MonkeyPatch) -> None:
    no_accelerators.setattr(torch.backends.mps, "is_available", lambda: True)
    assert device.device_type({}).name == "mps"
    assert device.backend("mps", {}).name == "gloo"


def test_overrides(no_accelerators: pytest.MonkeyPatch) -> None:
    no_accelerators.setattr(torch.cuda, "is_available", lambda: True)
    assert device.device_type({"TORCH_DEVICE": "cpu"}).name == "cpu"
    assert device.backend("cuda", {"TORCH_BACKEND": "gloo"}).reason.startswith("forced")


def test_bad_overrides_say_what_is_wrong(no_accelerators: pytest.MonkeyPatch) -> None:
    with pytest.raises(RuntimeError, match="no xpu device"):
        device.device_type({"TORCH_DEVICE": "xpu"})
    with pytest.raises(ValueError, match="not a device type"):
        device.device_type({"TORCH_DEVICE": "tpu"})
    with pytest.raises(ValueError, match="not a backend"):
        device.backend("cpu", {"TORCH_BACKEND": "nvlink"})


def test_cuda_device_bound_to_local_rank(no_accelerators: pytest.MonkeyPatch) -> None:
    no_accelerators.setattr(torch.cuda, "is_available", lambda: True)
    no_accelerators.setattr(torch.cuda, "device_count", lambda: 4)
    assert device.get_device(local_rank=5, env={}) == torch.device("cuda", 1)
