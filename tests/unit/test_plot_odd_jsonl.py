"""``ezpz-tui plot`` on every odd JSONL: it draws what is numeric and explains the rest.

Run in-process through ``cli.main`` (the same code path as the command, without a subprocess per
case); the files are written as Python's json writes them, bare ``Infinity``/``NaN`` included.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from ezpz_tui.cli import main
from ezpz_tui.core.watching.metrics.one_metric import read_metric
from runtime.history import load_run_metrics

RUN = "20261122-103105-000-tp1pp1cp1"


def write_run(outputs: Path, records: list[dict[str, Any]], rank: int = 0) -> Path:
    run = outputs / RUN
    (run / "metrics").mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(r) + "\n" for r in records)  # allow_nan: bare Infinity, NaN
    with (run / "metrics" / f"rank-{rank:05d}.jsonl").open("a") as fh:
        fh.write(lines)
    return run


def plot(outputs: Path, metric: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["plot", RUN, "--metric", metric, "--outputs", str(outputs)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def rec(at: int | None, rank: int = 0, /, **metrics: Any) -> dict[str, Any]:
    """One record at step ``at`` (none when None) of ``rank``."""
    out: dict[str, Any] = {"timestamp": 1.0, "rank": rank, "metrics": metrics}
    if at is not None:
        out["step"] = at
    return out


def test_non_finite_values_are_skipped_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = [1.0, math.inf, 0.5, -math.inf, math.nan, 0.25, "NaN", "Infinity"]
    write_run(tmp_path, [rec(i, loss=v) for i, v in enumerate(values)])
    assert "Infinity}" in (tmp_path / RUN / "metrics" / "rank-00000.jsonl").read_text()
    code, out, err = plot(tmp_path, "loss", capsys)
    assert code == 0
    assert f"loss — {RUN} (1 ranks)" in out and len(out.splitlines()) > 10
    assert err.splitlines() == ["ezpz-tui: 5 non-finite values of loss skipped"]


def test_a_metric_named_step(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = write_run(tmp_path, [rec(i, step=float(i * 10), loss=1.0 / (i + 1)) for i in range(5)])
    code, out, err = plot(tmp_path, "step", capsys)
    assert (code, err) == (0, "")
    assert f"step — {RUN}" in out
    assert plot(tmp_path, "loss", capsys)[0] == 0
    ds = load_run_metrics(run)  # the shared reader no longer refuses it either
    assert ds["metrics/step"].values.tolist() == [[0.0, 10.0, 20.0, 30.0, 40.0]]
    assert ds["metrics/step"].attrs["written_as"] == "step"
    assert ds["step"].values.tolist() == [0, 1, 2, 3, 4]


def test_strings_lists_null_are_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = [1.0, "warmup", [1, 2], None, 2.0, "n/a"]
    write_run(tmp_path, [rec(i, loss=v) for i, v in enumerate(values)])
    code, _, err = plot(tmp_path, "loss", capsys)
    assert code == 0
    assert err.splitlines() == [
        "ezpz-tui: 4 values of loss skipped: not numbers (list: 1, null: 1, text: 2)"
    ]


def test_only_text_is_explained_not_drawn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path, [rec(i, phase="train", loss=1.0) for i in range(3)])
    code, out, err = plot(tmp_path, "phase", capsys)
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        "ezpz-tui: 3 values of phase skipped: not numbers (text: 3)",
        f"ezpz-tui: no value of phase in {RUN} is a finite number",
    ]


def test_booleans_are_drawn_as_one_and_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path, [rec(i, overflow=i % 2 == 0) for i in range(4)])
    code, out, err = plot(tmp_path, "overflow", capsys)
    assert code == 0 and "overflow —" in out
    assert err.splitlines() == ["ezpz-tui: 4 true/false values of overflow drawn as 1/0"]
    assert read_metric(tmp_path / RUN, "overflow").values == {
        0: [1.0],
        1: [0.0],
        2: [1.0],
        3: [0.0],
    }


def test_nested_tables_point_at_their_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path, [rec(i, opt={"lr": 0.1 / (i + 1), "mom": 0.9}) for i in range(3)])
    code, _, err = plot(tmp_path, "opt", capsys)
    assert code == 2
    assert (
        err.splitlines()[-1] == f"ezpz-tui: opt in {RUN} is a table; metrics in it: opt/lr, opt/mom"
    )
    code, out, _ = plot(tmp_path, "opt/lr", capsys)
    assert code == 0 and "opt/lr —" in out


def test_missing_steps_and_garbage_are_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path, [rec(None, loss=3.0), rec(None, loss=2.0), rec(10, loss=1.0)])
    with (run / "metrics" / "rank-00000.jsonl").open("a") as fh:
        fh.write("not json\n[1, 2]\n{}\n")
    code, _, err = plot(tmp_path, "loss", capsys)
    assert code == 0
    assert err.splitlines() == [
        "ezpz-tui: 2 records without a step numbered in order",
        "ezpz-tui: 3 unreadable lines skipped",
    ]
    assert read_metric(run, "loss").values == {0: [3.0], 1: [2.0], 10: [1.0]}


def test_a_torn_last_line_is_not_garbage_but_a_complete_one_counts(tmp_path: Path) -> None:
    run = write_run(tmp_path, [rec(0, loss=3.0)])
    path = run / "metrics" / "rank-00000.jsonl"
    with path.open("a") as fh:
        fh.write('{"rank": 0, "step": 1, "metrics": {"lo')  # a live rank mid-write
    series = read_metric(run, "loss")
    assert (series.values, series.garbage) == ({0: [3.0]}, 0)
    path.write_text(path.read_text().rsplit("\n", 1)[0] + "\n" + json.dumps(rec(1, loss=2.0)))
    assert read_metric(run, "loss").values == {0: [3.0], 1: [2.0]}  # finished, no newline


def test_an_absent_metric_lists_the_ones_there(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path, [rec(i, loss=1.0, lr=0.1, opt={"beta": 0.9}) for i in range(2)])
    code, out, err = plot(tmp_path, "los", capsys)
    assert (code, out) == (2, "")
    assert err == f"ezpz-tui: no metric 'los' in {RUN}; metrics: loss, lr, opt/beta\n"


def test_values_too_wide_for_the_chart_are_explained(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_run(tmp_path, [rec(0, loss=1e308), rec(1, loss=-1e308), rec(2, loss=0.0)])
    code, out, err = plot(tmp_path, "loss", capsys)
    assert (code, out) == (2, "")
    assert err == "ezpz-tui: cannot draw loss: its values span -1e+308 to 1e+308\n"


def test_several_ranks_draw_min_mean_max(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for rank in range(3):
        write_run(tmp_path, [rec(i, rank, loss=float(rank + i)) for i in range(4)], rank)
    series = read_metric(tmp_path / RUN, "loss")
    assert series.ranks == {0, 1, 2}
    assert series.values[3] == [3.0, 4.0, 5.0]
    code, out, err = plot(tmp_path, "loss", capsys)
    assert (code, err) == (0, "")
    assert "(3 ranks)" in out and "max" in out and "mean over ranks" in out
