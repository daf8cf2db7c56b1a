"""What the real-process tests share."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.cli import kill_leftovers
from tests.fixtures.finished import Finished, launch_finished


@pytest.fixture
def outputs(tmp_path: Path) -> Iterator[Path]:
    """An outputs directory whose runs leave no process behind, whatever the test did."""
    out = tmp_path / "outputs"
    try:
        yield out
    finally:
        kill_leftovers(out)


@pytest.fixture(scope="session")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Finished:
    """A succeeded and a failed real run in one outputs directory, launched once a session
    (tests/fixtures/finished.py); tests copy it before changing anything."""
    return launch_finished(tmp_path_factory.mktemp("finished") / "outputs")
