"""The plot's step cursor on a live demo run, in a real terminal: ``ezpz-tui attach`` under tmux
(the helpers of ``test_e2e_tmux``), the demo launched headless with ``--spike-at`` so its loss
has a spike at a known step.

Keys: ``t`` the Metrics tab; ``g`` the cursor on the first step, ``l`` one point on (the
readout shows step 1 and the loss the rank recorded); ``2`` ``5`` ``l`` to step 26, ``]`` the
next event (the spike, named in the readout); Enter the rank's log with the cursor on the line
it printed at that step; ``ctrl+o`` back to the plot, the cursor where it was.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

from tests.integration.test_e2e_tmux import (  # noqa: F401  (tmux: the fixture)
    EZPZ_TUI,
    Tmux,
    pytestmark,
    run_dirs,
    tmux,
)
from tests.procs import processes_of

SPIKE = 30
DEMO = ("-m", "runtime.examples.train", "--sleep", "0.15", "--steps", "100000")


def losses(run_dir: Path) -> dict[int, float]:
    """Rank 0's recorded loss by step, read from its JSONL."""
    out = {}
    for line in (run_dir / "metrics" / "b0000" / "rank-00000.jsonl").read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the line being written
        metrics = record.get("metrics", record)
        if "loss" in metrics and "step" in record:
            out[record["step"]] = float(metrics["loss"])
    return out


def test_cursor_spike_and_the_log_at_that_step(tmux: Tmux, tmp_path: Path) -> None:  # noqa: F811
    python = str(EZPZ_TUI.parent / "python")
    demo = [*DEMO, "--spike-at", str(SPIKE)]
    launch = subprocess.Popen(
        [str(EZPZ_TUI), "launch", "--ppn", "1", "--quiet", "--", python, *demo],
        env=tmux.env,
        cwd=tmux.cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _drive(tmux, tmp_path)
    finally:
        launch.send_signal(signal.SIGINT)
        launch.wait(timeout=60)
    assert not processes_of(*run_dirs(tmp_path))


PLOT = re.compile(r"loss \(\d+/\d+\)")


def _drive(tmux: Tmux, tmp_path: Path) -> None:  # noqa: F811
    deadline = time.monotonic() + 90
    while not (runs := run_dirs(tmp_path)) or not (runs[0] / "metrics").is_dir():
        assert time.monotonic() < deadline, "the launch made no run directory"
        time.sleep(0.2)
    run_dir = runs[0]
    while len(recorded := _losses_or_none(run_dir)) <= SPIKE + 5:
        assert time.monotonic() < deadline, f"the demo recorded {len(recorded)} steps"
        time.sleep(0.5)
    tmux.start([str(EZPZ_TUI), "attach", str(run_dir)])
    # t at once, as a user types ahead: it waits for the attach and then shows the Metrics tab.
    tmux.keys("t")
    tmux.wait_for("the loss plot", lambda s: PLOT.search(s) is not None, timeout=60)
    # g: the cursor on the first step; l: one point on, its loss in the readout.
    tmux.keys("g", "l")
    value = losses(run_dir)[1]
    shown = tmux.wait_for("the readout at step 1", lambda s: "step 1 · " in s)
    assert f"rank 0 {value:.6g}" in shown, f"the readout lacks rank 0's loss {value:.6g}"
    # 25l then ]: from step 26 the next event is the injected spike.
    tmux.keys("2", "5", "l")
    tmux.wait_for("the readout at step 26", lambda s: "step 26 · " in s)
    tmux.keys("]")
    spike = tmux.wait_for("the spike", lambda s: f"step {SPIKE} · " in s and "⚑ spike" in s)
    assert f"rank 0 {losses(run_dir)[SPIKE]:.6g}" in spike
    # Enter: rank 0's log, paused, on the line it printed at that step.
    tmux.keys("Enter")
    tmux.wait_for(
        "rank 0's log at the spike's step",
        lambda s: (
            re.search(r"rank 0 · \d+ lines · paused", s) is not None
            and re.search(rf"step {SPIKE}/\d+ loss=", s) is not None
        ),
        timeout=20,
    )
    # ctrl+o: back to the plot, the cursor still on the spike.
    tmux.keys("C-o")
    tmux.wait_for(
        "the plot again", lambda s: f"step {SPIKE} · " in s and "⚑ spike" in s, timeout=20
    )
    tmux.keys("q")
    deadline = time.monotonic() + 20
    while tmux.exit_status() is None:
        assert time.monotonic() < deadline, f"the TUI did not exit:\n{tmux.screen()}"
        time.sleep(0.2)


def _losses_or_none(run_dir: Path) -> dict[int, float]:
    path = run_dir / "metrics" / "b0000" / "rank-00000.jsonl"
    return losses(run_dir) if path.exists() else {}
