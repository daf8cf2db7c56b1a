"""Shared test set-up.

Every test starts without the rendezvous and rank variables of whatever shell ran pytest: a stale
MASTER_ADDR/MASTER_PORT once made a peer's gloo rendezvous wait for its 30-minute default. Each
test has its own user cache directory, so no test sees the doctor answers another one kept.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.env import RANK_VARS, SIZE_VARS

pytest_plugins = ["tests.fixtures.slurm", "tests.fixtures.opened_files"]

_LEAKY = (
    *RANK_VARS,
    *SIZE_VARS.values(),
    "EZPZ_RUN_DIR",
    "PMI_RANK",
    "PMI_SIZE",
    "PMI_FD",
    "PALS_RANKID",
    "OMPI_COMM_WORLD_RANK",
    "SLURM_PROCID",
    "SLURM_STEP_ID",
    "TORCH_DEVICE",
    "TORCH_BACKEND",
)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """A skip is reported at its test, not where it was raised: the summary (``-ra``) then
    names each skipped test, where a helper's skip (a fixture's, ``tests.fixtures.required``)
    would fold every test it skipped into one line at the helper."""
    report: pytest.TestReport = yield
    if report.skipped and isinstance(report.longrepr, tuple) and not hasattr(report, "wasxfail"):
        path, line, _ = item.location
        report.longrepr = (path, (line or 0) + 1, report.longrepr[2])
    return report


@pytest.fixture(scope="session")
def _user_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(autouse=True)
def _clean_launcher_env(monkeypatch: pytest.MonkeyPatch, _user_cache: str) -> None:
    for name in _LEAKY:
        monkeypatch.delenv(name, raising=False)
    # One cache directory for the session, not the user's: the CPU probe
    # (ezpz_tui.core.watching.probe) is measured once, and the doctor's probe cache
    # (ezpz_tui.core.checking.probe_cache) starts empty in every test, which says what it expects.
    monkeypatch.setenv("XDG_CACHE_HOME", _user_cache)
    (Path(_user_cache) / "ezpz-tui" / "probes.json").unlink(missing_ok=True)


@pytest.fixture(scope="session")
def mpiexec() -> str:
    """The mpiexec next to this Python (the mpich wheel's), else one on PATH."""
    import shutil
    import sys
    from pathlib import Path

    local = Path(sys.executable).parent / "mpiexec"
    found = str(local) if local.exists() else shutil.which("mpiexec")
    if not found:
        pytest.skip("no mpiexec: pip install 'ezpz-tui[mpich]'")
    return found
