"""The doctor's probe cache with the real probes, run by an interpreter that counts its starts
(the real one behind a shell wrapper: only the count is added)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ezpz_tui.core.checking.check import Check
from ezpz_tui.core.checking.doctor import run_checks
from ezpz_tui.core.checking.probe_cache import ProbeCache, cache_path
from ezpz_tui.core.launching.allocation import detect_allocation


def counting_python(tmp_path: Path) -> tuple[Path, Path]:
    """A venv-shaped Python that appends a line to ``starts`` each time it starts."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    starts = tmp_path / "starts"
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\necho started >> {starts}\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return python, starts


def started(starts: Path) -> int:
    return len(starts.read_text().splitlines()) if starts.exists() else 0


def test_kept_answers_are_reused_until_the_interpreter_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    python, starts = counting_python(tmp_path)
    env = {**os.environ, "WANDB_MODE": "offline"}
    alloc = detect_allocation(env, probe=False)

    def doctor(reuse: bool) -> tuple[list[Check], bool]:
        cache = ProbeCache(cache_path(), reuse=reuse)
        rows = run_checks(alloc, outputs=tmp_path / "out", env=env, python=str(python), cache=cache)
        return rows, cache.used

    first, used = doctor(reuse=True)
    probes = started(starts)
    assert not used and probes >= 2  # torch and mpi4py, nothing kept yet
    assert cache_path().is_file()
    assert {r.name: r.level for r in first}["torch"] == "ok"

    again, used = doctor(reuse=True)
    assert used and again == first
    assert started(starts) == probes  # every answer was the kept one

    _, used = doctor(reuse=False)  # the re-check behind cached rows
    assert not used and started(starts) == 2 * probes

    st = python.stat()
    os.utime(python, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    changed, _ = doctor(reuse=True)  # the launcher's --version, unchanged, is still reused
    assert started(starts) == 3 * probes  # every probe that runs this interpreter ran again
    assert changed == first


def test_an_unreadable_cache_is_only_a_slower_start(tmp_path: Path) -> None:
    path = tmp_path / "probes.json"
    path.write_text("{not json")
    cache = ProbeCache(path)
    assert cache.answer("probe", ["key"], lambda: {"found": 1}) == {"found": 1}
    assert not cache.used
    cache.save()
    assert ProbeCache(path).answer("probe", ["key"], lambda: {"found": 2}) == {"found": 1}
