"""``ezpz-tui attach`` on a run whose ``run.toml`` is not valid TOML, in a real terminal (the
helpers of ``test_e2e_tmux``).

A real 2-rank run (the mpich wheel's mpiexec) has ended; its ``run.toml`` is then overwritten
with something that is not TOML, as a half-copied directory or a stray edit leaves it. The rank
list still comes from what is on disk (the ranks' status files and logs), the screen says the
record cannot be read, and ``j``/``k`` move between the two ranks' logs as with an intact one.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from tests.integration.test_e2e_tmux import (  # noqa: F401  (tmux: the fixture)
    EZPZ_TUI,
    Tmux,
    pytestmark,
    run_dirs,
    tmux,
)

SAY = "import os; print(f'hello from rank {os.environ[\"RANK\"]}')"


def test_attach_with_a_corrupt_run_toml_moves_between_ranks(
    tmux: Tmux,  # noqa: F811
    tmp_path: Path,
) -> None:
    python = str(EZPZ_TUI.parent / "python")
    done = tmux.cli("launch", "--ppn", "2", "--quiet", "--", python, "-c", SAY)
    assert done.returncode == 0, done.stderr
    (run_dir,) = run_dirs(tmp_path)
    (run_dir / "run.toml").write_text("run_id = [unclosed\n")

    tmux.start([str(EZPZ_TUI), "attach", str(run_dir)])
    tmux.wait_for(
        "both ranks listed, rank 0's log, and the record said to be unreadable",
        lambda s: (
            re.search(r"\s0 exited 0", s) is not None
            and re.search(r"\s1 exited 0", s) is not None
            and re.search(r"rank 0 · \d+ lines?", s) is not None
            and "hello from rank 0" in s
            and "run.toml cannot be read" in s
        ),
        timeout=60,
    )
    tmux.keys("j")
    tmux.wait_for(
        "rank 1's log after j",
        lambda s: re.search(r"rank 1 · \d+ lines?", s) is not None and "hello from rank 1" in s,
        timeout=20,
    )
    tmux.keys("k")
    tmux.wait_for(
        "rank 0's log again after k",
        lambda s: re.search(r"rank 0 · \d+ lines?", s) is not None,
        timeout=20,
    )
    tmux.keys("q")
    deadline = time.monotonic() + 20
    while tmux.exit_status() is None:
        assert time.monotonic() < deadline, f"the TUI did not exit:\n{tmux.screen()}"
        time.sleep(0.2)
