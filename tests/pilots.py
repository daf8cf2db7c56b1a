"""Waiting in Pilot tests for what a worker or the follower thread delivers."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.pilot import Pilot


async def until(pilot: Pilot[None], ready: Callable[[], bool], what: str, timeout: float) -> None:
    """Let the app run until ``ready()`` holds."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await pilot.pause(0.1)
