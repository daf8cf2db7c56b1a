"""At start the doctor shows what its probes found last time, labelled cached, then probes again
behind it: the real probes (torch, mpi4py, the launcher) on this machine, through the app."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ezpz_tui.core.checking.check import Check
from ezpz_tui.core.checking.doctor import run_checks
from ezpz_tui.core.checking.probe_cache import ProbeCache, cache_path
from ezpz_tui.core.launching.plan import default_plan
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.panels import DoctorPanel
from tests.pilots import FIXED, LOCAL, text_of, until


async def test_kept_answers_show_at_once_labelled_then_the_recheck_replaces_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("WANDB_MODE", "offline")
    outputs = tmp_path / "outputs"
    kept = ProbeCache(cache_path())
    first = run_checks(LOCAL, default_plan(LOCAL), outputs=outputs, cache=kept)
    assert not kept.used and cache_path().is_file()

    titles: list[tuple[bool, list[Check], str]] = []
    set_checks = DoctorPanel.set_checks

    def recorded(panel: DoctorPanel, checks: list[Check], cached: bool = False) -> None:
        set_checks(panel, checks, cached)
        titles.append((cached, checks, text_of(panel.query_one("#doctor-title"))))

    monkeypatch.setattr(DoctorPanel, "set_checks", recorded)
    app = EzpzApp(outputs=outputs, alloc=LOCAL, clock=lambda: FIXED)
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: len(titles) >= 2, "the cached doctor and its re-check", 120)
    (cached, shown, title), (again, rechecked, after) = titles
    assert cached and shown == first
    assert title.endswith("· cached, re-checking …") and title.startswith("Doctor: ")
    assert not again and "cached" not in after
    assert [c.name for c in rechecked] == [c.name for c in first]
