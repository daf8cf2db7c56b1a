"""Run directories: unique ids under concurrency, atomic state, tolerant listing and reading."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ezpz_tui import __version__
from ezpz_tui.core.launching.launcher import Launch
from ezpz_tui.core.launching.making import RunMaker, record_launch, update_run_meta
from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.pids import start_ticks, this_machine
from ezpz_tui.core.runs.record import RunStoreError, read_run_toml
from runtime.rundir import STALE_AFTER_S, State, read_state, write_state

LOST, UNKNOWN = State.LOST, State.UNKNOWN

RUN_ID = re.compile(r"^\d{8}-\d{6}-\d{3}-tp\d+pp\d+cp\d+(-\d+)?$")


@pytest.fixture
def store(tmp_path: Path) -> RunMaker:
    return RunMaker(tmp_path / "outputs")


def test_create_lays_out_a_pending_run(store: RunMaker) -> None:
    plan = {"command": ["python", "train.py"], "tp": 2, "nodes": ["x1"], "excluded": None}
    run = store.create(
        plan,
        {"pp": 2, "world_size": 8},
        parent="20261122-000000-000-tp1pp1cp1",
        meta={"scheduler": "PBS", "job_id": "123.pbs", "hosts": ["x1"], "hostfile": Path("/h")},
    )
    assert RUN_ID.match(run.name), run.name
    assert run.parent == store.outputs
    assert run.name.endswith("-tp2pp2cp1")
    for sub in ("logs", "status", "metrics"):
        assert (run / sub).is_dir()
    record = read_run_toml(run)
    assert record["run_id"] == run.name
    assert record["parent"] == "20261122-000000-000-tp1pp1cp1"
    assert record["version"] == __version__
    assert record["scheduler"] == "PBS" and record["hostfile"] == "/h"
    assert record["sizes"] == {"tp": 2, "pp": 2, "cp": 1, "world_size": 8, "dp": 2}
    assert record["plan"] == {"command": ["python", "train.py"], "tp": 2, "nodes": ["x1"]}
    assert abs(record["created_epoch"] - time.time()) < 60
    assert record["created"].startswith(run.name[:4])
    state = run_state(run)
    assert state.state == "pending"
    assert state.run_id == run.name


def test_create_refuses_reserved_meta_and_values_toml_cannot_hold(store: RunMaker) -> None:
    with pytest.raises(ValueError, match="run_id"):
        store.create({}, meta={"run_id": "mine"})
    with pytest.raises(ValueError, match=r"plan\.bad"):
        store.create({"bad": object()})
    assert store.list_runs() == []  # nothing half made


def test_create_in_unusable_outputs_says_why(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(RunStoreError, match=r"cannot create a run in .*: not a directory"):
        RunMaker(blocker / "outputs").create({})


def test_same_millisecond_creates_get_suffixes_and_sort_newest_first(store: RunMaker) -> None:
    runs = [store.create({"command": ["x", str(i)]}) for i in range(5)]
    assert len({r.name for r in runs}) == 5
    listed = store.list_runs()
    assert [s.path for s in listed] == list(reversed(runs))
    assert [s.command for s in listed] == [["x", str(i)] for i in reversed(range(5))]


_CREATOR = """
import sys
from pathlib import Path
from ezpz_tui.core.launching.making import RunMaker
store = RunMaker(Path(sys.argv[1]))
for _ in range(int(sys.argv[2])):
    print(store.create({"tp": 1}, {"tp": 1}).name, flush=True)
"""


def test_concurrent_creators_in_threads_and_processes_never_share_a_run(store: RunMaker) -> None:
    per_worker, threads, processes = 30, 4, 3
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CREATOR, str(store.outputs), str(per_worker)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    names: list[str] = []
    lock = threading.Lock()

    def create_many() -> None:
        mine = [store.create({"tp": 1}).name for _ in range(per_worker)]
        with lock:
            names.extend(mine)

    workers = [threading.Thread(target=create_many) for _ in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        names.extend(out.split())
    total = per_worker * (threads + processes)
    assert len(names) == total
    assert len(set(names)) == total
    assert any(re.search(r"-\d+$", n) for n in names)  # collisions did happen and were settled
    for name in names:
        assert read_run_toml(store.outputs / name)["run_id"] == name
    assert len(store.list_runs()) == total


def test_state_of_a_missing_directory_is_unknown(tmp_path: Path) -> None:
    assert run_state(tmp_path / "nowhere").state == UNKNOWN


def test_listing_tolerates_garbage(store: RunMaker) -> None:
    good = store.create({"command": ["python", "t.py"]}, {"tp": 2, "world_size": 4})
    out = store.outputs
    (out / "notes.txt").write_text("a file, not a run")
    (out / "empty").mkdir()
    (out / "random").mkdir()
    (out / "random" / "picture.png").write_bytes(b"\x89PNG")
    (out / ".hidden").mkdir()
    (out / ".hidden" / "state.json").write_text('{"state": "running"}')
    ezpz = out / "ezpz-2025-01-01"
    ezpz.mkdir()
    (ezpz / "metrics.jsonl").write_text('{"loss": 1.0}\n')
    broken = out / "broken"
    (broken / "logs").mkdir(parents=True)
    (broken / "run.toml").write_text("this is = = not toml [")
    (broken / "state.json").write_bytes(b'{"state": "runn')
    weird = out / "weird"
    weird.mkdir()
    (weird / "run.toml").write_text('sizes = "big"\nplan = 3\ncreated_epoch = "yesterday"\n')
    (weird / "state.json").write_text('{"state": "failed", "exit_code": "three"}')
    runs = {r.run_id: r for r in store.list_runs()}
    assert set(runs) == {good.name, "ezpz-2025-01-01", "broken", "weird"}
    assert runs[good.name].state == "pending"
    assert (runs[good.name].tp, runs[good.name].dp, runs[good.name].world_size) == (2, 2, 4)
    assert runs["ezpz-2025-01-01"].state == "running"  # ezpz's files, written just now
    assert runs["broken"].state == UNKNOWN and "JSON" in (runs["broken"].reason or "")
    assert runs["weird"].state == "failed" and runs["weird"].exit_code is None
    assert runs["weird"].tp is None and runs["weird"].created is not None


def test_listing_a_missing_outputs_directory_is_empty(tmp_path: Path) -> None:
    assert RunMaker(tmp_path / "never-made").list_runs() == []


def test_read_plan_by_id_prefix_and_path(store: RunMaker, tmp_path: Path) -> None:
    plan = {"command": ["python", "-m", "runtime.examples.train"], "tp": 2, "env": {"A": "1"}}
    run = store.create(plan)
    assert store.read_plan(run.name) == plan
    assert store.read_plan(run) == plan
    assert store.read_plan(str(run)) == plan
    assert store.read_plan(run.name[:15]) == plan
    store.create({})
    with pytest.raises(RunStoreError, match="matches several runs"):
        store.read_plan(run.name[:8])
    with pytest.raises(RunStoreError, match="no run 'nope'"):
        store.read_plan("nope")
    with pytest.raises(RunStoreError, match="no run given"):
        store.read_plan("  ")
    bare = store.outputs / "bare"
    bare.mkdir()
    with pytest.raises(RunStoreError, match=r"has no run\.toml"):
        store.read_plan("bare")
    (bare / "run.toml").write_text("[[[")
    with pytest.raises(RunStoreError, match="not valid TOML"):
        store.read_plan("bare")


def test_update_run_meta_adds_but_never_rewrites_identity(store: RunMaker) -> None:
    run = store.create({"tp": 1})
    update_run_meta(run, {"launch": {"argv": ["mpiexec", "-n", "2"], "env": {"X": "1"}}})
    record = read_run_toml(run)
    assert record["launch"]["argv"] == ["mpiexec", "-n", "2"]
    assert record["plan"] == {"tp": 1}
    with pytest.raises(ValueError, match="plan"):
        update_run_meta(run, {"plan": {}})


def test_a_new_table_is_appended_and_a_recorded_one_replaced(store: RunMaker) -> None:
    """The launch's entry is added just before its launcher starts, without reading the record
    back (a TOML reader's import the ranks would wait for): the file holds what it held, then
    the table; recording the same table again (a launch shrunk after staging) replaces it."""
    run = store.create({"tp": 1})
    made = (run / "run.toml").read_bytes()
    first = {"argv": ["mpiexec", "-n", "2"], "env": {"X": "1"}, "cwd": "/a"}
    update_run_meta(run, {"launch": first, "provenance": {"python": "3.11"}})
    assert (run / "run.toml").read_bytes().startswith(made)
    assert read_run_toml(run)["launch"] == first
    assert read_run_toml(run)["provenance"] == {"python": "3.11"}
    update_run_meta(run, {"launch": {**first, "argv": ["mpiexec", "-n", "1"]}})
    record = read_run_toml(run)
    assert record["launch"]["argv"] == ["mpiexec", "-n", "1"]
    assert (record["plan"], record["provenance"]) == ({"tp": 1}, {"python": "3.11"})


def test_record_launch_adds_the_command_and_writes_its_hostfile(store: RunMaker) -> None:
    run = store.create({"tp": 1})
    argv = ("mpiexec", "-f", str(run / "hostfile"), "python")
    record_launch(
        Launch(run, argv, {"X": "1"}, hostfile=run / "hostfile", hostfile_hosts=("a", "b"))
    )
    assert (run / "hostfile").read_text() == "a\nb\n"
    record = read_run_toml(run)
    assert record["launch"] == {"argv": list(argv), "env": {"X": "1"}, "cwd": str(Path.cwd())}
    assert record["plan"] == {"tp": 1}
    nodefile = store.outputs / "pbs_nodefile"  # the scheduler's own file is never written
    record_launch(Launch(run, ("mpiexec",), hostfile=nodefile, cwd=Path("/somewhere")))
    assert not nodefile.exists()
    assert read_run_toml(run)["launch"]["cwd"] == "/somewhere"
    with pytest.raises(RunStoreError, match="cannot record the launch"):
        record_launch(Launch(store.outputs / "gone", ("x",), hostfile_hosts=("a",)))


def test_the_provenance_is_recorded_when_asked_after_the_launch(store: RunMaker) -> None:
    """A launch records its command before the launcher starts and its provenance (git, the
    launcher's version) after: the ranks do not wait for those commands."""
    run = store.create({"tp": 1})
    provenance = record_launch(Launch(run, ("mpiexec", "python", "-c", "pass")))
    assert "launch" in read_run_toml(run) and "provenance" not in read_run_toml(run)
    provenance.record()
    facts = read_run_toml(run)["provenance"]
    assert facts["python_executable"] and read_run_toml(run)["launch"]["argv"][0] == "mpiexec"


def set_state(run: Path, state: str, **fields: object) -> None:
    """Record ``state`` over what the run recorded, as its supervisor would."""
    write_state(run, replace(read_state(run), state=State(state), **fields))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_running_with_supervisor_and_launcher_gone_is_lost(tmp_path: Path) -> None:
    run = RunMaker(tmp_path).create({})
    set_state(run, "running", launcher_pid=_dead_pid(), supervisor_pid=_dead_pid())
    state = run_state(run)
    assert state.state == LOST and state.recorded_state == "running"
    assert "without recording how the run ended" in (state.reason or "")
    assert json.loads((run / "state.json").read_text())["state"] == "running"  # never written


def test_a_reused_pid_does_not_count_as_alive(tmp_path: Path) -> None:
    run = RunMaker(tmp_path).create({})
    me = start_ticks(os.getpid())
    assert me is not None
    # Our own pid, but a different start time: a stranger that got the number.
    set_state(
        run,
        "running",
        launcher_pid=os.getpid(),
        launcher_start_ticks=1,
        supervisor_pid=os.getpid(),
        supervisor_start_ticks=me + 1,
    )
    assert run_state(run).state == LOST


def test_live_supervisor_keeps_a_run_running(tmp_path: Path) -> None:
    run = RunMaker(tmp_path).create({})
    set_state(run, "running", launcher_pid=_dead_pid())  # owner fields are this process
    assert run_state(run).state == "running"  # the supervisor is about to record the end


def test_pending_run_whose_creator_died_is_lost(tmp_path: Path) -> None:
    run = RunMaker(tmp_path).create({})
    set_state(run, "pending", supervisor_pid=_dead_pid())
    state = run_state(run)
    assert state.state == LOST and "before starting it" in (state.reason or "")


def test_run_on_another_host_is_judged_by_its_heartbeat(tmp_path: Path) -> None:
    run = RunMaker(tmp_path).create({})
    set_state(run, "running", host="compute-node-17", launcher_pid=_dead_pid())
    assert run_state(run).state == "running"
    later = time.time() + STALE_AFTER_S + 60
    state = run_state(run, now=later)
    assert state.state == LOST and "compute-node-17" in (state.reason or "")


def test_reboot_means_lost(tmp_path: Path) -> None:
    run = RunMaker(tmp_path).create({})
    set_state(run, "running", boot_id="00000000-0000-0000-0000-000000000000")
    if this_machine().boot_id is None:
        pytest.skip("no boot id on this system")
    assert "rebooted" in (run_state(run).reason or "")


def test_final_states_are_reported_as_written(tmp_path: Path) -> None:
    run = RunMaker(tmp_path).create({})
    set_state(run, "failed", exit_code=3, supervisor_pid=_dead_pid())
    assert run_state(run).state == "failed"
    assert RunMaker(tmp_path).list_runs()[0].exit_code == 3


def test_an_ended_run_is_read_once_until_its_state_is_written_again(
    store: RunMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The screen lists the outputs every 2 s: an ended run's run.toml and state are read
    once, a live one's every time, and a new state.json is read at once."""
    from ezpz_tui.core.runs import store as runstore

    live, ended = store.create({"command": ["a"]}), store.create({"command": ["b"]})
    for run, state in ((live, State.RUNNING), (ended, State.SUCCEEDED)):
        write_state(run, replace(read_state(run), state=state, exit_code=0))
    reads: list[Path] = []
    real = runstore.read_record
    monkeypatch.setattr(runstore, "read_record", lambda p: reads.append(p) or real(p))
    for _ in range(3):
        states = {r.path: r.state for r in store.list_runs()}
    assert states == {live: "running", ended: "succeeded"}
    assert reads.count(ended) == 1 and reads.count(live) == 3
    write_state(ended, replace(read_state(ended), state=State.FAILED, exit_code=1))
    assert {r.path: r.state for r in store.list_runs()}[ended] == "failed"
    assert reads.count(ended) == 2
