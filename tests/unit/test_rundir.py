"""The run-directory contract: names, the JSON of both records, atomic rewrites, tolerant reads."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from runtime import rundir
from runtime.metric_files import first_metric_file, metric_files
from runtime.rundir import (
    NODE_SHARDS,
    RankState,
    RankStatus,
    RunDir,
    RunState,
    State,
    read_state,
    read_status,
    read_statuses,
    write_state,
    write_status,
)


def test_every_path_of_a_run_directory(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "r")
    r = tmp_path / "r"
    assert (run.run_toml, run.state_json, run.launcher_log) == (
        r / "run.toml",
        r / "state.json",
        r / "launcher.log",
    )
    assert (run.summary_json, run.metrics_nc, run.hostfile, run.stage_json) == (
        r / "summary.json",
        r / "metrics.nc",
        r / "hostfile",
        r / "stage.json",
    )
    assert run.log(3) == r / "logs" / "b0000" / "rank-00003.log"
    assert run.status(12) == r / "status" / "b0000" / "rank-00012.json"
    assert run.metrics(1024) == r / "metrics" / "b0001" / "rank-01024.jsonl"
    assert run.telemetry(127487) == r / "telemetry" / "b0124" / "rank-127487.jsonl"
    assert run.flight_request(1023) == r / "flight" / "b0000" / "rank-01023.fifo"
    assert run.nccl_dump_prefix(2048) == str(r / "flight" / "b0002" / "nccl-rank-")
    assert rundir.BAD_HOSTS == "bad_hosts.txt"
    assert RunDir(str(r)).path == r  # a string is taken as a path


def test_folders_and_listings_by_rank(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    assert not run.looks_like_run()
    assert run.logs() == [] and run.statuses() == []  # no folders yet: empty, no error
    run.make_folders()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "flight",
        "logs",
        "metrics",
        "nodes",
        "status",
        "telemetry",
    ]
    assert len(list(run.nodes_dir.iterdir())) == NODE_SHARDS  # the node digests' shards
    assert [p.name for p in run.logs_dir.iterdir()] == ["b0000"]  # the first block of ranks
    assert run.looks_like_run()
    for rank in (10, 2, 0):
        run.log(rank).write_text("")
        run.status(rank).write_text("{}")
    (run.logs_dir / "b0000" / "rank-7.log.tmp").write_text("")  # not a log
    (run.status_dir / "b0000" / ".rank-00001.json.abc.tmp").write_text("")  # a write in flight
    (run.logs_dir / "b12").mkdir()  # not a block: 4 digits at least
    (run.logs_dir / "b12" / "rank-00005.log").write_text("")
    assert [rank for _, rank in run.logs()] == [0, 2, 10]
    assert [rank for _, rank in run.statuses()] == [0, 2, 10]
    assert run.logs()[1][0] == run.log(2)


def test_metric_files_ours_and_ezpz(tmp_path: Path) -> None:
    run = RunDir(tmp_path)
    run.make_folders()
    run.metrics(1).write_text("")
    run.metrics(0).write_text("")
    (tmp_path / "metrics-3.jsonl").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "metrics.jsonl").write_text("")
    (tmp_path / "history" / "20261122-101010").mkdir(parents=True)  # ezpz History()'s default
    (tmp_path / "history" / "20261122-101010" / "20261122-101010.jsonl").write_text("")
    run.telemetry(0).write_text("")  # samples, not metrics
    (tmp_path / "notes.jsonl").write_text("")
    (run.logs_dir / "metrics.jsonl").write_text("")  # the rank folders hold ours alone
    (run.telemetry_dir / "metrics-5.jsonl").write_text("")
    assert [(p.relative_to(tmp_path).as_posix(), r) for p, r in metric_files(tmp_path)] == [
        ("history/20261122-101010/20261122-101010.jsonl", 0),
        ("metrics/b0000/rank-00000.jsonl", 0),
        ("sub/metrics.jsonl", 0),
        ("metrics/b0000/rank-00001.jsonl", 1),
        ("metrics-3.jsonl", 3),
    ]
    # The first of them alone (a reader of rank 0's records), the others never made Paths of.
    assert first_metric_file(tmp_path) == metric_files(tmp_path)[0]
    (tmp_path / "history").rename(tmp_path / "old")  # not a name of ezpz's files: now ours first
    assert first_metric_file(tmp_path) == (run.metrics(0), 0)
    (run.metrics_dir / ".rank-00000.jsonl").write_text("")  # hidden: as glob("*.jsonl") skips it
    assert [p for p, _ in metric_files(tmp_path)].count(run.metrics(0)) == 1
    assert first_metric_file(tmp_path / "missing") is None and metric_files(tmp_path / "x") == []


def test_the_state_vocabulary() -> None:
    assert [s.value for s in rundir.WRITTEN] == [
        "pending",
        "running",
        "succeeded",
        "failed",
        "stopped",
    ]
    assert {State.LOST, State.UNKNOWN}.isdisjoint(rundir.WRITTEN)
    assert {State.SUCCEEDED, State.FAILED, State.STOPPED} == rundir.FINAL
    # A state word is its string everywhere a string is expected.
    assert State.RUNNING == "running" and f"{State.LOST:<6}|" == "lost  |"
    assert str(RankState.STALLED) == "stalled" and {"failed": 1}[RankState.FAILED] == 1
    assert json.dumps([State.STOPPED, RankState.WAITING]) == '["stopped", "waiting"]'


def _sample_state() -> RunState:
    return RunState(
        State.STOPPED,
        run_id="20261122-103105-000-tp1pp1cp1",
        created=1.5,
        host="x1",
        boot_id=None,
        pid_ns=None,
        supervisor_pid=41000,
        supervisor_start_ticks=None,
        launcher_pid=41010,
        launcher_start_ticks=5,
        start=2.0,
        stop_requested=2.5,
        end=3.0,
        exit_code=130,
        signal=None,
        stopped_by_user=True,
        stop_signals=("SIGINT",),
        stop_remaining=(),
        stop_elapsed_s=0.4,
        extra={"future": {"x": 1}},
    )


def test_state_round_trips_in_the_shape_earlier_versions_wrote(tmp_path: Path) -> None:
    written = write_state(tmp_path, _sample_state())
    data = json.loads((tmp_path / "state.json").read_text())
    assert data == {
        "state": "stopped",
        "run_id": "20261122-103105-000-tp1pp1cp1",
        "created": 1.5,
        # the supervisor's identity and the launcher's outcome are written whole, null included
        "host": "x1",
        "boot_id": None,
        "pid_ns": None,
        "supervisor_pid": 41000,
        "supervisor_start_ticks": None,
        "updated": written.updated,
        "launcher_pid": 41010,
        "launcher_start_ticks": 5,
        "start": 2.0,
        "stop_requested": 2.5,
        "end": 3.0,
        "exit_code": 130,
        "signal": None,
        "stopped_by_user": True,
        "stop_signals": ["SIGINT"],
        "stop_remaining": [],
        "stop_elapsed_s": 0.4,
        "future": {"x": 1},  # a key this version does not know is kept
    }
    assert abs((written.updated or 0) - time.time()) < 60
    assert read_state(tmp_path) == written


def test_state_leaves_out_what_is_not_known(tmp_path: Path) -> None:
    # A launcher that never started: an exit code, but no signal key (as before).
    failed = RunState(State.FAILED, start=1.0, end=1.0, exit_code=127, reason="no such program")
    write_state(tmp_path, failed)
    data = json.loads((tmp_path / "state.json").read_text())
    assert set(data) == {"state", "updated", "start", "end", "exit_code", "reason"}
    assert "stopped_by_user" not in data


def test_only_the_five_states_are_written(tmp_path: Path) -> None:
    for state in (State.LOST, State.UNKNOWN):
        with pytest.raises(ValueError, match="state must be one of"):
            write_state(tmp_path, RunState(state))
    assert not (tmp_path / "state.json").exists()
    lost = RunState(State.RUNNING, recorded_state=State.PENDING)
    write_state(tmp_path, lost)
    assert "recorded_state" not in json.loads((tmp_path / "state.json").read_text())


def test_state_rewrite_is_atomic_for_a_reader(tmp_path: Path) -> None:
    base = write_state(tmp_path, RunState(State.PENDING))
    stop = threading.Event()
    writes = 0

    def writer() -> None:
        nonlocal writes
        i = 0
        while not stop.is_set():
            i += 1
            extra = {"step": i, "pad": "x" * (i % 5000)}
            write_state(tmp_path, replace(base, state=State.RUNNING, extra=extra))
            writes += 1

    thread = threading.Thread(target=writer)
    thread.start()
    seen = set()
    try:
        # Read until 100 different states were seen (about 0.25 s here), however long the
        # writer takes on a loaded machine; the deadline only ends a hung writer.
        deadline = time.monotonic() + 120
        while len(seen) < 100:
            assert time.monotonic() < deadline, f"{len(seen)} states seen, {writes} written"
            raw = (tmp_path / "state.json").read_bytes()
            data = json.loads(raw)  # raises on a torn file
            assert data["state"] in ("pending", "running")
            seen.add(data.get("step"))
            assert read_state(tmp_path).state in ("pending", "running")
    finally:
        stop.set()
        thread.join()
    assert writes >= 99 and len(seen) == 100
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_transition_keeps_what_was_recorded_before_it(tmp_path: Path) -> None:
    running = write_state(tmp_path, RunState(State.RUNNING, launcher_pid=4242, start=1.0))
    write_state(tmp_path, replace(read_state(tmp_path), state=State.FAILED, exit_code=3))
    data = json.loads((tmp_path / "state.json").read_text())
    assert (data["state"], data["launcher_pid"], data["start"], data["exit_code"]) == (
        "failed",
        4242,
        1.0,
        3,
    )
    assert data["updated"] >= (running.updated or 0)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (None, "no state.json"),
        (b"{not json", "not valid JSON"),
        (b'{"state": "runn', "not valid JSON"),  # torn
        (b"\xff\xfe\x00garbage", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),  # too deep to parse
        (b'{"state": "exploded"}', "unrecognised state"),
        (b'{"state": "lost"}', "unrecognised state"),  # a derived state is never on disk
        (b"", "not valid JSON"),
        (b'{"state": "running", "pad": "' + b"x" * (2 << 20) + b'"}', "implausibly large"),
    ],
)
def test_an_unreadable_state_is_unknown_with_a_reason(
    tmp_path: Path, content: bytes | None, reason: str
) -> None:
    if content is not None:
        (tmp_path / "state.json").write_bytes(content)
    state = read_state(tmp_path)
    assert state.state == State.UNKNOWN
    assert state.reason is not None and reason in state.reason


def test_odd_fields_read_as_not_recorded(tmp_path: Path) -> None:
    odd = {"state": "failed", "exit_code": "three", "signal": True, "end": "later", "start": 1}
    (tmp_path / "state.json").write_text(json.dumps(odd))
    state = read_state(tmp_path)
    assert (state.state, state.exit_code, state.signal, state.end, state.start) == (
        State.FAILED,
        None,
        None,
        None,
        1,
    )
    assert read_state(tmp_path / "missing").state == State.UNKNOWN
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "state.json").mkdir()
    assert "cannot read" in (read_state(tmp_path / "dir").reason or "")


def test_rank_status_round_trips_as_the_capture_wrapper_wrote_it(tmp_path: Path) -> None:
    started = RankStatus(
        rank=3,
        local_rank=1,
        world_size=4,
        host="x1",
        wrapper_pid=10,
        pid=11,
        command=("python", "t.py"),
        start=1.0,
    )
    RunDir(tmp_path).make_folders()
    write_status(tmp_path, started)
    data = json.loads(RunDir(tmp_path).status(3).read_text())
    assert data == {
        "rank": 3,
        "local_rank": 1,
        "world_size": 4,
        "host": "x1",
        "wrapper_pid": 10,
        "pid": 11,
        "command": ["python", "t.py"],
        "start": 1.0,
        "end": None,
        "state": "running",
        "exit_code": None,
        "signal": None,
    }
    ended = replace(
        started,
        end=2.0,
        state=RankState.FAILED,
        signal=11,
        signal_name="SIGSEGV",
        signals_received=("SIGTERM",),
    )
    write_status(tmp_path, ended)
    data = json.loads(RunDir(tmp_path).status(3).read_text())
    assert (data["signal_name"], data["signals_received"], data["state"]) == (
        "SIGSEGV",
        ["SIGTERM"],
        "failed",
    )
    assert "error" not in data
    assert read_status(RunDir(tmp_path).status(3), 3) == ended
    assert ended.state in rundir.RANK_ENDED and started.state not in rundir.RANK_ENDED
    assert read_statuses(tmp_path) == [ended]


def test_rank_status_reads_tolerantly(tmp_path: Path) -> None:
    folder = RunDir(tmp_path).status_dir
    (folder / "b0000").mkdir(parents=True)
    files = {
        0: b'{"rank": 0, "state": "succeeded", "exit_code": 0}',
        1: b'{"rank": 1, "pid": 42}',  # no state: a rank runs until it says not
        2: b'{"state": "running", "ext',  # torn: skipped until it is whole
        3: b"[3]",
        4: b'{"state": "exploded", "exit_code": "x"}',  # no rank: the file name's
        5: b"\xff" * 10,
        6: b'{"rank": 6, "host": "' + b"h" * (2 << 20) + b'"}',
    }
    for rank, content in files.items():
        RunDir(tmp_path).status(rank).write_bytes(content)
    assert read_status(RunDir(tmp_path).status(1), 1) == RankStatus(rank=1, pid=42)
    assert read_status(RunDir(tmp_path).status(9), 9) is None
    statuses = read_statuses(tmp_path)
    assert [(s.rank, s.state, s.exit_code) for s in statuses] == [
        (0, RankState.SUCCEEDED, 0),
        (1, RankState.RUNNING, None),
        (4, RankState.UNKNOWN, None),
    ]


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600)])
def test_records_are_made_as_the_umask_says(tmp_path: Path, umask: int, mode: int) -> None:
    """A colleague reads a run's logs (made the plain way): its state and statuses too. A
    temporary file is made 0600 whatever the umask; the record must not stay so."""
    RunDir(tmp_path).make_folders()
    before = os.umask(umask)
    try:
        write_state(tmp_path, RunState(State.PENDING))
        write_status(tmp_path, RankStatus(0))
    finally:
        os.umask(before)
    for path in (RunDir(tmp_path).state_json, RunDir(tmp_path).status(0)):
        assert path.stat().st_mode & 0o777 == mode, path


def test_folders_made_again_ask_the_server_once_a_block(tmp_path: Path) -> None:
    """The run maker makes the first block and the shards, the supervisor then every block of
    the launch: the second call makes what is missing with one mkdir a block and one stat for
    the shards (on a shared filesystem each is a metadata server's round trip), traced."""
    import subprocess
    import sys

    from tests.fixtures.required import strace

    run = RunDir(tmp_path / "run")
    run.make_folders()
    code = f"from runtime.rundir import RunDir; RunDir({str(run.path)!r}).make_folders(2048)"
    log = tmp_path / "trace"
    argv = [strace(), "-f", "-e", "trace=mkdir,mkdirat", "-o", str(log), sys.executable, "-c"]
    subprocess.run([*argv, code], check=True, timeout=60)
    made = [line for line in log.read_text().splitlines() if str(run.path) in line]
    assert len(made) == 2 * len(rundir.RANK_FOLDERS)  # b0000 (there) and b0001 in each
    for name in rundir.RANK_FOLDERS:
        assert (run.path / name / "b0001").is_dir()
    assert len(list(run.nodes_dir.iterdir())) == rundir.NODE_SHARDS
