"""What every app test starts from."""

from __future__ import annotations

from pathlib import Path

import pytest

from ezpz_tui import config


@pytest.fixture(autouse=True)
def config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty config directory: no user keys, theme or themes of whoever runs the tests."""
    path = tmp_path / "config"
    path.mkdir()
    monkeypatch.setenv(config.ENV_CONFIG_DIR, str(path))
    return path
