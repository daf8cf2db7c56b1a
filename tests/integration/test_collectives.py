"""The collectives' verdicts on real jobs: plain gloo scripts under ``ezpz-tui launch`` (the real
mpiexec and capture wrapper, torch's real Flight Recorder, the ranks' real node digest), read by
``why``, ``top`` and ``stacks``.

Each script's ranks write a marker when they have got where the test needs them; the test waits
for it and for the ranks' progress in the node digest to hold what it needs, then asks once.
Every test ends its run (SIGTERM to the CLI, then SIGKILL to anything of the run still there).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from runtime.rundir import RunDir
from tests.fixtures.cli import REPO, base_env, cli, kill_leftovers, run_dirs

PY = sys.executable
INTERVAL_S = 0.5  # the ranks' Flight Recorder interval: a verdict after twice this of waiting

RANKS = REPO / "tests" / "ranks"
# Rank 3 of 4 never enters the 6th all_reduce; ranks 0-2 wait in it.
SKIPS = RANKS / "skips_a_collective.py"
# Rank 2 of 4 sleeps 40 ms before each all_reduce; nobody writes metrics.
LATE = RANKS / "late_at_collectives.py"
# At the 3rd collective rank 1 expects 8 floats from a broadcast whose root sends 4: gloo lets
# it pass with the wrong data (a size mismatch in an all_reduce it aborts on, at once).
MISMATCH = textwrap.dedent(
    """
    import os, sys, time
    import torch, torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    dist.all_reduce(torch.ones(4))
    dist.all_reduce(torch.ones(4))
    dist.broadcast(torch.ones(8 if rank == 1 else 4), 0)
    open(os.path.join(sys.argv[1], f"mismatch-{rank}"), "w").close()
    while True:
        time.sleep(0.5)
    """
)


def wait_for(predicate: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.1)


def progress(run: Path) -> tuple[float, dict[int, dict]]:
    """When the run's one node digest was written, and each rank's default-group progress it
    holds (none yet: 0, {})."""
    try:
        [path] = RunDir(run).node_digests()
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return 0.0, {}
    found = {}
    for rank, entry in data["ranks"].items():
        groups = (entry.get("flight") or {}).get("groups") or {}
        found.update({int(rank): g for g in groups.values() if g["desc"] == "default_pg"})
    return data["written"], found


def arrived(group: dict, seq: int) -> float | None:
    """When a rank's progress says it entered collective ``seq``."""
    offsets = [0, *group["dt_us"]]
    index = seq - group["seq"]
    return (group["t_ns"] / 1e9 + offsets[index] / 1e6) if 0 <= index < len(offsets) else None


def full_dumps(run: Path) -> list[Path]:
    return [path for path, _ in RunDir(run).flights()]


@contextlib.contextmanager
def launched(tmp_path: Path, script: str | Path, ranks: int) -> Iterator[tuple[Path, Path, dict]]:
    """``ezpz-tui launch --ppn RANKS -- python script MARKS`` (``script``: its text, or one
    under tests/ranks/): (run dir, marks, env) while it runs; stopped and cleaned up after."""
    outputs, marks = tmp_path / "outputs", tmp_path / "marks"
    marks.mkdir()
    path = script if isinstance(script, Path) else tmp_path / "job.py"
    if isinstance(script, str):
        path.write_text(script)
    env = base_env(outputs)
    env["EZPZ_FLIGHT_INTERVAL_S"] = str(INTERVAL_S)
    argv = [PY, "-m", "ezpz_tui", "launch", "--ppn", str(ranks), "--quiet", "--"]
    launch = subprocess.Popen(
        [*argv, PY, str(path), str(marks)],
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: len(run_dirs(outputs)) == 1)
        yield run_dirs(outputs)[0], marks, env
        assert launch.poll() is None, "the run ended before the test was done with it"
    finally:
        launch.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            launch.wait(60)
        kill_leftovers(outputs)
        if launch.poll() is None:
            launch.kill()
            launch.wait()


@pytest.mark.mpi
def test_rank_skipping_the_sixth_all_reduce_is_named_missing(tmp_path: Path, mpiexec: str) -> None:
    """Judged from the ranks' progress in their node's digest, with no Flight Recorder file
    written before the verdict; ``stacks`` then asks every rank for its entries."""
    with launched(tmp_path, SKIPS, 4) as (run, marks, env):
        wait_for(lambda: (marks / "skipping").exists())

        def judgeable() -> bool:  # the others have waited in #6 twice the interval, digested
            written, ranks = progress(run)
            if len(ranks) < 4 or ranks[3]["entered"] != 5:
                return False
            if any(ranks[r]["entered"] != 6 or arrived(ranks[r], 6) is None for r in range(3)):
                return False
            since = min(arrived(ranks[r], 6) for r in range(3))  # type: ignore[type-var]
            return written - INTERVAL_S >= since and time.time() > since + 3 * INTERVAL_S

        wait_for(judgeable)
        proc = cli(["why", run.name, "--json"], env)
        assert proc.returncode == 0, proc.stderr
        assert full_dumps(run) == []  # nobody asked: no rank wrote its entries
        data = json.loads(proc.stdout)
        assert data["failed"] is False and data["collective_notes"] == []
        found = data["collectives"]
        assert found["kind"] == "missing"
        assert (found["collective"], found["seq"], found["group_desc"]) == (
            "all_reduce",
            6,
            "default_pg",
        )
        assert (found["waiting"], found["missing"]) == ([0, 1, 2], [3])
        assert found["last_collective"] == {"3": {"collective": "all_reduce", "seq": 5}}
        assert found["sizes"] == [[4]] and found["dtypes"] == ["Float"]
        text = cli(["why", run.name], env).stdout
        assert "all_reduce #6 (default group, 4 floats): ranks 0-2 waiting for" in text
        assert "rank 3 never entered it" in text and "last collective all_reduce #5" in text
        stacks = cli(["stacks", run.name], env)
        assert stacks.returncode == 0, stacks.stderr
        script = SKIPS.read_text().splitlines()
        line = next(i for i, s in enumerate(script, 1) if "time.sleep(0.5)" in s)
        said = stacks.stdout.splitlines()
        assert f"  rank 3's stack: <module> at skips_a_collective.py:{line}" in said
        assert "  all_reduce #6 (default group, 4 floats): ranks 0-2 waiting for" in stacks.stdout
        wait_for(lambda: len(full_dumps(run)) == 4, 30)  # asked through each rank's FIFO
        for rank in range(4):
            dumped = json.loads(RunDir(run).flight(rank).read_text())
            assert dumped["written"] == "asked" and dumped["rank"] == rank
            seqs = [e["collective_seq_id"] for e in dumped["entries"]]
            assert seqs == list(range(1, 6 if rank == 3 else 7)), seqs


@pytest.mark.mpi
def test_size_mismatch_at_one_sequence_number_is_named(tmp_path: Path, mpiexec: str) -> None:
    with launched(tmp_path, MISMATCH, 2) as (run, marks, env):
        wait_for(lambda: (marks / "mismatch-0").exists() and (marks / "mismatch-1").exists())
        wait_for(lambda: [g["entered"] for g in progress(run)[1].values()] == [3, 3])
        proc = cli(["why", run.name, "--json"], env)
        assert proc.returncode == 0, proc.stderr
        assert full_dumps(run) == []  # from the progress alone
        found = json.loads(proc.stdout)["collectives"]
        assert (found["kind"], found["seq"], found["group_desc"]) == ("mismatch", 3, "default_pg")
        sizes = {tuple(c["ranks"]): c["sizes"] for c in found["calls"]}
        assert sizes == {(0,): [[4]], (1,): [[8]]}
        assert {c["collective"] for c in found["calls"]} == {"broadcast"}
        assert "mismatch at collective #3 (default group)" in found["headline"]


@pytest.mark.mpi
def test_rank_arriving_late_is_slow_by_arrival_lag(tmp_path: Path, mpiexec: str) -> None:
    with launched(tmp_path, LATE, 4) as (run, marks, env):
        wait_for(lambda: all((marks / f"steady-{r}").exists() for r in range(4)))

        def windows_full() -> bool:  # every rank's progress holds its newest 32 arrivals
            ranks = progress(run)[1]
            return len(ranks) == 4 and all(len(g["dt_us"]) == 31 for g in ranks.values())

        wait_for(windows_full)
        proc = cli(["top", run.name, "--json"], env)
        assert proc.returncode == 0, proc.stderr
        assert full_dumps(run) == []  # from the progress alone
        data = json.loads(proc.stdout)
        assert data["slow"] == [2]
        rows = {row["rank"]: row for row in data["ranks"]}
        assert [rows[r]["state"] for r in range(4)] == ["running"] * 4
        assert rows[2]["arrival_lag_s"] > 0.02  # it sleeps 40 ms before each
        assert all(abs(rows[r]["arrival_lag_s"]) < 0.02 for r in (0, 1, 3))
        assert "arrives" in rows[2]["slow_why"] and "all_reduce" in rows[2]["slow_why"]
        assert all(rows[r]["step_time_s"] is None for r in range(4))  # no metrics of their own
        text = cli(["top", run.name], env).stdout.splitlines()
        assert text[0].split()[-2:] == ["LAG", "AGE"]
        assert "slow at the collectives: rank 2 arrives " in text[5]
        assert "ms after the median at all_reduce" in text[5]
        plain = cli(["profile", run.name, "--steps", "2", "--timeout", "3"], env)
        assert plain.returncode == 2 and plain.stdout.startswith("ranks 0-3: no profile")
        said = plain.stderr
        assert said.startswith(f"ezpz-tui: no profile from {run.name}: rank 0: it calls no step")
        assert "adds `runtime.profiling.step()` at the end of each step" in said
        wait_for(lambda: len(full_dumps(run)) == 4, 30)  # profile's request asks for them too
        assert all(json.loads(p.read_text())["written"] == "asked" for p in full_dumps(run))


# Rank 2 arrives ~40 ms late at each of 60 all_reduces, and every rank then ends: by destroying
# its group itself (torch then has no entries left to write at the end), or by runtime.cleanup()
# (which has them written first).
LATE_THEN_ENDS = textwrap.dedent(
    """
    import sys, time
    import torch, torch.distributed as dist
    import runtime

    dist.init_process_group("gloo")
    rank, t = dist.get_rank(), torch.ones(4)
    for i in range(60):
        if rank == 2:
            time.sleep(0.04)
        dist.all_reduce(t)
    runtime.cleanup() if sys.argv[1] == "cleanup" else dist.destroy_process_group()
    """
)


@pytest.mark.mpi
@pytest.mark.parametrize("end", ["destroy", "cleanup"])
def test_an_ended_run_keeps_its_straggler(tmp_path: Path, mpiexec: str, end: str) -> None:
    """Once the run has ended its straggler is still named: by ``top`` and ``why`` from what
    the finalizer recorded in ``summary.json``, and by ``top`` without a summary (an older
    run, or a finalizer that has not run) from the ranks' last progress in their node's
    digest, or their files written at the end; ``why`` from those files alone (an older run's
    shape: no digest)."""
    outputs = tmp_path / "outputs"
    script = tmp_path / "job.py"
    script.write_text(LATE_THEN_ENDS)
    env = {**base_env(outputs), "EZPZ_FLIGHT_INTERVAL_S": str(INTERVAL_S)}
    try:
        argv = ["launch", "--quiet", "--ppn", "4", "--", PY, str(script), end]
        done = cli(argv, env, timeout=240)
    finally:
        kill_leftovers(outputs)
    assert done.returncode == 0, done.stderr
    [run] = run_dirs(outputs)
    summary = RunDir(run).summary_json
    wait_for(summary.is_file, 120)
    [straggler] = json.loads(summary.read_text())["verdicts"]["stragglers"]
    assert (straggler["rank"], straggler["by"]) == (2, "arrival")
    assert straggler["arrival_lag_s"] > 0.02, straggler

    def slow_rows() -> tuple[list[int], dict[int, dict]]:
        proc = cli(["top", run.name, "--json"], env)
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        return data["slow"], {row["rank"]: row for row in data["ranks"]}

    slow, rows = slow_rows()
    assert slow == [2]
    assert [rows[r]["state"] for r in range(4)] == ["succeeded"] * 4
    assert rows[2]["slow_why"].endswith("ms after the median at all_reduce")
    why = cli(["why", run.name], env).stdout.splitlines()
    assert any(line.startswith("  rank 2 arrives ") for line in why), why
    summary.unlink()
    slow, rows = slow_rows()
    assert slow == [2] and rows[2]["arrival_lag_s"] > 0.02
    assert all(abs(rows[r]["arrival_lag_s"]) < 0.02 for r in (0, 1, 3))
    if end == "destroy":
        assert full_dumps(run) == []  # from the digest's progress
        return
    assert [json.loads(p.read_text())["written"] for p in full_dumps(run)] == ["end"] * 4
    shutil.rmtree(RunDir(run).nodes_dir)
    said = cli(["why", run.name, "--json"], env)
    assert said.returncode == 0, said.stderr
    late = json.loads(said.stdout)["collectives"]
    assert (late["kind"], late["ranks"], late["collective"]) == ("late", [2], "all_reduce")


REPORTS = textwrap.dedent(
    """
    import os, threading
    import torch, torch.distributed as dist

    dist.init_process_group("gloo")
    dist.all_reduce(torch.ones(4))
    thread = "ezpz-flight-recorder" in [t.name for t in threading.enumerate()]
    print("buffer", os.environ.get("TORCH_FR_BUFFER_SIZE"), "thread", thread)
    """
)


@pytest.mark.mpi
@pytest.mark.parametrize("on", [True, False])
def test_config_turns_the_flight_recorder_off(tmp_path: Path, mpiexec: str, on: bool) -> None:
    outputs, config = tmp_path / "outputs", tmp_path / "config"
    config.mkdir()
    (config / "config.toml").write_text(f"[collectives]\nflight_recorder = {str(on).lower()}\n")
    script = tmp_path / "job.py"
    script.write_text(REPORTS)
    env = {**base_env(outputs), "EZPZ_TUI_CONFIG_DIR": str(config)}
    proc = cli(["launch", "--ppn", "2", "--quiet", "--", PY, str(script)], env)
    assert proc.returncode == 0, proc.stderr
    (run,) = run_dirs(outputs)
    said = RunDir(run).log(1).read_text()
    assert ("buffer 512 thread True" if on else "buffer 0 thread False") in said
    assert not RunDir(run).flight_request(1).exists()  # removed at the rank's end, if made
    if on:  # shorter than an interval: written at the exit, before the group was destroyed
        data = json.loads(RunDir(run).flight(1).read_text())
        assert [e["collective_seq_id"] for e in data["entries"]] == [1]
        assert (data["rank"], data["interval_s"]) == (1, 5.0)
    else:
        assert not RunDir(run).flight(1).exists()


# A job that ends cleanly: runtime.cleanup() destroys the group before the interpreter exits.
CLEAN_END = textwrap.dedent(
    """
    import torch, torch.distributed as dist
    import runtime

    dist.init_process_group("gloo")
    t = torch.ones(4)
    for _ in range(5):
        dist.all_reduce(t)
    runtime.cleanup()
    """
)


@pytest.mark.mpi
def test_a_clean_end_leaves_the_last_collectives(tmp_path: Path, mpiexec: str) -> None:
    outputs = tmp_path / "outputs"
    script = tmp_path / "job.py"
    script.write_text(CLEAN_END)
    env = {**base_env(outputs), "EZPZ_FLIGHT_INTERVAL_S": "600"}  # no write by the interval
    proc = cli(["launch", "--ppn", "2", "--quiet", "--", PY, str(script)], env)
    assert proc.returncode == 0, proc.stderr
    (run,) = run_dirs(outputs)
    for rank in (0, 1):
        entries = json.loads(RunDir(run).flight(rank).read_text())["entries"]
        names = [e["profiling_name"] for e in entries]
        assert names == ["gloo:all_reduce"] * 5 + ["gloo:barrier"], names


# Every rank records each step with History (the step hook); rank 1 does twice the matmuls.
STEPS = textwrap.dedent(
    """
    import os, sys, time
    import torch, torch.distributed as dist
    from runtime import History

    dist.init_process_group("gloo")
    rank, history = dist.get_rank(), History()
    w = torch.randn(192, 192)
    for step in range(100000):
        for _ in range(2 if rank == 1 else 1):
            x = w @ w
        dist.all_reduce(x)
        history.record(step, {"loss": float(x[0, 0])})
        if step == 3:
            open(os.path.join(sys.argv[1], f"stepping-{rank}"), "w").close()
    """
)


@pytest.mark.mpi
def test_profile_splits_each_ranks_steps(tmp_path: Path, mpiexec: str) -> None:
    with launched(tmp_path, STEPS, 2) as (run, marks, env):
        wait_for(lambda: all((marks / f"stepping-{r}").exists() for r in range(2)))
        proc = cli(["profile", run.name, "--steps", "3", "--json"], env)
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["skipped"] == [] and sorted(data["ranks"]) == ["0", "1"]
        for rank in (0, 1):
            summary = data["ranks"][str(rank)]
            assert summary["steps"] == 3 and summary["wall_s"] > 0
            assert summary["compute_s"] > 0 and summary["communication_s"] > 0
            assert summary["split"] == "cpu"  # no device kernels: the operators' CPU time
            names = [t["name"] for t in summary["top"]]
            assert "aten::mm" in names, names
            trace = json.loads(RunDir(run).profile_trace(rank).read_text())
            assert trace["traceEvents"], "an empty trace"
        text = cli(["profile", run.name, "--steps", "2"], env).stdout
        assert text.startswith("rank 0: 2 steps in ")
        assert "traces: " in text and "Perfetto" in text
