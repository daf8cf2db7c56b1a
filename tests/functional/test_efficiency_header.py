"""The run header names the opened run's MFU and the peak it divides by (a fixture run whose
telemetry names an A100 and whose first record says its FLOPs per token), and why an MFU that
low is suspect."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Static

from tests.functional.test_app import make_app, settle
from tests.pilots import until
from tests.unit.test_efficiency import flops_run


async def test_the_run_header_says_the_mfu_against_its_peak(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    run = flops_run(outputs, "20261126-100000-000-tp1pp1cp1", 1, "NVIDIA A100-SXM4-80GB")
    app = make_app(outputs)
    async with app.run_test(size=(140, 40)) as pilot:
        await settle(pilot)
        await app.main.open_run(run)

        def header() -> str:
            return str(app.query_one("#run-header", Static).content)

        await until(pilot, lambda: "MFU" in header(), "the header's MFU line", 30)
        line, why = header().splitlines()[-2:]
        # 1e9 FLOPs/token x 2048 tokens/s over 4 ranks: 0.512 TFLOPS a device, 0.16% of 312
        assert line == (
            "MFU 0.16% · 0.512 TFLOPS/device at rank 0's last step · "
            "of NVIDIA A100 (SXM4 or PCIe) bf16 312 TFLOPS (datasheet)"
        )
        assert why.startswith("suspect: below 0.50% of the peak: the run's flops_per_token")
