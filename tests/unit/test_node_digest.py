"""Node digests: the runtime's side (its election, rate limit and shards, each in a process of
its own so no test inherits another's writer) and the reader's (fresh, stale, torn digests).

The reader's digests of other hosts are written here as files: one machine cannot be two nodes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

from ezpz_tui.core.watching.node_digests import read_node_digest, read_node_digests
from runtime.node_digest import address
from runtime.rundir import NODE_SHARDS, RunDir

PY = sys.executable


def run_python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_aurora_s_nodes_fill_no_shard_past_a_few_hundred(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    hosts = [f"x{4000 + r}c{c}s{s}b0n0" for r in range(166) for c in range(8) for s in range(8)]
    assert len(hosts) == 10_624
    paths = [run.node_digest(host) for host in hosts]
    assert len(set(paths)) == len(hosts)
    per_shard = Counter(path.parent for path in paths)
    assert len(per_shard) == NODE_SHARDS
    assert max(per_shard.values()) < 300
    assert all(path.parent.parent == tmp_path / "nodes" for path in paths)
    assert run.node_digest("x4000c0s0b0n0") == paths[0]  # the same from any rank


def test_the_socket_name_is_the_run_and_the_host(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").symlink_to(tmp_path / "a")
    named = address(tmp_path / "a", "x1")
    assert named.startswith(b"\0ezpz-") and named.endswith(b"-x1")
    assert address(tmp_path / "b", "x1") == named  # the run, however its path is spelled
    assert address(tmp_path / "a", "x2") != named


def test_the_first_reporter_writes_and_the_next_sends_to_it(tmp_path: Path) -> None:
    code = """
        import os, sys, time
        from runtime import node_digest
        node_digest.report("step", {"step": 1, "loss": float("nan")})
        node_digest.report("step", {"step": 2})  # within REPORT_EVERY_S: dropped
        node_digest.report("odd", {"x": object()})  # not JSON: dropped, nothing raised
        if sys.argv[-1] == "first":
            print(node_digest._clients[0].writer is not None, flush=True)
            time.sleep(3)
            node_digest.flush()
        else:
            print(node_digest._clients[0].writer is not None, flush=True)
        """
    env = {"EZPZ_RUN_DIR": str(tmp_path), "EZPZ_NODE_DIGEST_S": "0.2"}
    first = subprocess.Popen(
        [PY, "-c", textwrap.dedent(code), "first"],
        env={**os.environ, **env, "RANK": "0", "WORLD_SIZE": "8", "LOCAL_RANK": "0"},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert first.stdout is not None and first.stdout.readline().strip() == "True"
    second = run_python(
        code.replace('sys.argv[-1] == "first"', "False"),
        {**env, "RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "5"},
    )
    assert second.returncode == 0 and second.stdout.strip() == "False", second.stderr
    assert first.wait(60) == 0
    written = json.loads(RunDir(tmp_path).node_digest(os.uname().nodename).read_text())
    assert written["writer"] == {"rank": 0, "pid": first.pid}
    assert set(written["ranks"]) == {"0", "5"}
    assert written["ranks"]["0"]["step"] == {"step": 1, "loss": "NaN"}
    assert written["ranks"]["5"]["step"] == {"step": 1, "loss": "NaN"}
    assert "odd" not in written["ranks"]["5"]
    # the second rank's process has gone: its writer says so without any word from it
    pid = written["ranks"]["5"]["pid"]
    assert pid != first.pid and written["ranks"]["5"]["state"] == {"state": "gone", "pid": pid}


def test_a_report_that_may_not_write_is_dropped_while_the_node_has_no_writer(
    tmp_path: Path,
) -> None:
    code = """
        from runtime import node_digest
        node_digest.report("telemetry", {"cpu_pct": 1.0}, rank=3, may_write=False, run_dir=RUN)
        print(node_digest._clients[0].writer)
        """.replace("RUN", repr(str(tmp_path)))
    done = run_python(code, {"EZPZ_RUN_DIR": ""})
    assert done.returncode == 0 and done.stdout.strip() == "None", done.stderr
    assert not (tmp_path / "nodes").exists()


def test_without_a_run_directory_or_with_digests_off_nothing_starts(tmp_path: Path) -> None:
    code = """
        from runtime import node_digest
        node_digest.report("step", {"step": 1})
        print(node_digest._clients)
        """
    for env in ({"EZPZ_RUN_DIR": ""}, {"EZPZ_RUN_DIR": str(tmp_path), "EZPZ_NODE_DIGEST_S": "0"}):
        done = run_python(code, env)
        assert done.stdout.strip() == "[None]", done.stderr
    assert not (tmp_path / "nodes").exists()


def write_digest(run: Path, host: str, written: float, ranks: dict[int, dict]) -> Path:
    path = RunDir(run).node_digest(host)
    path.parent.mkdir(parents=True, exist_ok=True)
    entries = {str(rank): {"t": written, "pid": 100 + rank, **e} for rank, e in ranks.items()}
    body = {"format": 1, "host": host, "written": written, "writer": {"rank": min(ranks)}}
    body |= {"interval_s": 2.0, "heartbeat_s": 10.0, "ranks": entries}
    path.write_text(json.dumps(body))
    return path


def running(step: int) -> dict:
    return {
        "state": {"state": "running"},
        "step": {"step": step, "time": 1.0, "dt": 0.2, "dt_median": 0.25, "metrics": {"loss": 2}},
        "telemetry": {"time": 1.0, "cpu_pct": 99.0, "rss_bytes": 1 << 30},
    }


def test_a_stale_digest_of_a_live_run_leaves_its_ranks_to_their_own_files(
    tmp_path: Path,
) -> None:
    now = time.time()
    write_digest(tmp_path, "x1", now - 1, {0: running(7), 1: running(7)})
    write_digest(tmp_path, "x2", now - 31, {2: running(5), 3: {"state": {"state": "closed"}}})
    torn = RunDir(tmp_path).node_digest("x3")
    torn.parent.mkdir(parents=True, exist_ok=True)
    torn.write_text('{"written": 1, "ranks": {"4"')
    found = read_node_digests(tmp_path, live=True, now=now)
    assert sorted(found.covered) == [0, 1]
    assert found.stale_ranks == [2, 3]
    rank = found.covered[1]
    assert (rank.host, rank.step, rank.dt, rank.state, rank.pid) == ("x1", 7, 0.25, "running", 101)
    assert rank.sample is not None and rank.sample.rss_bytes == 1 << 30
    columns = rank.columns()
    assert columns is not None and columns.metrics == {"loss": [2.0], "dt": [0.25]}
    note = found.note()
    assert note is not None and note.startswith("node digest of 1 node (x2) not rewritten for 3")
    assert note.endswith("its writer is gone, so ranks 2-3 read from their own files")
    assert found.notes == (
        f"nodes/{torn.parent.name}/node-x3.json is not a node digest (torn or foreign)",
    )
    ended = read_node_digests(tmp_path, live=False, now=now)  # an ended run: nothing is stale
    assert sorted(ended.covered) == [0, 1, 2, 3] and ended.note() is None
    assert not ended.covered[3].running


def test_a_digest_from_another_version_reads_what_it_can(tmp_path: Path) -> None:
    path = write_digest(tmp_path, "x1", 5.0, {0: {"step": {"step": "seven"}, "telemetry": 3}})
    digest = read_node_digest(path)
    assert digest is not None and digest.ranks[0].step is None and digest.ranks[0].sample is None
    path.write_text("[1, 2]")
    assert read_node_digest(path) is None
