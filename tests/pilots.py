"""What the Pilot tests share: waiting for what a worker or the follower thread delivers, the
fixture allocation of this host, and the text a widget shows."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable

from textual.pilot import Pilot
from textual.widget import Widget
from textual.worker import WorkerCancelled

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.ui.opened_run import OpenedRun

FIXED = 1795352400.0
"""The frozen "now" of the app's clock in tests."""

HOST = socket.gethostname()
LOCAL = Allocation(
    scheduler="none",
    job_id=None,
    machine=HOST.split(".")[0],
    hosts=(HOST,),
    accelerators_per_host=2,
    accelerator_kind="cpu",
    accelerator_source="fixture",
    walltime_left_s=None,
    walltime_checked_at=FIXED,
    nodefile=None,
    cpus_per_host=2,
)
"""This host alone, no scheduler, two CPU slots: real local runs fit in it."""


def text_of(widget: Widget) -> str:
    return str(widget.render())


async def until(pilot: Pilot[None], ready: Callable[[], bool], what: str, timeout: float) -> None:
    """Let the app run until ``ready()`` holds."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await pilot.pause(0.1)


async def started(pilot: Pilot[None]) -> None:
    """Let the app run until its main screen has mounted every region (they mount after the
    first frame), has a session and is ready (the runs list read after the plan's frame)."""
    main = pilot.app.main  # type: ignore[attr-defined]

    def ready() -> bool:
        return main.started and main.session is not None and not main._arriving

    await until(pilot, ready, "the start-up", 10)


async def attached(pilot: Pilot[None]) -> OpenedRun:
    """Start-up done and the run the app was started on opened: that run."""
    await started(pilot)
    main = pilot.app.main  # type: ignore[attr-defined]
    await until(pilot, lambda: main.opened is not None, "the run opened", 10)
    return main.opened


async def painted(pilot: Pilot[None]) -> None:
    """Wait until the screen has painted what its widgets hold now. ``pause`` only lets the
    queues run: a widget changed just before (a table's rows, sized when it is next idle) may
    not be on screen yet, nor behind a dialog pushed next."""
    for _ in range(2):  # the change, then what its widget's idle made of it
        done = asyncio.Event()
        pilot.app.screen.call_after_refresh(done.set)
        await done.wait()


async def workers_done(pilot: Pilot[None], tries: int = 50) -> None:
    """Wait until every worker has finished. An exclusive worker (the preview, the runs list)
    cancelled because a newer one replaced it makes ``wait_for_complete`` raise: wait for the
    workers left instead."""
    for _ in range(tries):
        try:
            await pilot.app.workers.wait_for_complete()
            return
        except WorkerCancelled:
            await pilot.pause()
    await pilot.app.workers.wait_for_complete()
