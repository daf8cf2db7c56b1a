"""``ezpz-tui why`` on real crashed runs, and ``launch --retries`` after a node fault.

The crash is real: two ranks under the mpich wheel's mpiexec (Hydra), rank 1 printing a line
and then SIGKILLing itself while rank 0 sleeps, so Hydra tears rank 0 down as a consequence.

The node fault is injected by a stand-in launcher, because no real launcher here can lose a
node: in a simulated Aurora PBS job (a PBS_NODEFILE with two ALCF node names, as
tests/integration/test_cli.py simulates jobs), ``mpiexec`` on PATH is a script that records the
hostfile it was handed and prints, on its own output (which the supervisor writes to
``launcher.log``), the line PALS prints when a node dies, naming the last host of that hostfile:
``<host>: shepherd died from signal 9``; it then exits 1 without starting ranks. Everything
after the launcher is the real path: the supervisor records the failure, ``why`` parses
``launcher.log``, the host goes to ``bad_hosts.txt``, and the retry is planned, recorded and
started by the same code a person's launch uses. Only what the launcher printed is staged.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from ezpz_tui.core.runs.record import read_run_toml
from tests.fixtures.cli import base_env, cli, kill_leftovers, run_dirs
from tests.fixtures.stand_ins import AURORA, STAND_IN, pass_through

PY = sys.executable
CRASH = """
import os, time
rank = int(os.environ["RANK"])
print(f"rank {rank} up", flush=True)
if rank == 1:
    print("rank 1 is about to be killed", flush=True)
    time.sleep(0.5)
    os.kill(os.getpid(), 9)
time.sleep(60)
"""


@pytest.fixture
def crashed(tmp_path: Path, mpiexec: str) -> dict[str, object]:
    outputs = tmp_path / "outputs"
    env = base_env(outputs)
    try:
        launched = cli(["launch", "--ppn", "2", "--", PY, "-c", CRASH], env, 120)
    finally:
        kill_leftovers(outputs)
    [run_dir] = run_dirs(outputs)
    return {"env": env, "run_dir": run_dir, "launched": launched, "outputs": outputs}


def test_why_names_the_crashed_rank_its_signal_last_line_and_the_rank_killed_after(
    crashed: dict[str, object],
) -> None:
    env, run_dir = crashed["env"], crashed["run_dir"]
    assert isinstance(run_dir, Path) and isinstance(env, dict)
    assert crashed["launched"].returncode != 0  # type: ignore[attr-defined]
    proc = cli(["why", run_dir.name, "--json"], env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["failed"] is True and out["state"] == "failed"
    assert out["rank"] == 1
    assert (out["signal"], out["signal_name"]) == (9, "SIGKILL")
    assert "OOM killer" in out["meaning"]
    assert out["last_lines"][-1] == "rank 1 is about to be killed"
    assert out["killed"] == [0]
    assert "hydra_bad_termination" in [m["kind"] for m in out["messages"]]
    # A workstation has no other node: nothing is blamed on it, nothing written.
    assert out["node_fault_host"] is None and out["bad_host_listed"] is None
    assert not (crashed["outputs"] / "bad_hosts.txt").exists()  # type: ignore[operator]
    assert out["advice"][0].startswith("Give each rank more memory")
    # Killed from outside with no OOM report: the machine's, yet no other host to move to.
    assert (out["class"], out["retry"]["retry"]) == ("infrastructure", False)
    assert out["evidence"] == [f"{out['cause']}: killed from outside, with no out-of-memory report"]
    assert out["retry"]["why"] == f"{out['cause']} names no host to move away from"

    text = cli(["why", run_dir.name[:15]], env)  # a unique prefix, as attach and plot take
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"run {run_dir.name} failed: rank 1 on ")
    assert lines[0].endswith(": SIGKILL (signal 9)")
    assert "    rank 1 is about to be killed" in lines
    assert "killed as a consequence: rank 0" in lines


def test_why_on_a_run_that_did_not_fail_and_on_no_run(tmp_path: Path, mpiexec: str) -> None:
    outputs = tmp_path / "outputs"
    env = base_env(outputs)
    try:
        ok = cli(["launch", "--ppn", "1", "--", PY, "-c", "print('fine')"], env, 120)
    finally:
        kill_leftovers(outputs)
    assert ok.returncode == 0, ok.stderr
    [run_dir] = run_dirs(outputs)
    proc = cli(["why", str(run_dir)], env)
    assert (proc.returncode, proc.stdout.strip()) == (0, f"run {run_dir.name} succeeded")
    out = json.loads(cli(["why", run_dir.name, "--json"], env).stdout)
    assert out == {
        "run_id": run_dir.name,
        "failed": False,
        "outcome": proc.stdout.strip(),
        "collectives": None,  # no collective some rank never entered
        "collective_notes": [],
    }
    missing = cli(["why", "nope"], env)
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.strip() == f"ezpz-tui: no run 'nope' in {outputs}"


def aurora_job(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "mpiexec"
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("".join(f"{h}\n" for h in AURORA))
    env = base_env(tmp_path / "outputs")
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        PBS_JOBID="4242.aurora-pbs-0001.hostmgmt.cm.aurora.alcf.anl.gov",
        PBS_NODEFILE=str(nodefile),
        PBS_JOBNAME="STDIN",
        PBS_ENVIRONMENT="PBS_INTERACTIVE",
    )
    return env


def test_retries_exclude_the_host_a_node_fault_names(tmp_path: Path) -> None:
    env = aurora_job(tmp_path)
    outputs = tmp_path / "outputs"
    proc = cli(["launch", "--retries", "2", "--quiet", "--", PY, "-c", "pass"], env, 120)
    assert proc.returncode == 1, proc.stderr
    first, retry = run_dirs(outputs)  # ids sort by creation: the failed run, then its retry
    # Each run's end put its node fault's host in bad_hosts.txt, with the run and the reason.
    listed = (outputs / "bad_hosts.txt").read_text().splitlines()
    assert listed[0].startswith(f"{AURORA[1]}  # ")
    assert f"run {first.name}: the launcher: {AURORA[1]}: shepherd died" in listed[0]
    assert listed[1].startswith(f"{AURORA[0]}  # ") and f"run {retry.name}: " in listed[1]
    assert len(listed) == 2
    assert f"a node fault named {AURORA[1]}: added to {outputs / 'bad_hosts.txt'}" in proc.stderr
    # The retry is its own run, child of the failed one, planned and launched without it.
    record = read_run_toml(retry)
    assert record["parent"] == first.name
    assert record["hosts"] == [AURORA[0]]
    assert AURORA[1].split(".")[0] in record["plan"]["exclude"]
    handed = (tmp_path / "bin" / "hostfiles.log").read_text().splitlines()
    assert len(handed) == 2 and AURORA[1] in handed[0] and AURORA[1] not in handed[1]
    # The retry's fault named the last host left: a third run cannot fit, and says why.
    assert "retry 1 of 2 without " + AURORA[1] in proc.stderr
    assert f"cannot retry without {AURORA[0]}: Every allocated host is excluded" in proc.stderr
    assert len(run_dirs(outputs)) == 2

    why = json.loads(cli(["why", first.name, "--json"], env).stdout)
    assert why["node_fault_host"] == AURORA[1] and why["rank"] is None
    assert (why["class"], why["retry"]["retry"]) == ("infrastructure", True)
    assert why["evidence"] == [f"launcher.log:2: {AURORA[1]}: shepherd died from signal 9"]
    assert why["advice"][0].startswith(f"Exclude {AURORA[1]} and relaunch")
    assert why["bad_host_listed"] is True
    # A later launch in this outputs directory skips both hosts unless told not to.
    plain = cli(["launch", "--dry-run", "--", PY, "-c", "pass"], env)
    assert plain.returncode == 2 and "--no-exclude-bad" in plain.stdout
    forced = cli(["launch", "--dry-run", "--no-exclude-bad", "--", PY, "-c", "pass"], env)
    assert forced.returncode == 0, forced.stdout
    assert json.loads(forced.stdout)["hostfile_hosts"] == list(AURORA)


def test_why_reads_and_the_runs_end_records_the_node_fault_once(tmp_path: Path) -> None:
    """Reading commands never write: the supervisor lists the host when the failed run ends;
    a person removes it (the node was repaired), and ``why``, run twice, says it is not listed
    and leaves it out."""
    env = aurora_job(tmp_path)
    outputs = tmp_path / "outputs"
    bad_hosts = outputs / "bad_hosts.txt"
    proc = cli(["launch", "--quiet", "--", PY, "-c", "pass"], env, 120)
    assert proc.returncode == 1, proc.stderr
    [run_dir] = run_dirs(outputs)
    listed = bad_hosts.read_text().splitlines()
    assert len(listed) == 1 and listed[0].startswith(f"{AURORA[1]}  # "), listed
    assert f"run {run_dir.name}: " in listed[0]
    why = json.loads(cli(["why", run_dir.name, "--json"], env).stdout)
    assert (why["node_fault_host"], why["bad_host_listed"]) == (AURORA[1], True)
    assert bad_hosts.read_text().splitlines() == listed, "why wrote"

    bad_hosts.write_text("# x4102c7s1b0n0 repaired\n")  # a person's edit
    before = bad_hosts.read_bytes()
    for _ in range(2):
        text = cli(["why", run_dir.name], env)
        assert text.returncode == 0, text.stderr
        assert f"{AURORA[1]} is not listed in bad_hosts.txt in {outputs}" in text.stdout
        as_json = json.loads(cli(["why", run_dir.name, "--json"], env).stdout)
        assert as_json["bad_host_listed"] is False
    assert bad_hosts.read_bytes() == before


# Steps 0 to 5 recorded by every rank, then the last rank fails: raising (the program's own
# error) or killed by SIGKILL (its node going down, as the stand-in launcher then says).
AT_STEP_5 = """
import os, sys
from runtime.history import History
last = int(os.environ["RANK"]) == int(os.environ["WORLD_SIZE"]) - 1
history = History()
for step in range(6):
    history.record(step, {"loss": 1.0 / (step + 1)})
history.flush()
if last and sys.argv[1] == "raise":
    raise ValueError("the config asks for 7 layers of 6")
if last:
    os.kill(os.getpid(), 9)
"""


def test_the_programs_error_at_step_5_is_the_workloads_run_once_no_host_blamed(
    tmp_path: Path, mpiexec: str
) -> None:
    env = aurora_job(tmp_path)
    pass_through(tmp_path / "bin", mpiexec, node_dies=False)
    outputs = tmp_path / "outputs"
    args = ["launch", "--retries", "3", "--ppn", "1", "--quiet", "--", PY, "-c", AT_STEP_5]
    try:
        proc = cli([*args, "raise"], env, 120)
    finally:
        kill_leftovers(outputs)
    assert proc.returncode != 0
    [run_dir] = run_dirs(outputs)  # runs once
    assert "not retrying: rank 1 on " in proc.stderr, proc.stderr
    assert "does not look like a node fault" in proc.stderr
    why = json.loads(cli(["why", run_dir.name, "--json"], env).stdout)
    assert (why["class"], why["step"], why["rank"]) == ("workload", 5, 1)
    [evidence] = why["evidence"]
    assert evidence.startswith("rank 1 raised ValueError: the config asks for 7 layers of 6")
    assert why["retry"]["retry"] is False
    assert why["retry"]["why"].endswith(
        "does not look like a node fault: it would fail again anywhere"
    )
    assert not (outputs / "bad_hosts.txt").exists()
    text = cli(["why", run_dir.name], env).stdout.splitlines()
    assert "class: workload at step 5" in text
    assert f"  evidence: {evidence}" in text


def test_a_node_fault_at_the_same_step_on_another_host_follows_the_job_and_stops(
    tmp_path: Path, mpiexec: str
) -> None:
    """With a spare, the run uses the first host; it dies at step 5 and the spare takes its
    place; the retry dies at step 5 too, on the spare: the fault followed the job, so the
    loop stops with one sentence and blames no second host."""
    env = aurora_job(tmp_path)
    pass_through(tmp_path / "bin", mpiexec, node_dies=True)
    outputs = tmp_path / "outputs"
    args = ["launch", "--retries", "3", "--spares", "1", "--ppn", "1", "--quiet", "--"]
    try:
        proc = cli([*args, PY, "-c", AT_STEP_5, "kill"], env, 180)
    finally:
        kill_leftovers(outputs)
    assert proc.returncode != 0
    first, retry = run_dirs(outputs)
    assert read_run_toml(retry)["parent"] == first.name
    handed = (tmp_path / "bin" / "hostfiles.log").read_text().splitlines()
    assert handed == [AURORA[0], AURORA[1]]
    assert f"retry 1 of 3 without {AURORA[0]}" in proc.stderr
    said = (
        f"ezpz-tui: not retrying: the same node fault at step 5 on {AURORA[0]} and then "
        f"{AURORA[1]}: it follows the job, not a node"
    )
    assert said in proc.stderr.splitlines(), proc.stderr
    listed = (outputs / "bad_hosts.txt").read_text().splitlines()
    assert [line.split()[0] for line in listed] == [AURORA[0]]  # the first fault's only

    before = json.loads(cli(["why", first.name, "--json"], env).stdout)
    assert (before["class"], before["step"], before["retry"]["retry"]) == (
        "infrastructure",
        5,
        True,
    )
    [dead] = before["evidence"]  # the launcher's line, after Hydra's own of the SIGKILL
    assert dead.startswith("launcher.log:")
    assert dead.endswith(f": {AURORA[0]}: shepherd died from signal 9")
    after = json.loads(cli(["why", retry.name, "--json"], env).stdout)
    assert (after["class"], after["step"]) == ("workload", 5)
    assert after["retry"] == {"retry": False, "why": said.partition("not retrying: ")[2]}
    assert after["evidence"][0] == f"run {first.name}: {dead}"
    assert after["evidence"][1].endswith(f": {AURORA[1]}: shepherd died from signal 9")
    assert len(after["evidence"]) == 2
