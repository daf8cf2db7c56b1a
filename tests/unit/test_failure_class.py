"""Retry or stop: a failed run's class, its evidence and whether to retry, read from run
directories as :func:`tests.fixtures.runs.make_run` writes them (a failed run fails at step
``steps // 2`` on its failing rank with a NaN loss's traceback)."""

from __future__ import annotations

from pathlib import Path

from ezpz_tui.core.watching.failure import Failure, explain
from runtime.rundir import RunDir
from tests.fixtures.runs import make_run

HOST0, HOST1 = (f"x3005c0s{n}b0n0.hsn.cm.polaris.alcf.anl.gov" for n in (13, 19))


def failed(tmp_path: Path, run_id: str, steps: int = 8, **kw: object) -> Path:
    args: dict[str, object] = dict(
        state="failed", exit_code=1, sizes={}, ranks=4, created=1.8e9, failing_rank=2
    )
    return make_run(tmp_path, run_id=run_id, steps=steps, **(args | kw))  # type: ignore[arg-type]


def judged(run_dir: Path, launcher_log: str | None = None) -> Failure:
    if launcher_log is not None:
        RunDir(run_dir).launcher_log.write_text(launcher_log)
    failure = explain(run_dir)
    assert failure is not None and failure.judged is not None
    return failure


def dies(host: str) -> str:
    return f"{host}: shepherd died from signal 9\n"


def test_the_programs_nan_and_out_of_memory_are_the_workloads(tmp_path: Path) -> None:
    failure = judged(failed(tmp_path, "20261125-100000-000"))
    said = failure.judged
    assert said is not None and (said.kind, said.retry, said.step) == ("workload", False, 4)
    [evidence] = said.evidence
    assert evidence.startswith("rank 2 raised ") and "nan" in evidence
    assert failure.to_json()["class"] == "workload"

    oom = "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=1.0.\n"
    run = failed(tmp_path, "20261125-100001-000", crash_signal=9)
    said = judged(run, "srun: error: nid001321: task 2: Killed\n" + oom).judged
    assert said is not None and (said.kind, said.retry) == ("workload", False)
    assert said.evidence == (f"launcher.log:2: {oom.strip()}",)


def test_a_node_fault_is_retried_unless_it_recurs_at_its_parents_step_elsewhere(
    tmp_path: Path,
) -> None:
    parent = failed(tmp_path, "20261125-100000-000")
    first = judged(parent, dies(HOST1)).judged
    assert first is not None and (first.kind, first.retry, first.step) == (
        "infrastructure",
        True,
        4,
    )
    assert first.evidence == (f"launcher.log:1: {dies(HOST1).strip()}",)

    again = failed(tmp_path, "20261125-100100-000", parent=parent.name)
    said = judged(again, dies(HOST0)).judged
    assert said is not None and (said.kind, said.retry) == ("workload", False)
    assert said.why == (
        f"the same node fault at step 4 on {HOST1} and then {HOST0}: it follows the job, not a node"
    )
    assert said.evidence[0] == f"run {parent.name}: {first.evidence[0]}"

    later = failed(tmp_path, "20261125-100200-000", steps=12, parent=parent.name)
    said = judged(later, dies(HOST0)).judged  # step 6: not the parent's step
    assert said is not None and (said.kind, said.retry, said.step) == ("infrastructure", True, 6)
