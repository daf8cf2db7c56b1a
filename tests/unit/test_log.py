"""Which ranks log: rank 0 on a shared console, every rank into its own file under capture."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = "from runtime.log import get_logger; get_logger('t').info('hello from a rank')"


@pytest.mark.parametrize(
    ("extra", "speaks"),
    [
        ({}, False),
        ({"EZPZ_RUN_DIR": "/tmp/run"}, True),
        ({"EZPZ_RUN_DIR": "/tmp/run", "EZPZ_LOG_ALL_RANKS": "0"}, False),
        ({"EZPZ_LOG_ALL_RANKS": "1"}, True),
    ],
)
def test_rank_one_logs_only_into_its_own_file_or_on_request(
    extra: dict[str, str], speaks: bool
) -> None:
    env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", **extra}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert ("hello from a rank" in done.stderr) is speaks, done.stderr
