"""The Session the CLI and the TUI drive: preview, refusal, and relaunching over and over.

The relaunch test is the issue's scenario: someone presses "relaunch with other sizes" again and
again while the run is still starting. Each press must leave nothing of the previous run alive,
a new run directory that records what was asked, and the chain of parents intact.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ezpz_tui.core.launch_result import LaunchResult, NotStarted, Started
from ezpz_tui.core.launching.allocation import detect_allocation
from ezpz_tui.core.launching.plan import LaunchPlan, LaunchRefused
from ezpz_tui.core.launching.supervisor import RunHandle
from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.core.session import Session
from runtime.env import CAPTURE_IN_PROCESS_VAR
from runtime.rundir import FINAL, RunDir
from tests.fixtures.runs import wait_for
from tests.procs import processes_of

PY = sys.executable
LONG_DEMO = (PY, "-m", "runtime.examples.train", "--steps", "100000", "--sleep", "0.05")
# Every (tp, pp, cp) whose product divides a world of 2 ranks.
SIZES = ((1, 1, 1), (2, 1, 1), (1, 2, 1), (1, 1, 2))
RELAUNCHES = 20
PALS = "/opt/cray/pals/1.4/bin/mpiexec"
POLARIS_HOSTS = [
    "x3005c0s13b0n0.hsn.cm.polaris.alcf.anl.gov",
    "x3005c0s19b0n0.hsn.cm.polaris.alcf.anl.gov",
    "x3005c0s1b1n0.hsn.cm.polaris.alcf.anl.gov",
]


def started(result: LaunchResult) -> RunHandle:
    assert isinstance(result, Started), result
    return result.handle


def ranks_started(handle: RunHandle, ranks: int = 2) -> bool:
    """The launcher runs and has started every rank's wrapper, which has started the command."""
    return handle.poll() == "running" and len(RunDir(handle.run_dir).statuses()) == ranks


@pytest.fixture
def session(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Session]:
    # Two CPU ranks on this host whatever accelerators it has, so the sizes mean the same here
    # and in CI; the runs are stopped long before they would touch a device.
    monkeypatch.setenv("EZPZ_ACCELERATORS_PER_HOST", "cpu:2")
    s = Session(detect_allocation(), tmp_path / "outputs")
    yield s
    for result in s.supervisor.stop_all(grace_s=(1.0, 1.0)):  # never leak into other tests
        assert result.clean, result


@pytest.mark.slow
def test_relaunch_twenty_times_while_starting(session: Session) -> None:
    asked: list[tuple[int, int, int]] = [SIZES[0]]
    handles = [started(session.launch(LaunchPlan(ppn=2, command=LONG_DEMO)))]
    began = time.monotonic()
    for i in range(1, RELAUNCHES + 1):
        # Alternate: relaunch as soon as the launcher runs (a stop racing the launcher's start of
        # the ranks), and once every rank's command has started (a stop that must reach them).
        if i % 2:
            assert handles[-1].poll() == "running"
        else:
            wait_for(lambda: ranks_started(handles[-1]), 60, f"run {i - 1}'s ranks to start")
        tp, pp, cp = SIZES[i % len(SIZES)]
        asked.append((tp, pp, cp))
        plan = LaunchPlan(ppn=2, tp=tp, pp=pp, cp=cp, command=LONG_DEMO)
        handles.append(started(session.relaunch(plan)))
        assert session.current is handles[-1]
    wait_for(lambda: ranks_started(handles[-1]), 60, "the last run's ranks to start")
    result = session.stop()
    elapsed = time.monotonic() - began
    assert result is not None and result.clean, result
    # About 15 s here: a bound only against a launch or stop that waits out a timeout.
    assert elapsed < 200, f"21 launches and stops took {elapsed:.0f}s"

    assert list(session.supervisor.handles) == handles
    run_dirs = [h.run_dir for h in handles]
    assert len(set(run_dirs)) == RELAUNCHES + 1
    assert sorted(p for p in run_dirs[0].parent.iterdir()) == sorted(run_dirs)
    for handle in handles:
        assert handle.processes() == [], handle.run_dir.name
        assert processes_of(handle.run_dir) == [], handle.run_dir.name
    previous_end = None
    for i, (handle, (tp, pp, cp)) in enumerate(zip(handles, asked, strict=True)):
        record = read_run_toml(handle.run_dir)
        assert (record["sizes"]["tp"], record["sizes"]["pp"], record["sizes"]["cp"]) == (
            tp,
            pp,
            cp,
        )
        assert record["sizes"]["world_size"] == 2
        assert record["launch"]["env"]["EZPZ_TP"] == str(tp)
        assert record["launch"]["env"]["EZPZ_PP"] == str(pp)
        assert record["launch"]["env"]["EZPZ_CP"] == str(cp)
        assert record.get("parent") == (handles[i - 1].run_dir.name if i else None)
        state = json.loads((handle.run_dir / "state.json").read_text())
        assert state["state"] == "stopped" and state["state"] in FINAL, state
        assert handle.poll() == "stopped"
        # A relaunch starts the next launcher only after the previous one has ended.
        if previous_end is not None:
            assert state["start"] >= previous_end, i
        previous_end = state["end"]
    assert session.alive() == []


def test_preview_shows_placeholders_and_makes_nothing(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("".join(f"{h}\n" for h in POLARIS_HOSTS))
    env = {"PBS_JOBID": "42.polaris-pbs-01", "PBS_NODEFILE": str(nodefile)}
    alloc = detect_allocation(env, probe=False, host=POLARIS_HOSTS[0])
    assert alloc.machine == "Polaris"
    session = Session(alloc, outputs, which={"mpiexec": PALS}.get)

    subset = session.preview(LaunchPlan(nodes=2, tp=2))
    assert subset.problems == [] and subset.command is not None
    shown = outputs / "<run-id>"
    # The demo is a Python rank, watched in its own interpreter: the run directory is in its
    # environment, not on a wrapper's command line.
    assert subset.command.env[CAPTURE_IN_PROCESS_VAR] == str(shown)
    assert subset.command.hostfile == shown / "hostfile"
    assert subset.hostfile_hosts == POLARIS_HOSTS[:2]
    assert any(str(shown / "hostfile") in note for note in subset.command.notes)
    assert subset.command.env["EZPZ_TP"] == "2"

    whole = session.preview(LaunchPlan())
    assert whole.command is not None
    assert whole.command.hostfile == nodefile  # PBS's own file, not one in the run directory
    assert whole.hostfile_hosts == POLARIS_HOSTS

    assert not outputs.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nodefile"]
    assert session.supervisor.handles == ()


def test_a_launcher_missing_from_this_node_is_a_problem_of_the_plan(tmp_path: Path) -> None:
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("".join(f"{h}\n" for h in POLARIS_HOSTS))
    env = {"PBS_JOBID": "42.polaris-pbs-01", "PBS_NODEFILE": str(nodefile)}
    alloc = detect_allocation(env, probe=False, host=POLARIS_HOSTS[0])
    session = Session(alloc, tmp_path / "outputs", which=lambda _name: None)
    preview = session.preview(LaunchPlan(nodes=5))  # ...listed after the plan's own problems
    assert preview.command is None
    assert [(p.level, p.field) for p in preview.problems] == [
        ("error", "nodes"),
        ("error", "launcher"),
    ]
    assert "mpiexec, which is not on PATH on this node" in preview.problems[1].message
    result = session.launch(LaunchPlan())
    assert isinstance(result, NotStarted) and result.kind == "refused"
    assert (result.title, result.must_fix) == ("Not launched", False)
    assert "not on PATH on this node" in result.text
    assert not (tmp_path / "outputs").exists()


@pytest.mark.mpi
def test_relaunch_carries_the_launcher_flags_read_back_from_the_run(session: Session) -> None:
    """The TUI relaunches the plan the form reads back from the opened run's run.toml."""
    flags = ("-prepend-rank",)  # Hydra's: harmless, and visible in the argv
    sleeper = (PY, "-c", "import time; time.sleep(60)")
    first = started(session.launch(LaunchPlan(ppn=1, command=sleeper, launcher_args=flags)))
    recorded = LaunchPlan.from_dict(read_run_toml(first.run_dir)["plan"])
    assert recorded.launcher_args == flags
    second = started(session.relaunch(recorded.with_changes(tp=1)))
    record = read_run_toml(second.run_dir)
    assert record["plan"]["launcher_args"] == list(flags)
    argv = record["launch"]["argv"]
    assert argv[argv.index(PY) - 1] == "-prepend-rank"
    assert record["parent"] == first.run_dir.name


def test_preview_of_an_invalid_plan_has_no_command(tmp_path: Path) -> None:
    alloc = detect_allocation({}, probe=False, host="workstation")
    preview = Session(alloc, tmp_path / "outputs").preview(LaunchPlan(ppn=2, tp=3))
    assert preview.command is None and preview.hostfile_hosts == []
    assert [p.field for p in preview.problems] == ["sizes"]


def test_launch_of_an_invalid_plan_is_refused_with_every_problem(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    alloc = detect_allocation({"EZPZ_ACCELERATORS_PER_HOST": "cpu:2"}, probe=False, host="ws")
    session = Session(alloc, outputs)
    plan = LaunchPlan(
        nodes=3,
        ppn=2,
        tp=3,
        pp=0,
        exclude=("elsewhere",),
        env=(("EZPZ_TP", "2"), ("1BAD", "x")),
        command=(),
    )
    with pytest.raises(LaunchRefused) as refused:
        session.check(plan)
    problems = refused.value.problems
    assert all(p.level == "error" for p in problems)
    fields = [p.field for p in problems]
    for field in ("nodes", "exclude", "pp", "env", "command"):
        assert field in fields, fields
    assert fields.count("env") == 2
    result = session.launch(plan)
    assert isinstance(result, NotStarted)
    assert (result.kind, result.title, result.must_fix) == ("refused", "Not launched", False)
    assert result.reasons == tuple(p.message for p in problems)  # every problem, one a line
    assert result.text.splitlines() == [p.message for p in problems]
    assert not outputs.exists() or list(outputs.iterdir()) == []
    assert session.supervisor.handles == ()
    assert session.current is None

    again = session.relaunch(plan)
    assert isinstance(again, NotStarted) and again.reasons == result.reasons
    assert again.title == "Not relaunched"
    assert not outputs.exists() or list(outputs.iterdir()) == []


def test_a_run_that_ended_before_it_saved_is_relaunched_from_step_0(session: Session) -> None:
    """The question offered to continue at the step the live run would save, but the run ended
    (it finished) before the answer: there is no checkpoint to load, so the new run starts
    fresh and says so, rather than failing on the missing checkpoint."""
    first = started(session.launch(LaunchPlan(ppn=1, command=(PY, "-c", "pass"))))
    wait_for(lambda: first.wait(0) is not None, 60, "the first run to end")
    said: list[str] = []
    plan = LaunchPlan(
        ppn=1, command=(PY, "-c", "pass"), env=(("EZPZ_RESUME_FROM", str(first.run_dir)),)
    )
    second = started(session.relaunch(plan, progress=said.append))
    assert said == [f"{first.run_dir.name} ended before it saved: the new run starts at step 0"]
    assert "EZPZ_RESUME_FROM" not in read_run_toml(second.run_dir)["plan"].get("env", {})
