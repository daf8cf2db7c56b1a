"""The summary bar's checkpoint gauge for an opened run: a real run of the demo that saved
every 3 of its 8 steps shows its newest checkpoint, what a crash would redo and the restore; a
real run that saved none says "no checkpoints" (both launched through ``ezpz-tui launch`` on 2
gloo ranks: tests/fixtures/checkpointed.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ezpz_tui.ui.widgets.panels import SummaryBar
from tests.fixtures.checkpointed import launch_demo
from tests.functional.test_app import make_app, settle
from tests.pilots import text_of, until

pytestmark = pytest.mark.mpi


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    outputs = tmp_path_factory.mktemp("bar") / "outputs"
    launch_demo(outputs, "--checkpoint-every", "3")
    launch_demo(outputs, "--steps", "3")
    return outputs


async def test_the_summary_bar_shows_the_checkpoint_gauge(outputs: Path) -> None:
    saving, plain = sorted(p for p in outputs.iterdir() if p.is_dir())
    app = make_app(outputs)
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        bar = app.query_one(SummaryBar)
        await app.main.open_run(saving)
        await until(pilot, lambda: "ckpt 6 (" in text_of(bar), "step 6's checkpoint", 30)
        # The checkpoints and the records are read apart (the records by the first read's
        # worker process): the steps to redo show once both are in.
        await until(pilot, lambda: "· redo" in text_of(bar), "the steps to redo", 30)
        said = text_of(bar)
        assert "· redo 2 steps " in said and " · restore " in said, said
        assert "(size / read rate)" in said and "no checkpoints" not in said, said
        await app.main.open_run(plain)
        await until(pilot, lambda: "no checkpoints" in text_of(bar), "no checkpoints", 30)
        await until(pilot, lambda: "step 2" in text_of(bar), "the plain run's last step", 30)
        said = text_of(bar)
        assert "no checkpoints · redo 3 steps " in said and "ckpt" not in said, said
