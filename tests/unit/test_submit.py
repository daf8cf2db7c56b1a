"""``ezpz-tui submit``'s core: walltimes, the batch script, the job a run's plan becomes, the
submission record, and how a queued job becomes its run in the runs list."""

from __future__ import annotations

import json
import os
import shlex
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ezpz_tui.core.launching.batch_script import (
    SUBMISSION_VAR,
    format_walltime,
    parse_walltime,
    render,
)
from ezpz_tui.core.launching.making import RunMaker
from ezpz_tui.core.launching.submission import (
    BatchRequest,
    SubmitError,
    last_request,
    parse_job_id,
    plan_source,
    prepare,
    submit,
    target_scheduler,
)
from ezpz_tui.core.runs.queued import (
    listed_runs,
    parse_qstat_jobs,
    parse_squeue,
    queued_runs,
)
from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.core.runs.store import RunStore
from runtime.rundir import State
from tests.fixtures.allocations import aurora
from tests.fixtures.runs import make_run

PY = "/opt/venv/bin/python"


def _none(_: str) -> None:
    return None


def polaris(hosts: int = 2):  # an interactive Polaris job: the plan "just worked" there
    names = tuple(f"x3005c0s{13 + i}b0n0" for i in range(hosts))
    return replace(aurora(hosts), machine="Polaris", hosts=names, accelerators_per_host=4)


def source_run(outputs: Path, **kw) -> Path:
    args = dict(run_id="20261126-100000-000-tp2pp1cp1", state="succeeded", exit_code=0)
    args.update(sizes={"tp": 2}, ranks=8, steps=4, created=time.time() - 60)
    args.update(kw)
    return make_run(outputs, **args)


# --- walltime ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("01:00:00", 3600), ("0:30:00", 1800), ("72:00:00", 259200), ("1-02:03:04", 93784)],
)
def test_walltime_forms(text: str, seconds: int) -> None:
    assert parse_walltime(text) == seconds


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("30", "not HH:MM:SS"),
        ("30:00", "not HH:MM:SS"),  # PBS and Slurm read MM:SS; refused rather than guessed
        ("1h", "not HH:MM:SS"),
        ("01:60:00", "minutes and seconds"),
        ("00:00:00", "no time at all"),
        ("", "not HH:MM:SS"),
    ],
)
def test_bad_walltimes_say_the_form(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_walltime(text)


def test_walltime_is_written_as_each_scheduler_reads_it() -> None:
    assert format_walltime(259200, "PBS") == "72:00:00"
    assert format_walltime(93784, "SLURM") == "1-02:03:04"
    assert format_walltime(1800, "SLURM") == "00:30:00"


# --- the job a run becomes, and its script -------------------------------------------------


def test_a_polaris_run_becomes_a_pbs_script_with_alcf_directives(tmp_path: Path) -> None:
    outputs = tmp_path / "out"
    run = source_run(outputs)
    source, record = plan_source(RunStore(outputs), None)  # the newest succeeded run
    assert source == run.name
    request = BatchRequest(walltime_s=5400, queue="debug", account="proj")
    job = prepare(record, source, request, polaris(), outputs, _none, PY)
    assert (job.scheduler, job.nodes, job.ppn) == ("PBS", 2, 4)  # as many nodes as the run
    script = render(job)
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash -l"
    for directive in (
        "-l select=2:system=polaris",
        "-l place=scatter",
        "-l walltime=01:30:00",
        "-l filesystems=home:eagle",
        "-q debug",
        "-A proj",
        f"-o {outputs}/.batch/{job.submission}.out",
    ):
        assert f"#PBS {directive}" in lines, script
    assert f"export {SUBMISSION_VAR}={job.submission}" in lines
    assert "cd /home/user/project || exit 2" in lines  # where the run was launched from
    (launch,) = [line for line in lines if line.startswith("exec ")]
    argv = shlex.split(launch)[1:]
    assert argv[:4] == [PY, "-m", "ezpz_tui", "launch"]
    assert "--tp=2" in argv and "--ppn=4" in argv and "--launcher=auto" in argv
    assert argv[argv.index("--") + 1 :] == ["python", "-m", "runtime.examples.train"]
    assert job.sizes == {"tp": 2, "pp": 1, "cp": 1, "world_size": 8, "dp": 4}
    assert any(line.startswith("# its launcher ran: /opt/cray/pals") for line in lines)


def test_aurora_selects_plain_nodes_on_flare(tmp_path: Path) -> None:
    record = {"plan": {"ppn": 12, "command": ["python", "train.py"]}, "hosts": ["a"]}
    job = prepare(record, "plan.toml", BatchRequest(nodes=4), aurora(2), tmp_path, _none, PY)
    lines = render(job).splitlines()
    assert "#PBS -l select=4" in lines and "#PBS -l filesystems=home:flare" in lines
    assert not any(line.startswith(("#PBS -q", "#PBS -A")) for line in lines)  # not asked


def test_words_reach_the_job_unchanged_however_odd(tmp_path: Path) -> None:
    odd = ["python", "train.py", "--name", "a b; $(rm -rf ~) `x` 'q'"]
    plan = {"ppn": 2, "command": odd, "env": {"NOTE": "two words"}}
    plan["launcher_args"] = ["--cpu-bind=none"]
    record = {"plan": plan, "scheduler": "SLURM"}
    job = prepare(record, "r", BatchRequest(), replace(aurora(1), scheduler="none"), tmp_path)
    (launch,) = [line for line in render(job).splitlines() if line.startswith("exec ")]
    argv = shlex.split(launch)[1:]
    assert argv[argv.index("--") + 1 :] == odd
    assert "--env=NOTE=two words" in argv and "--launcher-arg=--cpu-bind=none" in argv


def test_a_slurm_script_asks_for_tasks_and_gpus_per_node(tmp_path: Path) -> None:
    alloc = replace(aurora(1), scheduler="SLURM", machine="Perlmutter", accelerator_kind="cuda")
    alloc = replace(alloc, accelerators_per_host=4)
    record = {"plan": {"ppn": 4, "command": ["python", "t.py"]}}
    request = BatchRequest(nodes=2, walltime_s=93784, queue="regular", account="m1234")
    lines = render(prepare(record, "r", request, alloc, tmp_path, _none, PY)).splitlines()
    assert lines[0] == "#!/bin/bash"
    for directive in (
        "--nodes=2",
        "--ntasks-per-node=4",
        "--gpus-per-node=4",
        "--time=1-02:03:04",
        "--partition=regular",
        "--account=m1234",
    ):
        assert f"#SBATCH {directive}" in lines


def test_a_plan_that_cannot_fit_the_nodes_asked_for_is_refused(tmp_path: Path) -> None:
    record = {"plan": {"ppn": 4, "tp": 3, "command": ["python", "t.py"]}}
    with pytest.raises(SubmitError, match="not divisible by tp\\*pp\\*cp = 3"):
        prepare(record, "r", BatchRequest(nodes=1), polaris(), tmp_path, _none, PY)
    with pytest.raises(SubmitError, match="records no \\[plan\\]"):
        prepare({}, "r", BatchRequest(), polaris(), tmp_path, _none, PY)
    with pytest.raises(SubmitError, match="Unknown launch plan key"):
        prepare({"plan": {"tpp": 2}}, "r", BatchRequest(), polaris(), tmp_path, _none, PY)


def test_the_scheduler_comes_from_the_job_the_run_or_the_tool_on_path() -> None:
    here = replace(aurora(1), scheduler="none")
    assert target_scheduler(aurora(1), "SLURM", _none) == "PBS"
    assert target_scheduler(here, "SLURM", _none) == "SLURM"
    sbatch_only = {"sbatch": "/usr/bin/sbatch"}.get
    assert target_scheduler(here, "none", sbatch_only) == "SLURM"
    with pytest.raises(SubmitError, match="neither qsub nor sbatch"):
        target_scheduler(here, None, _none)


def test_plan_sources_name_what_is_wrong(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "out")
    with pytest.raises(SubmitError, match="has succeeded yet"):
        plan_source(store, None)
    with pytest.raises(SubmitError, match="no run 'nope'"):
        plan_source(store, "nope")
    plan = tmp_path / "plan.toml"
    plan.write_text('tp = 2\ncommand = ["python", "t.py"]\n')
    assert plan_source(store, str(plan))[1] == {"plan": {"tp": 2, "command": ["python", "t.py"]}}
    plan.write_text("tp = [")
    with pytest.raises(SubmitError, match="cannot read a plan"):
        plan_source(store, str(plan))


# --- submitting ----------------------------------------------------------------------------


def _qsub(tmp_path: Path, body: str) -> str:
    """A stand-in for PBS's qsub (PBS cannot run here): answers as the PBS server would."""
    path = tmp_path / "qsub"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return str(path)


def test_submit_writes_the_script_and_records_the_job(tmp_path: Path) -> None:
    outputs = tmp_path / "out"
    _, record = plan_source(RunStore(outputs), str(source_run(outputs)))
    assert last_request(outputs) == BatchRequest()  # nothing submitted yet: the defaults
    request = BatchRequest(walltime_s=1800, queue="debug", account="proj")
    job = prepare(record, "r", request, polaris(), outputs, _none, PY)
    qsub = _qsub(tmp_path, 'cat "$1" > "$1.seen"; echo 777.polaris-pbs-01.hsn.cm.polaris')
    done = submit(job, render(job), {"qsub": qsub}.get)
    assert done.job_id == "777.polaris-pbs-01.hsn.cm.polaris"
    assert Path(f"{done.script}.seen").read_text() == render(job)  # qsub got the script
    saved = json.loads(done.record.read_text())
    assert saved["job_id"] == done.job_id and saved["submission"] == job.submission
    assert saved["sizes"]["world_size"] == 8 and saved["scheduler"] == "PBS"
    # The TUI's b, with no options to type, asks for what was asked last time.
    assert last_request(outputs) == request


def test_a_refused_or_impossible_submission_leaves_nothing_queued(tmp_path: Path) -> None:
    record = {"plan": {"ppn": 4, "command": ["python", "t.py"]}}
    job = prepare(record, "r", BatchRequest(), polaris(), tmp_path / "out", _none, PY)
    with pytest.raises(SubmitError, match="qsub is not on PATH"):
        submit(job, render(job), _none)
    qsub = _qsub(tmp_path, "echo 'qsub: Job exceeds queue resource limits' >&2; exit 188")
    with pytest.raises(SubmitError, match="qsub refused the job: qsub: Job exceeds queue"):
        submit(job, render(job), {"qsub": qsub}.get)
    assert list((tmp_path / "out" / ".batch").iterdir()) == []


def test_job_ids_as_the_tools_print_them() -> None:
    assert parse_job_id("SLURM", "1234;cluster\n") == "1234"
    assert parse_job_id("PBS", "5678.aurora-pbs-0001.hostmgmt.cm.aurora.alcf.anl.gov\n") == (
        "5678.aurora-pbs-0001.hostmgmt.cm.aurora.alcf.anl.gov"
    )
    assert parse_job_id("SLURM", "\n") is None


# --- from queued to the run ----------------------------------------------------------------


def _queue_one(outputs: Path, job_id: str = "77", scheduler: str = "SLURM") -> str:
    """A job record as submit leaves it; returns its submission."""
    folder = outputs / ".batch"
    folder.mkdir(parents=True, exist_ok=True)
    submission = f"batch-20261126-120000-{job_id}"
    record = {"submission": submission, "job_id": job_id, "scheduler": scheduler}
    record.update(submitted=time.time(), sizes={"tp": 1, "world_size": 2}, output="o.out")
    (folder / f"{submission}.json").write_text(json.dumps(record))
    return submission


def test_a_job_is_listed_as_the_scheduler_has_it_until_its_run_appears(tmp_path: Path) -> None:
    outputs = tmp_path / "out"
    source_run(outputs)
    store = RunMaker(outputs)  # a reader's store, and the launch that makes the job's run
    submission = _queue_one(outputs)
    asked: list[tuple[str, list[str]]] = []

    def says(state: State | None):
        def ask(scheduler: str, jobs: list[str]):
            asked.append((scheduler, jobs))
            return None if state is None else {"77": state}

        return ask

    rows = listed_runs(store, says(State.QUEUED))
    assert (rows[0].run_id, rows[0].state, rows[0].queued) == (submission, State.QUEUED, True)
    assert rows[0].job_id == "77" and rows[0].world_size == 2 and len(rows) == 2
    assert asked == [("SLURM", ["77"])]
    assert listed_runs(store, says(State.RUNNING))[0].state == State.RUNNING
    assert listed_runs(store, says(None))[0].state == State.QUEUED  # cannot ask: still queued

    # The job starts: its launch makes a run recording the submission. From then on the run
    # is listed, once, and the scheduler is not asked about the job any more.
    run = store.create({"command": ["t"]}, {"tp": 1}, meta={"submission": submission})
    asked.clear()
    rows = listed_runs(store, says(State.RUNNING))
    assert [r.path for r in rows if r.submission == submission] == [run]
    assert not any(r.queued for r in rows) and asked == []
    assert read_run_toml(run)["submission"] == submission


def test_a_job_that_ended_without_a_run_is_lost_and_not_asked_again(tmp_path: Path) -> None:
    outputs = tmp_path / "out"
    _queue_one(outputs, "88")
    calls = []

    def gone(scheduler: str, jobs: list[str]):
        calls.append(jobs)
        return {}

    (row,) = queued_runs(outputs, [], gone)
    assert row.state == State.LOST and "ended before its run began" in (row.reason or "")
    assert "o.out" in (row.reason or "")
    (again,) = queued_runs(outputs, [], gone)
    assert again.state == State.LOST and calls == [["88"]]


def test_broken_records_are_passed_by(tmp_path: Path) -> None:
    folder = tmp_path / ".batch"
    folder.mkdir()
    (folder / "a.json").write_text("{not json")
    (folder / "b.json").write_text('["a list"]')
    assert queued_runs(tmp_path, [], lambda s, j: {}) == []


def test_scheduler_answers_are_read_as_queued_or_running() -> None:
    states = parse_squeue("12 PENDING\n13 RUNNING\n14 COMPLETING\n")
    assert states == {"12": State.QUEUED, "13": State.RUNNING, "14": State.RUNNING}
    qstat = {
        "Jobs": {
            "5.pbs-01.hsn": {"job_state": "Q"},
            "6.pbs-01.hsn": {"job_state": "R"},
            "7.pbs-01.hsn": {"job_state": "F"},
        }
    }
    assert parse_qstat_jobs(json.dumps(qstat)) == {"5": State.QUEUED, "6": State.RUNNING}
    assert parse_qstat_jobs("qstat: Unknown Job Id") is None


def test_the_scheduler_is_asked_at_most_every_few_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The TUI lists runs every 2 s; squeue (a stand-in here, counting its calls) is asked
    again only after ASK_EVERY_S, or for other jobs."""
    from ezpz_tui.core.runs import queued

    calls = tmp_path / "calls"
    squeue = tmp_path / "squeue"
    squeue.write_text(f'#!/bin/sh\necho x >> "{calls}"\necho "41 PENDING"\necho "42 RUNNING"\n')
    squeue.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    monkeypatch.setattr(queued, "_answers", {})
    first = queued.job_states("SLURM", ["41", "42"])
    assert first == {"41": State.QUEUED, "42": State.RUNNING}
    assert queued.job_states("SLURM", ["41", "42"]) == first
    assert calls.read_text().count("x") == 1
    queued.job_states("SLURM", ["41"])  # another question
    monkeypatch.setattr(queued, "ASK_EVERY_S", 0.0)
    queued.job_states("SLURM", ["41"])  # the answer has aged
    assert calls.read_text().count("x") == 3
