"""The compare core on run directories written here: figures, ranking, best marks, what
changed, relatives and the sweep plan, odd input included. No process is started."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pytest

from ezpz_tui.core.comparing.compare import compare
from ezpz_tui.core.comparing.facts import read_facts
from ezpz_tui.core.comparing.relatives import relatives_of
from ezpz_tui.core.comparing.sweep import plan_sweep, with_steps
from ezpz_tui.core.comparing.sweep_record import (
    SweepRecord,
    latest_sweep,
    new_sweep,
    read_sweep,
    write_sweep,
)
from ezpz_tui.core.launching.plan import LaunchPlan, demo_command
from ezpz_tui.core.launching.processes import supervised_here
from ezpz_tui.core.watching.numbers import read_numbers, warmup
from ezpz_tui.core.words import short_number
from runtime import records
from runtime.rundir import RunDir, RunState, State, sweep_record, write_state
from tests.fixtures.allocations import aurora
from tests.fixtures.runs import make_run

T0 = 1_763_800_000.0


def _run(
    outputs: Path,
    name: str,
    tp: int = 1,
    steps: int = 20,
    parent: str | None = None,
    state: str = "succeeded",
) -> Path:
    return make_run(
        outputs,
        run_id=f"20261126-1000{name}-000-tp{tp}pp1cp1",
        state=state,
        exit_code=0 if state == "succeeded" else None,
        sizes={"tp": tp},
        ranks=4,
        steps=steps,
        created=T0,
        parent=parent,
    )


def _metrics(run_dir: Path, rank: int, rows: Sequence[dict[str, object]], dt: float = 0.5) -> None:
    """Replace ``rank``'s records with ``rows`` (one per step, a record every ``dt`` s)."""
    with open(RunDir(run_dir).metrics(rank), "wb") as fh:
        for step, metrics in enumerate(rows):
            plain = {k: records.to_plain(v) for k, v in metrics.items()}
            fh.write(records.encode(rank, step, plain, T0 + 10 + step * dt))


def _speed(run_dir: Path, tokens: float, steps: int = 20, ranks: int = 1) -> None:
    for rank in range(ranks):
        rows = [{"loss": 3.0 - 0.1 * s, "dt": 0.2, "tokens_per_s": tokens} for s in range(steps)]
        _metrics(run_dir, rank, rows)


# --- one run's figures -------------------------------------------------------------------------


def test_warm_up_is_left_out_of_the_speed_medians(tmp_path: Path) -> None:
    run = _run(tmp_path, "00")
    slow = [{"dt": 5.0, "tokens_per_s": 10.0, "samples_per_s": 1.0, "loss": 4.0}] * 3
    fast = [{"dt": 0.1, "tokens_per_s": 500.0, "samples_per_s": 8.0, "loss": 2.0}] * 27
    _metrics(run, 0, slow + fast)
    assert warmup(30) == 3
    numbers = read_numbers(run)
    assert (numbers.records, numbers.steady, numbers.last_step) == (30, 27, 29)
    assert numbers.step_time_s == 0.1 and numbers.step_time_from == "dt"
    assert (numbers.tokens_per_s, numbers.samples_per_s) == (500.0, 8.0)


def test_a_resumed_runs_restore_is_its_own_row_not_a_step_time(tmp_path: Path) -> None:
    parent, child = _run(tmp_path, "00"), _run(tmp_path, "01", tp=2, parent="x")
    _speed(parent, 100.0)
    resumed = [{"loss": 2.0, "dt": 0.2, "tokens_per_s": 100.0} for _ in range(20)]
    resumed[0]["ckpt_load_s"] = 7.5  # runtime.checkpoint's, on the first step after the load
    _metrics(child, 0, resumed)
    assert read_numbers(child).restore_s == 7.5 and read_numbers(child).step_time_s == 0.2
    plain = compare([parent])
    assert plain.row("restore_s") is None  # no run compared resumed: no row
    both = compare([parent, child])
    row = both.row("restore_s")
    assert row is not None and row.label == "restore s"
    assert sorted(row.values, key=lambda v: v is None) == [7.5, None]


def test_a_relaunched_runs_restart_is_a_row_and_its_parts_are_in_the_json(tmp_path: Path) -> None:
    """The child records its handover (asked at T0, saved 1.5 s later, the parent gone 0.5 s
    after); its first step ends at T0 + 10 after 0.5 s, 2 s of them after a 2 s load: start is
    what is left, 10 - 1.5 - 0.5 - 2 - 0.5 = 5.5 s."""
    from ezpz_tui.cli.comparing import as_json
    from ezpz_tui.core.comparing.columns import figure_columns
    from ezpz_tui.core.launching.making import update_run_meta

    parent, child = _run(tmp_path, "00"), _run(tmp_path, "01", tp=2, parent="x")
    _speed(parent, 100.0)
    resumed = [{"loss": 2.0, "dt": 0.5, "tokens_per_s": 100.0} for _ in range(20)]
    resumed[0]["ckpt_load_s"] = 2.0
    _metrics(child, 0, resumed)
    handover = {"parent": parent.name, "asked": T0, "saved": T0 + 1.5, "step": 389}
    update_run_meta(child, {"handover": {**handover, "stopped": T0 + 2.0}})
    restart = read_facts(child).restart
    assert restart is not None and restart.parts() == {
        "save_s": 1.5,
        "stop_s": 0.5,
        "start_s": 5.5,
        "load_s": 2.0,
        "first_step_s": 0.5,
    }
    assert restart.total_s == 10.0
    assert restart.line() == (
        f"restart 10.0 s after {parent.name}: save 1.5 · stop 0.5 · start 5.5 · load 2.0 · "
        "first step 0.5"
    )
    assert compare([parent]).row("restart_s") is None  # no child compared: no row
    both = compare([parent, child])
    row = both.row("restart_s")
    assert row is not None and sorted(row.values, key=lambda v: v is None) == [10.0, None]
    assert "restart_s" in [c.key for c in figure_columns(both)]
    runs = {r["run_id"]: r for r in as_json(both)["runs"]}
    assert runs[child.name]["figures"]["restart_s"] == 10.0
    assert runs[child.name]["restart"] == restart.parts() and runs[parent.name]["restart"] is None


def test_step_time_from_timestamps_when_no_dt(tmp_path: Path) -> None:
    run = _run(tmp_path, "00")
    _metrics(run, 0, [{"loss": 1.0}] * 12, dt=0.75)
    numbers = read_numbers(run)
    assert numbers.step_time_s == pytest.approx(0.75)
    assert numbers.step_time_from == "timestamps"
    assert numbers.tokens_per_s is None and numbers.samples_per_s is None


def test_time_to_first_step_counts_from_the_run_start(tmp_path: Path) -> None:
    facts = read_facts(_run(tmp_path, "00"))
    start = facts.state.start
    assert start is not None and facts.numbers.first_timestamp is not None
    assert facts.first_step_s == pytest.approx(facts.numbers.first_timestamp - start)
    assert 6 < facts.first_step_s < 7  # make_run: STARTUP_S after the rank starts


def test_peak_memory_per_rank_in_gib(tmp_path: Path) -> None:
    run = _run(tmp_path, "00")
    for rank in range(4):
        peaks = [(rank + 1) * 2**30 * f for f in (0.5, 1.0, 0.75)]
        _metrics(run, rank, [{"loss": 1.0, "max_memory_allocated": p} for p in peaks])
    numbers = read_numbers(run)
    assert numbers.memory_metric == "max_memory_allocated"
    assert numbers.peak_mem_gb == ((0, 1.0), (1, 2.0), (2, 3.0), (3, 4.0))
    assert numbers.peak_mem_max_gb == 4.0


def test_no_memory_metric_reads_rank_0_only(tmp_path: Path) -> None:
    run = _run(tmp_path, "00")
    RunDir(run).metrics(1).write_bytes(b"not json at all\n")  # never read: no memory metric
    numbers = read_numbers(run)
    assert numbers.peak_mem_gb == () and numbers.peak_mem_max_gb is None
    assert numbers.garbage == 0


def test_a_nan_final_loss_is_kept_and_best_loss_is_finite(tmp_path: Path) -> None:
    run = make_run(
        tmp_path,
        run_id="20261126-100000-000-tp1pp1cp1",
        state="failed",
        exit_code=1,
        failing_rank=0,
        sizes={},
        ranks=2,
        steps=20,
        created=T0,
    )
    numbers = read_numbers(run)
    assert numbers.final_loss is not None and math.isnan(numbers.final_loss)
    assert numbers.best_loss is not None and math.isfinite(numbers.best_loss)


def test_odd_input_never_raises(tmp_path: Path) -> None:
    run = _run(tmp_path, "00")
    good = records.encode(0, 0, {"loss": 2.0, "dt": 0.1}, T0)
    odd = b'garbage\n{"metrics": [1, 2]}\n\xff\xfe\n' + good + b'{"timestamp": 1, "rank'
    RunDir(run).metrics(0).write_bytes(odd)
    RunDir(run).state_json.write_text("{not json")
    RunDir(run).run_toml.write_text("= broken toml")
    facts = read_facts(run)
    assert facts.state.state == State.UNKNOWN
    assert facts.layout.tp is None and facts.layout.label == "tp? pp? cp? dp?"
    assert facts.numbers.records == 1 and facts.numbers.final_loss == 2.0
    assert facts.numbers.garbage >= 3
    assert any("unreadable metric lines" in note for note in facts.notes)
    assert any("not valid TOML" in note for note in facts.notes)


def test_a_directory_with_nothing_in_it(tmp_path: Path) -> None:
    facts = read_facts(tmp_path / "nothing-here")
    assert facts.numbers.records == 0 and facts.first_step_s is None
    assert "no metric records" in facts.notes


def test_ezpz_layout_without_steps(tmp_path: Path) -> None:
    run = tmp_path / "ezpz-run"
    run.mkdir()
    lines = [json.dumps({"timestamp": T0 + i, "loss": 5.0 - i, "dt": 0.25}) for i in range(10)]
    (run / "metrics-0.jsonl").write_text("\n".join(lines) + "\n")
    numbers = read_numbers(run)
    assert (numbers.records, numbers.last_step) == (10, 9)
    assert numbers.step_time_s == 0.25 and numbers.final_loss == -4.0


def test_a_running_run_is_partial_and_says_so(tmp_path: Path) -> None:
    run = _run(tmp_path, "00")
    write_state(run, supervised_here(RunState(State.RUNNING, start=T0)))
    _speed(run, 100.0, steps=5)
    facts = read_facts(run)
    assert facts.partial and facts.state.state == State.RUNNING
    assert any(note.startswith("running: figures so far (5 steps)") for note in facts.notes)


# --- several runs ------------------------------------------------------------------------------


def test_runs_ranked_by_tokens_per_s_with_the_best_marked(tmp_path: Path) -> None:
    slow, fast, none = _run(tmp_path, "00"), _run(tmp_path, "01", tp=2), _run(tmp_path, "02")
    _speed(slow, 1000.0)
    _speed(fast, 3000.0)
    _metrics(none, 0, [{"loss": 1.0 + s} for s in range(20)])
    comparison = compare([slow, none, fast])
    assert [f.path for f in comparison.runs] == [fast, slow, none]
    tokens = comparison.row("tokens_per_s")
    assert tokens is not None and tokens.values == (3000.0, 1000.0, None)
    assert tokens.best == {0} and "tokens_per_s" in comparison.best_at(0)
    steps = comparison.row("step_time_s")
    assert steps is not None and steps.best == frozenset({0, 1})  # 0.2 s beats 0.5 s gaps


def test_equal_values_name_no_best(tmp_path: Path) -> None:
    comparison = compare([_run(tmp_path, "00"), _run(tmp_path, "01")])
    row = comparison.row("tokens_per_s")
    assert row is not None and row.values == (2048.0, 2048.0) and row.best == frozenset()


def test_loss_is_compared_at_the_last_step_all_runs_reached(tmp_path: Path) -> None:
    long, short = _run(tmp_path, "00", steps=30), _run(tmp_path, "01", steps=12)
    comparison = compare([long, short])
    assert comparison.common_step == 11
    row = comparison.row("loss_at_common_step")
    assert row is not None and row.label == "loss @ step 11"
    by_run = dict(zip((f.path for f in comparison.runs), row.values, strict=True))
    assert by_run[long] == read_numbers(long).loss_at(11)
    assert by_run[short] == read_numbers(short).final_loss


def test_record_changes_old_to_new(tmp_path: Path) -> None:
    old = _run(tmp_path, "00", tp=1)
    new = _run(tmp_path, "01", tp=2, parent=old.name)
    comparison = compare([old, new])
    changes = {c.key: c.values for c in comparison.changes}
    ids = [f.run_id for f in comparison.runs]
    as_run = {key: dict(zip(ids, values, strict=True)) for key, values in changes.items()}
    assert as_run["sizes.tp"] == {old.name: "1", new.name: "2"}
    assert as_run["launch.env.EZPZ_TP"] == {old.name: "1", new.name: "2"}
    assert as_run["parent"] == {old.name: None, new.name: old.name}
    argv = [v for k, v in as_run.items() if k.startswith("launch.argv[")]
    assert argv == [{old.name: "--env=EZPZ_TP=1", new.name: "--env=EZPZ_TP=2"}]
    assert not any(k in changes for k in ("run_id", "created", "created_epoch"))
    assert all("<run-dir>" not in k for k in changes)  # the run's own path is not a change


# --- relatives and sweeps ----------------------------------------------------------------------


def test_parent_chain_nearest_first(tmp_path: Path) -> None:
    a = _run(tmp_path, "00")
    b = _run(tmp_path, "01", parent=a.name)
    c = _run(tmp_path, "02", parent=b.name)
    family = relatives_of(c)
    assert family.parents == (b, a) and family.sweep is None
    assert family.together() == (a, b, c)


def test_a_parent_loop_or_a_missing_parent_ends_the_chain(tmp_path: Path) -> None:
    a = _run(tmp_path, "00", parent="20261126-100001-000-tp1pp1cp1")
    b = _run(tmp_path, "01", parent=a.name)
    assert relatives_of(b).parents == (a,)  # a's parent b -> loop stops
    lone = _run(tmp_path, "02", parent="20991231-000000-000-tp1pp1cp1")
    assert relatives_of(lone).parents == ()


def _sweep(outputs: Path, runs: Sequence[str] = ()) -> SweepRecord:
    blank = SweepRecord("", 0.0, "running", ("tp1 pp1 cp1",), (), tuple(runs), 20, ())
    return new_sweep(outputs, blank)


def test_a_sweep_run_brings_its_siblings(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path)
    runs = [_run(tmp_path, f"0{i}", parent=sweep.sweep_id) for i in range(3)]
    recorded = sweep
    for run in runs:
        recorded = recorded.with_run(run.name)
    write_sweep(tmp_path, recorded)
    family = relatives_of(runs[1])
    assert family.sweep == sweep.sweep_id and family.parents == ()
    assert family.siblings == (runs[0], runs[2])
    assert family.together() == tuple(runs)
    assert latest_sweep(tmp_path) == read_sweep(tmp_path, sweep.sweep_id)


def test_sweep_records_unreadable_or_absent(tmp_path: Path) -> None:
    assert latest_sweep(tmp_path) is None
    sweep = _sweep(tmp_path)
    sweep_record(tmp_path, sweep.sweep_id).write_text("[1, 2")
    assert read_sweep(tmp_path, sweep.sweep_id) is None and latest_sweep(tmp_path) is None
    again = _sweep(tmp_path)
    assert again.sweep_id != sweep.sweep_id


def test_sweep_plan_checks_every_combination() -> None:
    alloc = aurora(1, tiles=4)
    base = LaunchPlan(ppn=4)
    plan = plan_sweep(base, alloc, [1, 2, 2], [1, 2], [1, 3])
    assert [(p.tp, p.pp, p.cp) for p in plan.runs] == [(1, 1, 1), (1, 2, 1), (2, 1, 1), (2, 2, 1)]
    skipped = {(p.tp, p.pp, p.cp): why for p, why in plan.skipped}
    assert set(skipped) == {(1, 1, 3), (1, 2, 3), (2, 1, 3), (2, 2, 3)}
    assert "not divisible" in skipped[(1, 1, 3)]


def test_steps_reach_the_demo_only() -> None:
    assert with_steps(demo_command(), 20)[-2:] == ("--steps", "20")
    assert with_steps(("python", "train.py"), None) == ("python", "train.py")
    with pytest.raises(ValueError, match="built-in demo"):
        with_steps(("python", "train.py"), 20)


def test_short_numbers_fit_a_table_cell() -> None:
    shown = [short_number(v) for v in (None, math.nan, -math.inf, 2048.0, 65536.0, 1.25e7, 0.64891)]
    assert shown == ["-", "nan", "-inf", "2048", "65.5k", "12.5M", "0.6489"]
    assert all(len(text) <= 6 for text in shown)
