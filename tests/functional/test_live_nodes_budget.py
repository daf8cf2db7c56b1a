"""A live run of 1,200 ranks read from its node digests (issue 34): every rank's row in the
first poll from 100 digests, no rank's own file opened but rank 0's and the launcher's, and then
no more than the ``[follow]`` budget of metadata calls a second (counted by
:mod:`~ezpz_tui.core.watching.fscalls`, through which every call of the follower goes).

The run is real up to its liveness: a 2-rank History run launched through ``ezpz-tui launch``
(the mpich wheel's mpiexec), grown to 1,200 ranks on 100 nodes by ``bench/grow_run.py`` and made
live by ``bench/live_run.py`` (its state and statuses say running, a digest for each node kept
fresh by a heartbeat process), the one thing that cannot exist on this machine at that size.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

from ezpz_tui.core.watching import fscalls
from ezpz_tui.core.watching.followers import LAUNCHER
from ezpz_tui.core.watching.node_follow import LiveNodes
from runtime.rundir import RankState, RunDir
from runtime.telemetry.record import INTERVAL_VAR
from tests.fixtures.cli import PY, REPO, base_env, cli, kill_leftovers, run_dirs
from tests.fixtures.finished import GOOD

RANKS, PER_NODE = 1200, 12
BUDGET = 20.0  # metadata calls a second


def test_a_live_run_is_read_per_node_within_the_budget(tmp_path: Path) -> None:
    outputs = tmp_path / "source"
    try:
        done = cli(
            ["launch", "--quiet", "--ppn", "2", "--", PY, "-c", GOOD],
            {
                **base_env(outputs),
                INTERVAL_VAR: "0.2",
            },
        )
        assert done.returncode == 0, done.stderr
    finally:
        kill_leftovers(outputs)
    (source,) = run_dirs(outputs)
    run = tmp_path / "grown" / source.name
    grow = [PY, str(REPO / "bench" / "grow_run.py"), str(source), str(run), str(RANKS)]
    done = subprocess.run(
        [*grow, "--ranks-per-node", str(PER_NODE)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    live = subprocess.Popen(
        [PY, str(REPO / "bench" / "live_run.py"), str(run), "--heartbeat-s", "2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert live.stdout is not None
        assert "100 node digests" in live.stdout.readline()  # made live: its digests written
        nodes = LiveNodes(
            run, lambda: (0, LAUNCHER), log_backlog=16 << 10, stats_per_second=BUDGET, slowest=30
        )
        assert nodes.has_digests()
        batch = nodes.poll()
        assert sorted(batch.status) == list(range(RANKS))  # every row from the first poll
        assert all(s.state == RankState.RUNNING for s in batch.status.values())
        assert set(batch.telemetry) == set(range(RANKS))
        assert set(range(RANKS)) <= set(batch.records)  # the newest step of each
        assert len(batch.records[0].steps) > 1  # rank 0's whole series, from its file
        start, calls = time.monotonic(), fscalls.total()
        while time.monotonic() - start < 10:
            nodes.poll()
            time.sleep(0.1)
        rate = (fscalls.total() - calls) / (time.monotonic() - start)
        assert rate <= BUDGET * 1.1, rate
        rank_run = RunDir(run)
        named = {re.sub(r"/b\d{4}/", "/", str(p.relative_to(run))) for p in nodes.opened}
        assert named <= {
            "logs/rank-00000.log",
            "metrics/rank-00000.jsonl",
            "telemetry/rank-00000.jsonl",
            rank_run.launcher_log.name,
        }, named
        assert not nodes.ended
    finally:
        live.terminate()
        live.wait()
