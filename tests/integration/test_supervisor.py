"""The supervisor with real process trees: nothing of a stopped run may survive on this node."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ezpz_tui.core.launching import supervisor as supervisor_module
from ezpz_tui.core.launching.launcher import Launch
from ezpz_tui.core.launching.making import RunMaker, record_launch
from ezpz_tui.core.launching.supervisor import START_FAILED_CODE, RunHandle, Supervisor
from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.record import read_run_toml
from runtime.procfs import proc_stat
from runtime.rundir import FINAL, State
from tests.procs import processes_of

PY = sys.executable
FAST = (1.0, 1.0)

# A tree whose members record every signal they get. ``ignore`` lists the signals a member
# survives; the "escaper" starts a daemon in a new session and exits at once, so only the
# environment (EZPZ_RUN_DIR) ties the daemon to the run.
TREE = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    rec, role = sys.argv[1], sys.argv[2]
    SPEC = {
        "root": ((), ["a", "b"]),
        "a": (("SIGINT",), ["a1"]),
        "a1": ((), []),
        "b": (("SIGINT", "SIGTERM"), ["b1", "escaper"]),
        "b1": (("SIGINT",), []),
        "escaper": ((), []),
        "daemon": (("SIGINT",), []),
    }
    ignore, children = SPEC[role]

    def on_signal(signum, frame):
        with open(os.path.join(rec, role + ".signals"), "a") as fh:
            fh.write(signal.Signals(signum).name + "\\n")
        if signal.Signals(signum).name not in ignore:
            os._exit(128 + signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    spawn = [sys.executable, __file__, rec]
    for child in children:
        subprocess.Popen(spawn + [child])
    if role == "escaper":
        subprocess.Popen(spawn + ["daemon"], start_new_session=True)
        sys.exit(0)
    with open(os.path.join(rec, role + ".pid"), "w") as fh:
        fh.write(str(os.getpid()))
    while True:
        time.sleep(0.05)
    """
)
TREE_MEMBERS = ("root", "a", "a1", "b", "b1", "daemon")


def alive(pid: int) -> bool:
    stat = proc_stat(pid)
    return stat is not None and stat.state not in ("Z", "X")


def wait_for(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.05)


def disk_state(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "state.json").read_text())


def start(
    sup: Supervisor,
    run: Path,
    argv: list[str],
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> RunHandle:
    """Record and start ``argv`` in ``run``, the way a session does."""
    launch = Launch(run, tuple(argv), dict(env or {}), cwd=cwd)
    record_launch(launch)
    return sup.start(launch)


@pytest.fixture
def store(tmp_path: Path) -> RunMaker:
    return RunMaker(tmp_path / "outputs")


@pytest.fixture
def sup() -> Any:
    supervisor = Supervisor()
    yield supervisor
    for result in supervisor.stop_all(grace_s=(0.2, 0.2)):  # never leak processes into others
        assert result.clean


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    rec = tmp_path / "rec"
    rec.mkdir()
    return script, rec


def start_tree(sup: Supervisor, store: RunMaker, script: Path, rec: Path) -> RunHandle:
    return start(sup, store.create({"command": ["tree"]}), [PY, str(script), str(rec), "root"])


def tree_pids(rec: Path) -> dict[str, int]:
    return {m: int((rec / f"{m}.pid").read_text()) for m in TREE_MEMBERS}


def signals_of(rec: Path, member: str) -> list[str]:
    path = rec / f"{member}.signals"
    return path.read_text().split() if path.exists() else []


def test_stop_escalates_and_leaves_nothing(sup: Supervisor, store: RunMaker, tree) -> None:
    script, rec = tree
    handle = start_tree(sup, store, script, rec)
    wait_for(lambda: all((rec / f"{m}.pid").exists() for m in TREE_MEMBERS))
    pids = tree_pids(rec)
    assert set(pids.values()) <= set(handle.processes())
    daemon = proc_stat(pids["daemon"])
    assert daemon is not None and daemon.session != handle.pid  # escaped the session

    result = handle.stop(grace_s=FAST)

    assert result.clean and result.escalation == ("SIGINT", "SIGTERM", "SIGKILL")
    assert not [pid for pid in pids.values() if alive(pid)]
    assert processes_of(handle.run_dir) == []
    assert signals_of(rec, "root") == ["SIGINT"]
    assert signals_of(rec, "a") == ["SIGINT", "SIGTERM"]
    assert signals_of(rec, "a1") == ["SIGINT"]
    assert signals_of(rec, "b") == ["SIGINT", "SIGTERM"]  # then SIGKILL, which cannot be seen
    assert signals_of(rec, "b1") == ["SIGINT", "SIGTERM"]
    assert signals_of(rec, "daemon") == ["SIGTERM"]  # outside the session: no SIGINT
    assert result.signalled[pids["b"]] == ("SIGINT", "SIGTERM", "SIGKILL")
    assert result.signalled[pids["daemon"]] == ("SIGTERM",)
    # Two graces of 1 s (about 2.1 s here); the members would live for ever.
    assert 2.0 <= result.elapsed_s < 25.0
    state = disk_state(handle.run_dir)
    assert state["state"] == "stopped" and state["stopped_by_user"] is True
    assert state["stop_signals"] == ["SIGINT", "SIGTERM", "SIGKILL"]
    assert state["stop_remaining"] == []
    assert (state["exit_code"], state["signal"]) == (128 + signal.SIGINT, None)
    again = handle.stop(grace_s=FAST)
    assert again.already_finished and again.escalation == () and again.state == "stopped"


def test_stop_finds_a_daemon_that_names_the_resolved_run_dir(
    sup: Supervisor, tmp_path: Path
) -> None:
    # runtime.capture hands the user's command the resolved run dir; reach outputs by a symlink.
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    run = RunMaker(tmp_path / "link").create({})
    pidfile = tmp_path / "daemon.pid"
    code = textwrap.dedent(
        f"""
        import os, subprocess, sys
        env = dict(os.environ, EZPZ_RUN_DIR=os.path.realpath(os.environ["EZPZ_RUN_DIR"]))
        daemon = "import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid()))"
        daemon += "; time.sleep(60)"
        subprocess.Popen([sys.executable, "-c", daemon], env=env, start_new_session=True)
        """
    )
    handle = start(sup, run, [PY, "-c", code])
    assert handle.wait(30) == 0
    wait_for(lambda: pidfile.exists() and pidfile.read_text() != "")
    daemon = int(pidfile.read_text())
    assert handle.processes() == [daemon]
    result = handle.stop(grace_s=FAST)
    assert result.clean and result.already_finished and result.escalation == ("SIGTERM",)
    assert not alive(daemon)
    assert run_state(run).state == "succeeded"  # leftovers removed; the outcome stands


@pytest.mark.mpi
def test_stop_a_real_mpiexec_run(sup: Supervisor, store: RunMaker, mpiexec: str) -> None:
    loop = "import time\nwhile True:\n    time.sleep(0.1)"
    run = store.create({"command": [PY, "-c", loop]}, {"world_size": 2})
    handle = start(sup, run, [mpiexec, "-n", "2", PY, "-c", loop])
    # mpiexec, its proxy, two ranks; Hydra gives the proxy and each rank a session of its own.
    wait_for(lambda: len(handle.processes()) >= 4)
    ranks = [p for p in handle.processes() if p != handle.pid]
    assert any(proc_stat(p).session != handle.pid for p in ranks)  # type: ignore[union-attr]

    result = handle.stop()

    assert result.clean and result.escalation == ("SIGINT",)  # mpiexec forwarded it
    assert result.elapsed_s < 5.0
    assert processes_of(run) == [] and not [p for p in ranks if alive(p)]
    assert run_state(run).state == "stopped"
    print(f"mpiexec -n 2 stop: {result.elapsed_s:.3f}s via {result.escalation}")


@pytest.mark.parametrize(
    ("code", "state", "exit_code", "sig"),
    [
        ("pass", "succeeded", 0, None),
        ("raise SystemExit(3)", "failed", 3, None),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "failed", None, "SIGKILL"),
    ],
)
def test_natural_end_is_recorded_without_polling(
    sup: Supervisor, store: RunMaker, code: str, state: str, exit_code: int | None, sig: str | None
) -> None:
    run = store.create({})
    start(sup, run, [PY, "-c", code])
    wait_for(lambda: disk_state(run)["state"] in FINAL)  # only the watcher writes it
    data = disk_state(run)
    assert (data["state"], data["exit_code"], data.get("signal_name")) == (state, exit_code, sig)
    assert data["end"] >= data["start"]
    assert "stopped_by_user" not in data


def test_launcher_log_environment_and_stdin(
    sup: Supervisor, store: RunMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MASTER_ADDR", "10.9.8.7")
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("EZPZ_KEEP", "kept")
    code = (
        "import os, sys\n"
        "print('stdin:', repr(sys.stdin.read()))\n"
        "for k in ('MASTER_ADDR', 'RANK', 'EZPZ_KEEP', 'EXTRA', 'EZPZ_RUN_DIR'):\n"
        "    print(k, os.environ.get(k))\n"
        "sys.stderr.write('to stderr\\n')\n"
        "sys.stdout.buffer.write(b'bad byte \\xff\\n')\n"
        "print('args:', sys.argv[1:])\n"
    )
    run = store.create({})
    argv = [PY, "-c", code, "", "two words"]  # argv, not a shell: nothing is split or lost
    handle = start(sup, run, argv, {"EXTRA": "x=1"})
    assert handle.wait(30) == 0
    out = (run / "launcher.log").read_text(errors="replace")
    assert "stdin: ''" in out
    assert "MASTER_ADDR None" in out and "RANK None" in out
    assert "EZPZ_KEEP kept" in out and "EXTRA x=1" in out
    assert f"EZPZ_RUN_DIR {run}" in out
    assert "to stderr" in out and "bad byte" in out
    assert "args: ['', 'two words']" in out
    launch = read_run_toml(run)["launch"]
    assert launch["argv"] == argv and launch["env"] == {"EXTRA": "x=1"}


@pytest.mark.parametrize(
    ("argv", "cwd", "reason"),
    [
        (["no-such-program-ezpz", "--x"], None, "no such program"),
        ([PY, "-c", "pass"], Path("/no/such/dir"), "does not exist"),
        ([], None, "bad command"),
    ],
)
def test_a_launcher_that_cannot_start_fails_readably(
    sup: Supervisor, store: RunMaker, argv: list[str], cwd: Path | None, reason: str
) -> None:
    run = store.create({})
    handle = start(sup, run, argv, cwd=cwd)
    assert handle.poll() == "failed" and handle.wait(0) == START_FAILED_CODE
    state = run_state(run)
    assert state.state == "failed" and reason in (state.reason or "")
    assert "Traceback" not in (state.reason or "")
    assert reason in (run / "launcher.log").read_text()
    assert handle.stop(FAST).already_finished


def test_a_run_directory_is_used_once(sup: Supervisor, store: RunMaker) -> None:
    run = store.create({})
    assert start(sup, run, [PY, "-c", "pass"]).wait(30) == 0
    with pytest.raises(ValueError, match="not a fresh run directory"):
        sup.start(Launch(run, (PY, "-c", "pass")))
    with pytest.raises(ValueError, match="not a fresh run directory"):
        sup.start(Launch(store.outputs / "never-created", (PY, "-c", "pass")))


def test_listeners_hear_each_transition_in_order(sup: Supervisor, store: RunMaker) -> None:
    heard: list[tuple[str, str]] = []
    unsubscribe = sup.add_listener(lambda h, s: heard.append((h.run_dir.name, s.state)))
    sup.add_listener(lambda h, s: 1 / 0)  # a broken listener must not stop the others
    run = store.create({})
    start(sup, run, [PY, "-c", "pass"]).wait(30)
    unsubscribe()
    start(sup, store.create({}), [PY, "-c", "pass"]).wait(30)
    assert heard == [(run.name, "running"), (run.name, "succeeded")]


def test_stop_racing_a_natural_exit_always_ends_in_a_final_state(
    sup: Supervisor, store: RunMaker
) -> None:
    for _ in range(10):
        handle = start(sup, store.create({}), [PY, "-c", "pass"])
        result = handle.stop(grace_s=FAST)
        assert result.clean
        state = disk_state(handle.run_dir)
        assert state["state"] in ("stopped", "succeeded", "failed")
        assert state["state"] == result.state
        assert (state["state"] == "stopped") == (not result.already_finished)


def test_heartbeat_refreshes_while_running(
    sup: Supervisor, store: RunMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(supervisor_module, "HEARTBEAT_S", 0.1)
    run = store.create({})
    handle = start(sup, run, [PY, "-c", "import time; time.sleep(5.0)"])  # outlives a slow box
    first = disk_state(run)["updated"]
    wait_for(lambda: disk_state(run)["updated"] > first + 0.2, timeout=5)
    assert disk_state(run)["state"] == "running"
    assert handle.wait(30) == 0


_ORPHANING_SUPERVISOR = """
import sys, time
from pathlib import Path
from ezpz_tui.core.launching.launcher import Launch
from ezpz_tui.core.launching.making import RunMaker
from ezpz_tui.core.launching.supervisor import Supervisor
run = RunMaker(Path(sys.argv[1])).create({})
Supervisor().start(Launch(run, (sys.executable, "-c", "import time; time.sleep(60)")))
print(run, flush=True)
time.sleep(60)
"""


def test_a_run_whose_supervisor_died_is_lost_once_the_launcher_ends(store: RunMaker) -> None:
    owner = subprocess.Popen(
        [PY, "-c", _ORPHANING_SUPERVISOR, str(store.outputs)], stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    run = Path(owner.stdout.readline().strip())
    launcher = disk_state(run)["launcher_pid"]
    owner.kill()
    owner.wait()
    try:
        orphan = run_state(run)  # the launcher lives on in its own session
        assert orphan.state == "running" and "will not be recorded" in (orphan.reason or "")
        assert store.list_runs()[0].state == "running"
    finally:
        os.kill(launcher, signal.SIGKILL)
    wait_for(lambda: not alive(launcher))
    state = run_state(run)
    assert state.state == State.LOST and "without recording" in (state.reason or "")
    assert store.list_runs()[0].state == State.LOST
    assert disk_state(run)["state"] == "running"  # a reader never rewrites it


# A rank that records 20 steps, the first saying its FLOPs per token, then says so and waits.
_FLOPS_RANK = """
import sys, time
from runtime.history import History
with History(sys.argv[1], rank=0) as h:
    for step in range(20):
        first = {"flops_per_token": 1e9} if step == 0 else {}
        h.record(step, {"loss": 1.0, "dt": 0.1, **first}, samples=8)
print("recorded", flush=True)
time.sleep(float(sys.argv[2]))
"""

_SUPERVISOR_WITH_PEAKS = """
import sys, time
from pathlib import Path
from ezpz_tui.core.launching.launcher import Launch
from ezpz_tui.core.launching.making import RunMaker
from ezpz_tui.core.launching.supervisor import Supervisor
from ezpz_tui.core.watching.efficiency import PeakSettings
run = RunMaker(Path(sys.argv[1])).create({})
rank = (sys.executable, "-c", sys.argv[2], str(run), "60")
Supervisor(peaks=PeakSettings(250.0, "fp16")).start(Launch(run, rank))
print(run, flush=True)
time.sleep(60)
"""


def _summary_peak(run: Path) -> str:
    summary = run / "summary.json"
    wait_for(summary.exists, timeout=120)  # the finalizer's own process imports xarray
    return json.loads(summary.read_text())["speed"]["efficiency"]["peak"]["label"]


def test_the_finalizer_of_a_run_gets_its_supervisor_s_peak(store: RunMaker) -> None:
    """The peak summary.json divides by is the one the supervisor was made with (the config's
    ``[efficiency]``, read where the supervisor is made), whoever records the end: the
    supervisor itself, or the tether of a supervisor that died."""
    from ezpz_tui.core.watching.efficiency import PeakSettings

    sup = Supervisor(peaks=PeakSettings(500.0, "fp16"))
    run = store.create({})
    assert start(sup, run, [PY, "-c", _FLOPS_RANK, str(run), "0"]).wait(30) == 0
    assert _summary_peak(run) == "every device fp16 500 TFLOPS (config)"

    owner = subprocess.Popen(
        [PY, "-c", _SUPERVISOR_WITH_PEAKS, str(store.outputs), _FLOPS_RANK],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    left = Path(owner.stdout.readline().strip())
    wait_for(lambda: "recorded" in (left / "launcher.log").read_text())
    owner.kill()  # the tether stops the run, records its end and starts the finalizer
    owner.wait()
    assert _summary_peak(left) == "every device fp16 250 TFLOPS (config)"
    assert disk_state(left)["state"] == "stopped"


def test_stop_all_stops_every_live_run(sup: Supervisor, store: RunMaker) -> None:
    sleeper = [PY, "-c", "import time; time.sleep(60)"]
    handles = [start(sup, store.create({}), sleeper) for _ in range(3)]
    finished = start(sup, store.create({}), [PY, "-c", "pass"])
    finished.wait(30)
    results = sup.stop_all(grace_s=FAST)
    assert len(results) == 3 and all(r.clean and r.state == "stopped" for r in results)
    assert all(h.poll() == "stopped" for h in handles) and finished.poll() == "succeeded"
    assert sup.handles == (*handles, finished)


def test_relaunch_refuses_a_handle_from_another_supervisor(
    sup: Supervisor, store: RunMaker
) -> None:
    other = Supervisor()
    handle = start(other, store.create({}), [PY, "-c", "pass"])
    with pytest.raises(ValueError, match="another Supervisor"):
        sup.relaunch(handle, Launch(store.create({}), (PY, "-c", "pass")))


@pytest.mark.slow
def test_twenty_relaunches_leave_only_the_last_run(
    sup: Supervisor, store: RunMaker, tmp_path: Path
) -> None:
    script = tmp_path / "tree.py"
    script.write_text(TREE)
    runs: list[Path] = []

    def argv(i: int) -> list[str]:
        rec = tmp_path / f"rec{i}"
        rec.mkdir()
        return [PY, str(script), str(rec), "root"]

    run = store.create({"tp": 1})
    handle = start(sup, run, argv(0))
    runs.append(run)
    for i in range(1, 21):
        if i % 2:  # half the time the tree is complete, half the time it is still being born
            rec = tmp_path / f"rec{i - 1}"
            wait_for(lambda rec=rec: all((rec / f"{m}.pid").exists() for m in TREE_MEMBERS))
        new_run = store.create({"tp": 1}, parent=run.name)
        handle = sup.relaunch(handle, Launch(new_run, tuple(argv(i))), grace_s=(0.3, 0.3))
        assert handle.poll() == "running"
        run = new_run
        runs.append(run)
    assert len(set(runs)) == 21
    for old in runs[:-1]:
        assert processes_of(old) == []
        assert run_state(old).state in FINAL
    assert handle.processes()
    assert handle.stop(grace_s=(0.3, 0.3)).clean
    assert run_state(runs[-1]).state == "stopped"
    assert read_run_toml(runs[-1])["parent"] == runs[-2].name


def test_the_supervisor_makes_the_rank_folders_before_the_launcher_starts(
    sup: Supervisor, store: RunMaker
) -> None:
    """With each folder's blocks of 1,024 ranks for the launch's world size (2,049: three)."""
    run = store.create({})
    for name in ("logs", "status", "metrics", "telemetry", "flight"):
        shutil.rmtree(run / name)
    folders = "all(os.path.isdir(f'{d}/{b}') for d in ('logs', 'status', 'metrics', "
    folders += "'telemetry', 'flight') for b in ('b0000', 'b0001', 'b0002'))"
    argv = (PY, "-c", f"import os, sys; sys.exit(0 if {folders} else 5)")
    launch = Launch(run, argv, {}, cwd=run, world_size=2049)
    record_launch(launch)
    sup.start(launch)
    wait_for(lambda: disk_state(run)["state"] in FINAL)
    assert (disk_state(run)["state"], disk_state(run)["exit_code"]) == ("succeeded", 0)
    assert not (run / "logs" / "b0003").exists()
