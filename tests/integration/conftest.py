"""What the real-process tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.cli import kill_leftovers


@pytest.fixture
def outputs(tmp_path: Path) -> Iterator[Path]:
    """An outputs directory whose runs leave no process behind, whatever the test did."""
    out = tmp_path / "outputs"
    try:
        yield out
    finally:
        kill_leftovers(out)
