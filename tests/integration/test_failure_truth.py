"""Every rank's true end and no run left unsupervised: ``ezpz-tui launch`` on real mpiexec ranks,
crashed, stopped, hung up on, killed, and printing into a closed or full stdout."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.fixtures.cli import PY, REPO, base_env, cli, kill_leftovers, run_dirs
from tests.fixtures.mounts import tmpfs
from tests.procs import processes_of

# Rank 1 says a line and ends as told (exit code or signal); rank 0 would sleep for ten minutes.
RANKS = """
import os, sys, time
rank = int(os.environ["RANK"])
print(f"rank {rank} up", flush=True)
if rank == 1:
    time.sleep(1.5)
    print("rank 1 gives up", flush=True)
    how = sys.argv[1]
    if how.startswith("SIG"):
        os.kill(os.getpid(), getattr(__import__("signal"), how))
    os._exit(int(how))
time.sleep(600)
"""

SLEEPERS = """
import os, time
print(f"rank {os.environ['RANK']} up", flush=True)
time.sleep(60)
"""

CHATTY = """
import os, time
rank = os.environ["RANK"]
for i in range(40):
    print(f"rank {rank} line {i}", flush=True)
    time.sleep(0.05)
"""


def statuses(run_dir: Path) -> dict[int, dict]:
    return {
        int(p.stem.split("-")[1]): json.loads(p.read_text())
        for p in sorted((run_dir / "status").glob("b0000/rank-*.json"))
    }


def state(run_dir: Path) -> dict:
    return json.loads((run_dir / "state.json").read_text())


def the_run(outputs: Path) -> Path:
    dirs = run_dirs(outputs)
    assert len(dirs) == 1, dirs
    return dirs[0]


@pytest.mark.parametrize(("how", "word"), [("3", "exit 3"), ("SIGKILL", "SIGKILL (signal 9)")])
def test_a_crashed_rank_ends_the_job_and_its_peer_is_killed(
    outputs: Path, how: str, word: str
) -> None:
    began = time.monotonic()
    proc = cli(["launch", "--ppn", "2", "--", PY, "-c", RANKS, how], base_env(outputs), 120)
    took = time.monotonic() - began
    run_dir = the_run(outputs)
    ranks = statuses(run_dir)
    # Rank 0 would have slept 600 s: fail-fast (or the launcher's own teardown) ended it, in
    # about 2.5 s here.
    assert took < 60, (took, proc.stderr)
    assert ranks[1]["state"] == "failed", ranks[1]
    assert ranks[0]["state"] == "killed", ranks[0]
    assert ranks[0]["cause"] == "after rank 1 failed"
    recorded = state(run_dir)
    assert recorded["state"] == "failed" and recorded["failed_rank"] == 1
    assert recorded["cause"] == f"rank 1 on {socket.gethostname()}: {word}"
    assert "killed after rank 1 failed: 0" in proc.stderr
    if how == "3":  # the run's exit status is the failed rank's, not what the stop left
        assert recorded["exit_code"] == 3, recorded
    expected = 3 if how == "3" else 128 + signal.SIGKILL
    assert proc.returncode == expected, proc.stderr
    assert not processes_of(run_dir)


def _launch(outputs: Path, script: str, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PY, "-m", "ezpz_tui", "launch", "--ppn", "2", "--", PY, "-c", script],
        env=base_env(outputs),
        cwd=REPO,
        text=True,
        stdin=subprocess.DEVNULL,
        **kwargs,  # type: ignore[call-overload]
    )


def _wait_for_ranks(outputs: Path, count: int = 2, timeout: float = 60) -> Path:
    """The (newest) run directory once every rank has said it is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dirs = run_dirs(outputs)[-1:]
        logs = sorted((dirs[0] / "logs").glob("b0000/rank-*.log")) if dirs else []
        if len(logs) == count and all("up" in p.read_text(errors="replace") for p in logs):
            return dirs[0]
        time.sleep(0.1)
    raise AssertionError("the ranks did not start")


def _wait_final(run_dir: Path, timeout: float = 40) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        recorded = state(run_dir)
        if recorded["state"] not in ("pending", "running"):
            return recorded
        time.sleep(0.2)
    raise AssertionError(f"still {state(run_dir)['state']}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_signal_stops_the_run_and_no_rank_is_marked_failed(
    outputs: Path, sig: signal.Signals
) -> None:
    """Ctrl-C and SIGTERM (``ezpz-tui stop``) are the user's stop; SIGHUP is the terminal going
    away, and the run's history says that, not that the user stopped it."""
    proc = _launch(outputs, SLEEPERS, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    run_dir = _wait_for_ranks(outputs)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    recorded = state(run_dir)
    hung_up = sig == signal.SIGHUP
    assert recorded["state"] == "stopped" and recorded.get("stopped_by_user") is not hung_up
    assert recorded.get("reason") == ("the terminal hung up (SIGHUP)" if hung_up else None)
    ranks = statuses(run_dir)
    assert {r: s["state"] for r, s in ranks.items()} == {0: "stopped", 1: "stopped"}
    said = "the terminal hung up (SIGHUP)" if hung_up else "stopped by the user"
    assert {s["cause"] for s in ranks.values()} == {said}, ranks
    why = cli(["why", run_dir.name], base_env(outputs))
    expected = f"was stopped: {said}" if hung_up else "was stopped by the user"
    assert why.stdout.strip() == f"run {run_dir.name} {expected}", why.stderr
    assert "failed" not in err
    assert not processes_of(run_dir)


def test_a_killed_launch_takes_its_run_down_with_it(outputs: Path) -> None:
    """SIGKILL leaves the CLI no chance: its tether stops the ranks and records the end."""
    proc = _launch(outputs, SLEEPERS, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dir = _wait_for_ranks(outputs)
    proc.kill()
    proc.wait(10)
    recorded = _wait_final(run_dir)
    assert recorded["state"] == "stopped"
    assert f"pid {proc.pid}" in recorded["reason"] and "stopped with it" in recorded["reason"]
    ranks = statuses(run_dir)
    assert {s["state"] for s in ranks.values()} == {"stopped"}, ranks
    assert not processes_of(run_dir)
    runs = json.loads(cli(["runs", "--json"], base_env(outputs)).stdout)
    assert [r["state"] for r in runs] == ["stopped"]


def test_a_closed_stdout_stops_the_printing_not_the_run(outputs: Path) -> None:
    """``ezpz-tui launch | head -1``: the run still ends, and is recorded, as it should."""
    command = (
        f"{PY} -m ezpz_tui launch --ppn 2 -- {PY} -c '{CHATTY}' | head -1; "
        'echo "status=${PIPESTATUS[0]}"'
    )
    proc = subprocess.run(
        ["bash", "-c", command],
        env=base_env(outputs),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.stdout.splitlines() == ["rank 0 line 0", "status=0"], proc.stderr
    assert "stdout refused" in proc.stderr
    run_dir = the_run(outputs)
    assert state(run_dir)["state"] == "succeeded"
    assert {s["state"] for s in statuses(run_dir).values()} == {"succeeded"}


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
def test_a_full_stdout_stops_the_printing_not_the_run(outputs: Path) -> None:
    with open("/dev/full", "w") as full:
        proc = _launch(outputs, CHATTY, stdout=full, stderr=subprocess.PIPE)
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "No space left on device" in err
    assert "Traceback" not in err
    assert state(the_run(outputs))["state"] == "succeeded"


FILLER = """
import os, sys
rank = int(os.environ["RANK"])
print(f"rank {rank} up", flush=True)
with open(os.path.join(os.environ["EZPZ_RUN_DIR"], f"checkpoint-{rank}"), "wb") as fh:
    while True:
        fh.write(b"x" * 65536)
        fh.flush()
"""


def test_a_run_that_fills_its_disk_ends_failed_saying_so(tmp_path: Path) -> None:
    """Checkpoints fill the outputs filesystem (a 2 MB tmpfs): the run still records its end,
    ``failed`` with "no space left on device", and every rank has an end."""
    with tmpfs(tmp_path / "fs") as fs:
        outputs = fs / "outputs"
        try:
            proc = cli(["launch", "--ppn", "2", "--", PY, "-c", FILLER], base_env(outputs), 120)
            run_dir = the_run(outputs)
            recorded = state(run_dir)
            assert recorded["state"] == "failed", (recorded, proc.stderr)
            assert recorded["cause"] == "no space left on device"
            ranks = statuses(run_dir)
            assert set(ranks) == {0, 1}
            assert all(
                s["state"] in ("failed", "killed", "lost") and s["end"] for s in ranks.values()
            )
            assert proc.returncode != 0
        finally:
            kill_leftovers(outputs)


# Rank 1 raises while a non-daemon thread keeps its interpreter alive, as a rank whose MPI
# finalisation waits for a peer does: the traceback is in its log, the process lives on.
RAISES_AND_LIVES = """
import os, threading, time
rank = int(os.environ["RANK"])
print(f"rank {rank} up", flush=True)
if rank == 1:
    threading.Thread(target=time.sleep, args=(120,)).start()
    time.sleep(1)
    raise ValueError("bad batch at step 7")
time.sleep(120)
"""


def _config(tmp_path: Path, text: str) -> dict[str, str]:
    config = tmp_path / "config"
    config.mkdir()
    (config / "config.toml").write_text(text)
    return {"EZPZ_TUI_CONFIG_DIR": str(config)}


def test_a_rank_that_raised_and_lives_on_fails_the_run_with_its_exception(
    outputs: Path, tmp_path: Path
) -> None:
    env = {**base_env(outputs), **_config(tmp_path, "[launch]\nraised_grace_s = 2\n")}
    began = time.monotonic()
    proc = cli(["launch", "--ppn", "2", "--", PY, "-c", RAISES_AND_LIVES], env, 120)
    # About 5 s here (rank 1's second, the 2 s grace, the teardown); rank 0 would sleep 120 s.
    assert time.monotonic() - began < 60, proc.stderr
    run_dir = the_run(outputs)
    recorded = state(run_dir)
    assert recorded["state"] == "failed" and recorded["failed_rank"] == 1, recorded
    assert "raised ValueError: bad batch at step 7" in recorded["cause"]
    ranks = statuses(run_dir)
    assert (ranks[1]["state"], ranks[1]["cause"]) == ("failed", recorded["cause"])
    assert (ranks[0]["state"], ranks[0]["cause"]) == ("killed", "after rank 1 failed")
    assert not processes_of(run_dir)


def test_with_kill_on_bad_exit_off_the_peers_run_on(outputs: Path, tmp_path: Path) -> None:
    """The old behaviour, for jobs that tolerate a lost rank: rank 0 finishes its own work."""
    script = RANKS.replace("time.sleep(600)", "time.sleep(4); print('rank 0 done', flush=True)")
    env = {**base_env(outputs), **_config(tmp_path, "[launch]\nkill_on_bad_exit = false\n")}
    proc = cli(["launch", "--ppn", "2", "--", PY, "-c", script, "3"], env, 120)
    run_dir = the_run(outputs)
    ranks = statuses(run_dir)
    assert (ranks[0]["state"], ranks[0]["exit_code"]) == ("succeeded", 0), proc.stderr
    assert (ranks[1]["state"], ranks[1]["exit_code"]) == ("failed", 3)
    assert state(run_dir)["state"] == "failed"


def test_stop_from_another_terminal_asks_the_supervisor(outputs: Path) -> None:
    """``ezpz-tui stop RUN`` on a run an ``ezpz-tui launch`` elsewhere supervises: that launch
    stops it as Ctrl-C would, and the run is the user's stop."""
    proc = _launch(outputs, SLEEPERS, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    run_dir = _wait_for_ranks(outputs)
    stop = cli(["stop", run_dir.name], base_env(outputs), 90)
    assert stop.returncode == 0, stop.stderr
    assert f"run stopped ({run_dir.name})" in stop.stderr
    proc.wait(60)
    assert proc.returncode == 128 + signal.SIGTERM
    recorded = state(run_dir)
    assert recorded["state"] == "stopped" and recorded["stopped_by_user"] is True
    assert {s["state"] for s in statuses(run_dir).values()} == {"stopped"}
    again = cli(["stop", run_dir.name], base_env(outputs))
    assert again.returncode == 2 and "is not running (stopped)" in again.stderr


def test_every_rank_of_every_run_ends_in_a_burst_of_relaunches(tmp_path: Path) -> None:
    """Relaunch five times while the ranks are starting or running, then stop: no status of
    any run says running, and every rank the relaunches stopped says stopped."""
    from ezpz_tui.core.launching.allocation import detect_allocation
    from ezpz_tui.core.launching.plan import LaunchPlan
    from ezpz_tui.core.session import Session

    session = Session(detect_allocation(), tmp_path / "outputs")
    plan = LaunchPlan(ppn=2, command=(PY, "-c", SLEEPERS))
    try:
        session.launch(plan)
        for i in range(5):
            if i % 2:
                _wait_for_ranks(tmp_path / "outputs")
            session.relaunch(plan, grace_s=(1.0, 1.0))
        session.stop((1.0, 1.0))
        assert len(session.supervisor.handles) == 6, "the launch and five relaunches"
        for handle in session.supervisor.handles:
            assert handle.wait(30) is not None
            recorded = state(handle.run_dir)
            assert recorded["state"] == "stopped", recorded
            ranks = statuses(handle.run_dir)
            assert sorted(ranks) == [0, 1] and {s["state"] for s in ranks.values()} == {"stopped"}
            assert not processes_of(handle.run_dir)
    finally:
        kill_leftovers(tmp_path / "outputs")


# Every rank says it is up, waits long enough to be left to the tether, then ends as told.
ENDS_LATER = """
import os, sys, time
rank = int(os.environ["RANK"])
print(f"rank {rank} up", flush=True)
time.sleep(3)
sys.exit(int(sys.argv[1]) if rank == 1 else 0)
"""


@pytest.mark.parametrize(("code", "word"), [("0", "succeeded"), ("3", "failed")])
def test_a_run_left_to_its_tether_ends_with_its_exit_status(
    outputs: Path, code: str, word: str
) -> None:
    """The TUI quit with "leave running": the tether supervises the run to its end and records
    the exit status its ranks give it (the launcher's is lost with the TUI), as ``runs`` shows."""
    from ezpz_tui.core.launching.allocation import detect_allocation
    from ezpz_tui.core.launching.plan import LaunchPlan
    from ezpz_tui.core.session import Session

    session = Session(detect_allocation(), outputs)
    result = session.launch(LaunchPlan(ppn=2, command=(PY, "-c", ENDS_LATER, code)))
    run_dir = _wait_for_ranks(outputs)
    assert session.current is not None and session.current.detach(), result
    recorded = _wait_final(run_dir)
    assert recorded["supervisor_pid"] != os.getpid(), "the tether recorded the end"
    assert (recorded["state"], recorded["exit_code"]) == (word, int(code)), recorded
    runs = cli(["runs"], base_env(outputs))
    [row] = [line.split() for line in runs.stdout.splitlines() if run_dir.name in line]
    assert row[1:3] == [word, code], runs.stdout  # RUN STATE EXIT WORLD ...


def test_stop_from_another_terminal_stops_a_run_left_to_its_tether(outputs: Path) -> None:
    """The TUI quit with "leave running", then ``ezpz-tui stop RUN``: the tether (its file run
    with ``python -S``) is known as the run's supervisor by its command line, takes the stop,
    and records the user's stop."""
    from ezpz_tui.core.launching.allocation import detect_allocation
    from ezpz_tui.core.launching.plan import LaunchPlan
    from ezpz_tui.core.session import Session

    session = Session(detect_allocation(), outputs)
    result = session.launch(LaunchPlan(ppn=2, command=(PY, "-c", SLEEPERS)))
    run_dir = _wait_for_ranks(outputs)
    assert session.current is not None and session.current.detach(), result
    deadline = time.monotonic() + 30
    while state(run_dir)["supervisor_pid"] == os.getpid() and time.monotonic() < deadline:
        time.sleep(0.1)  # until the tether has named itself the run's supervisor
    tether = state(run_dir)["supervisor_pid"]
    assert tether != os.getpid(), "the tether did not take the run"
    stop = cli(["stop", run_dir.name], base_env(outputs), 90)
    assert stop.returncode == 0, stop.stderr
    recorded = _wait_final(run_dir)
    assert recorded["state"] == "stopped" and recorded["stopped_by_user"] is True, recorded
    assert {s["state"] for s in statuses(run_dir).values()} == {"stopped"}


def test_a_node_fault_under_the_tether_is_recorded_once(tmp_path: Path) -> None:
    """A run left to its tether whose node dies: the tether, which records its end, also puts
    the host in bad_hosts.txt, once; reading the failure adds nothing."""
    from ezpz_tui.core.launching.plan import LaunchPlan
    from ezpz_tui.core.runs.bad_hosts import read_bad_hosts
    from ezpz_tui.core.session import Session
    from tests.fixtures.stand_ins import AURORA, aurora_job

    alloc, stand_in = aurora_job(tmp_path)
    # The stand-in, slowed down so that the run can be left to its tether before it ends.
    stand_in.write_text(stand_in.read_text().replace("for arg in", "sleep 3\nfor arg in", 1))
    outputs = tmp_path / "outputs"
    session = Session(alloc, outputs, which={"mpiexec": str(stand_in)}.get)
    try:
        session.launch(LaunchPlan(command=(PY, "-c", "pass")))
        assert session.current is not None and session.current.detach()
        run_dir = session.current.run_dir
        recorded = _wait_final(run_dir)
        assert recorded["state"] == "failed" and recorded["supervisor_pid"] != os.getpid()
        assert read_bad_hosts(outputs) == [AURORA[1]]
        why = cli(["why", run_dir.name, "--json"], base_env(outputs))
        assert json.loads(why.stdout)["bad_host_listed"] is True, why.stderr
        assert len((outputs / "bad_hosts.txt").read_text().splitlines()) == 1
    finally:
        kill_leftovers(outputs)
