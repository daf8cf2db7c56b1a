"""What every command shares: the outputs directory, the run a RUN argument names, and lines
on stderr that never raise."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import TextIO


def fail(message: str) -> int:
    """One readable line and exit status 2: every command's answer to bad input."""
    say(f"ezpz-tui: {message}")
    return 2


def say(message: str) -> None:
    """A line on stderr that never raises: the terminal may be gone (SIGHUP) or stderr full."""
    with contextlib.suppress(OSError, ValueError):
        print(message, file=sys.stderr, flush=True)


def outputs_of(args: argparse.Namespace) -> Path:
    from ezpz_tui.core.runs.outputs import default_outputs

    return args.outputs or default_outputs()


def run_named(args: argparse.Namespace, run: str | None = None) -> Path | str:
    """The run directory ``run`` (default ``args.run``) names (an id, a unique prefix or a
    path), or why none."""
    from ezpz_tui.core.runs.record import RunStoreError
    from ezpz_tui.core.runs.store import RunStore
    from runtime.rundir import LOGS, RUN_TOML, RunDir

    try:
        run_dir = RunStore(outputs_of(args)).resolve(args.run if run is None else run).resolve()
    except RunStoreError as exc:
        return str(exc)
    if not RunDir(run_dir).looks_like_run():
        return f"{run_dir} holds no run: no {RUN_TOML}, {LOGS}/ or metrics files"
    return run_dir


def colour_wanted(stream: TextIO) -> bool:
    """Colour only to a terminal, as the no-color.org and force-color.org conventions say:
    ``NO_COLOR`` (any value) turns it off even there, ``FORCE_COLOR`` turns it on even in a
    pipe (``FORCE_COLOR=0`` does not)."""
    if os.environ.get("NO_COLOR"):
        return False
    forced = os.environ.get("FORCE_COLOR")
    if forced:
        return forced != "0"
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
