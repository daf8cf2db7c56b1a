"""Keys typed ahead, in a real terminal: ``ezpz-tui attach RUN`` under tmux (the helpers of
``test_e2e_tmux``) with a key sent a moment after the command, as a vim user types it, before
the screen has mounted its regions or opened the run.

Each start is a fresh process; each key is sent once, and the test waits for what it does.
"""

from __future__ import annotations

import itertools
import re
import time
from pathlib import Path

import pytest

from tests.integration.test_e2e_tmux import (  # noqa: F401  (tmux: the fixture)
    EZPZ_TUI,
    Tmux,
    pytestmark,
    run_dirs,
    tmux,
)

PLOT = re.compile(r"loss \(\d+/\d+\)")  # the Metrics tab's plot title


@pytest.fixture
def finished_run(tmux: Tmux, tmp_path: Path) -> Path:  # noqa: F811
    """A real 2-rank demo run that has ended, with both ranks' logs and metrics."""
    python = str(EZPZ_TUI.parent / "python")
    demo = [python, "-m", "runtime.examples.train", "--steps", "5"]
    done = tmux.cli("launch", "--ppn", "2", "--quiet", "--", *demo, timeout=180)
    assert done.returncode == 0, done.stderr
    (run_dir,) = run_dirs(tmp_path)
    return run_dir


def _attach_and_type(tmux: Tmux, run_dir: Path, key: str, after_s: float) -> None:  # noqa: F811
    """Start ``ezpz-tui attach`` afresh, in a session of its own on the same tmux server (the
    last one's pane stays, dead, until the fixture ends the server), and send ``key``
    ``after_s`` later."""
    tmux.target = f"attach-{next(_starts)}"
    tmux.start([str(EZPZ_TUI), "attach", str(run_dir)])
    time.sleep(after_s)
    tmux.keys(key, pause=0)


_starts = itertools.count()


def _quit(tmux: Tmux) -> None:  # noqa: F811
    tmux.keys("q", pause=0)
    deadline = time.monotonic() + 30
    while (status := tmux.exit_status()) is None:
        assert time.monotonic() < deadline, f"the TUI did not exit:\n{tmux.screen()}"
        time.sleep(0.2)
    assert status == "status=0 signal=", status


def test_keys_typed_during_attach_act(tmux: Tmux, finished_run: Path) -> None:  # noqa: F811
    """``t`` 0.1, 0.3 and 0.6 s after the command (three fresh starts) shows the Metrics tab,
    not the Run tab the attach chooses; ``j`` during start-up moves to rank 1."""
    for after_s in (0.1, 0.3, 0.6):
        _attach_and_type(tmux, finished_run, "t", after_s)
        # Only the kept t brings the plot's title; the Run tab shows the rank's log instead.
        tmux.wait_for(
            f"the Metrics tab's loss plot (t after {after_s} s)",
            lambda s: PLOT.search(s) is not None,
            60,
        )
        assert not re.search(r"rank 0 · \d+ lines", tmux.screen()), "the Run tab came back"
        _quit(tmux)
    _attach_and_type(tmux, finished_run, "j", 0.2)
    tmux.wait_for(
        "rank 1's log", lambda s: re.search(r"rank 1 · \d+ lines", s) is not None, timeout=60
    )
    _quit(tmux)
