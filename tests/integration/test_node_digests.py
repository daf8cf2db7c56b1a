"""Node digests on real jobs: four gloo ranks under ``ezpz-tui launch`` (the real mpiexec and
capture wrapper) report through one writer on this node; ``top --json`` of the live run reads
its rows from the digest, falls back to the ranks' own files and says so when the writer stops,
and another rank takes over when the writer dies.

One host can make one node only: the digests of several nodes are the same files, one a host.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from runtime.rundir import RunDir, read_statuses
from tests.fixtures.cli import REPO, base_env, kill_leftovers, run_dirs
from tests.fixtures.required import strace

PY = sys.executable
SCRIPT = REPO / "tests" / "ranks" / "digest_steps.py"
INTERVAL_S = 0.5  # the digest's: a heartbeat every 2.5 s, stale after 7.5 s
RANKS = 4


def wait_for(predicate: Callable[[], bool], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


def digest(run: Path) -> dict[str, Any]:
    """The node's digest as written (none yet: {})."""
    try:
        return json.loads(RunDir(run).node_digest(os.uname().nodename).read_text())
    except (OSError, ValueError):
        return {}


def stepped(run: Path, past: int) -> bool:
    ranks = digest(run).get("ranks", {})
    return len(ranks) == RANKS and all(
        r.get("step", {}).get("step", -1) > past and "telemetry" in r for r in ranks.values()
    )


@contextlib.contextmanager
def launched(
    tmp_path: Path, hold: bool = False, ends: bool = False
) -> Iterator[tuple[Path, Path, dict[str, str]]]:
    """The job started; with ``hold``, its ranks report nothing (no telemetry, no recorder, no
    step) until the test removes ``MARKS/hold``: no node digest is written before then. With
    ``ends`` the test ends the run itself (``MARKS/stop``), and it must have succeeded."""
    outputs, marks = tmp_path / "outputs", tmp_path / "marks"
    marks.mkdir()
    env = base_env(outputs)
    env["EZPZ_NODE_DIGEST_S"] = str(INTERVAL_S)
    env["EZPZ_TELEMETRY_S"] = str(INTERVAL_S)
    if hold:
        (marks / "hold").touch()
        env.update(EZPZ_TELEMETRY_S="0", EZPZ_FLIGHT_RECORDER="0")
    argv = [PY, "-m", "ezpz_tui", "launch", "--ppn", str(RANKS), "--quiet", "--"]
    launch = subprocess.Popen(
        [*argv, PY, str(SCRIPT), str(marks)],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(run_dirs(outputs)) == 1)
        yield run_dirs(outputs)[0], marks, env
        if ends:
            assert launch.wait(60) == 0
        else:
            assert launch.poll() is None, "the run ended before the test was done with it"
    finally:
        (marks / "stop").touch()
        with contextlib.suppress(subprocess.TimeoutExpired):
            launch.wait(60)
        kill_leftovers(outputs)
        if launch.poll() is None:
            launch.kill()
            launch.wait()


def top(run: Path, env: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """``top RUN --json``'s answer, and the files of the run it opened (traced with strace)."""
    trace = run.parent.parent / f"trace-{time.monotonic_ns()}.txt"
    argv = [strace(), "-f", "-qq", "-e", "trace=openat", "-o", str(trace)]
    proc = subprocess.run(
        [*argv, PY, "-m", "ezpz_tui", "top", run.name, "--json"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    opened = re.findall(rf'openat\(\w+, "{re.escape(str(run))}/([^"]+)"', trace.read_text())
    return json.loads(proc.stdout), opened


def per_rank(opened: list[str], folder: str) -> set[str]:
    """The rank files of ``folder`` opened, named without their block (``b0000/``)."""
    named = (re.sub(r"/b\d{4}/", "/", path) for path in opened)
    return {path for path in named if path.startswith(f"{folder}/rank-")}


@pytest.mark.mpi
def test_live_top_reads_the_node_digest_and_falls_back_when_its_writer_stops(
    tmp_path: Path, mpiexec: str
) -> None:
    with launched(tmp_path) as (run, _marks, env):
        wait_for(lambda: stepped(run, 10))
        written = digest(run)
        pids = {s.pid for s in read_statuses(run)}
        assert written["writer"]["pid"] in pids  # a rank's own process, not a wrapper
        assert written["writer"]["rank"] in range(RANKS)
        assert list(run.glob("nodes/*/node-*.json")) == [
            RunDir(run).node_digest(os.uname().nodename)
        ]
        for entry in written["ranks"].values():
            assert entry["state"]["state"] == "running"
            assert entry["step"]["dt"] > 0.04 and "loss" in entry["step"]["metrics"]
            assert entry["telemetry"]["rss_bytes"] > 0

        seen, opened = top(run, env)
        # One digest for the node's rows: no rank's telemetry or status, only rank 0's
        # first record (the run's FLOPs per token).
        assert any(path.startswith("nodes/") for path in opened)
        assert per_rank(opened, "telemetry") == set() and per_rank(opened, "status") == set()
        assert per_rank(opened, "metrics") <= {"metrics/rank-00000.jsonl"}
        assert seen["node_digests"] == {
            "nodes": 1,
            "ranks": "0-3",
            "stale_hosts": [],
            "stale_ranks": "",
        }
        rows = seen["ranks"]
        assert [row["rank"] for row in rows] == list(range(RANKS))
        assert all(row["state"] == "running" and row["step_time_s"] > 0.04 for row in rows)
        assert all(row["rss_bytes"] > 0 for row in rows)
        assert not any("node digest" in note for note in seen["notes"])

        writer = written["writer"]["pid"]
        os.kill(writer, signal.SIGSTOP)  # the writer stops: the digest is no longer rewritten
        try:
            stopped_at = digest(run)["written"]
            wait_for(lambda: time.time() - stopped_at > 3 * 5 * INTERVAL_S + 1, 30)
            seen, opened = top(run, env)
        finally:
            os.kill(writer, signal.SIGCONT)
        host = os.uname().nodename
        assert seen["node_digests"]["stale_hosts"] == [host]
        assert seen["node_digests"]["stale_ranks"] == "0-3"
        said = [note for note in seen["notes"] if "node digest" in note]
        assert len(said) == 1 and f"({host})" in said[0]
        assert "writer is gone, so ranks 0-3 read from their own files" in said[0]
        rows = seen["ranks"]  # from the ranks' own files
        assert per_rank(opened, "telemetry") == {f"telemetry/rank-{r:05d}.jsonl" for r in range(4)}
        assert [row["rank"] for row in rows] == list(range(RANKS))
        assert all(row["state"] == "running" and row["rss_bytes"] > 0 for row in rows)
        assert all(row["step_time_s"] > 0.04 for row in rows)


@pytest.mark.mpi
def test_a_dead_writer_is_replaced_by_the_next_rank_to_report(tmp_path: Path, mpiexec: str) -> None:
    with launched(tmp_path) as (run, marks, env):
        wait_for(lambda: stepped(run, 10))
        before = digest(run)["writer"]
        (marks / "abandon").write_text(str(before["rank"]))
        wait_for(lambda: (marks / f"abandoned-{before['rank']}").exists(), 60)
        gone_at = time.time()
        wait_for(lambda: digest(run)["writer"]["rank"] != before["rank"], 30)
        after = digest(run)
        assert after["writer"]["pid"] in {s.pid for s in read_statuses(run)} - {before["pid"]}
        # The new writer began from its predecessor's digest: every rank is still there.
        assert sorted(after["ranks"]) == [str(r) for r in range(RANKS)]
        wait_for(lambda: digest(run)["written"] > gone_at + 5 * INTERVAL_S, 30)
        seen, _ = top(run, env)
        assert seen["node_digests"]["stale_hosts"] == []
        assert seen["node_digests"]["ranks"] == "0-3"
        assert [row["rank"] for row in seen["ranks"]] == list(range(RANKS))
