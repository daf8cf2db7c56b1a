"""History(memory=True): torch's peak accelerator memory in every record, nothing on the CPU.

There is no GPU here, so the one thing faked is torch's answer about it: ``is_available`` and
``max_memory_allocated`` of ``torch.cuda``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from runtime.history import History


def metrics_of(history: History) -> list[dict]:
    return [json.loads(line)["metrics"] for line in history.path.read_text().splitlines()]


def test_peak_memory_in_gib_on_a_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    peaks = iter([3 * 2**30, 5 * 2**29])
    monkeypatch.setattr(torch.xpu, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda *a, **k: next(peaks))
    with History(tmp_path, rank=0, memory=True) as history:
        history.record(0, {"loss": 1.0})
        history.record(1, {"loss": 0.5})
        assert history.summary()["mem_peak_gb"]["max"] == 3.0
    assert [m["mem_peak_gb"] for m in metrics_of(history)] == [3.0, 2.5]


def test_nothing_added_on_the_cpu_or_unasked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.xpu, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with History(tmp_path / "cpu", rank=0, memory=True) as history:
        history.record(0, {"loss": 1.0})
    assert metrics_of(history) == [{"loss": 1.0}]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with History(tmp_path / "off", rank=0) as history:
        history.record(0, {"loss": 1.0})
    assert metrics_of(history) == [{"loss": 1.0}]


def test_memory_never_imports_torch(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from runtime.history import History\n"
        f"h = History({str(tmp_path)!r}, rank=0, memory=True)\n"
        "h.record(0, {'loss': 1.0})\n"
        "print('torch' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "False", proc.stderr
