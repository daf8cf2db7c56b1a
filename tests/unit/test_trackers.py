"""The trackers behind History: which are asked for, who feeds them, the CSV file, a tracker
that fails, and the buffered JSONL (flushed within FLUSH_S, whole at close and at exit)."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from runtime import trackers
from runtime.history import FLUSH_S, History
from runtime.rundir import RunDir
from tests.fixtures.runs import wait_for


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open() as fh:
        return list(csv.DictReader(fh))


def test_requested_names_come_from_the_argument_else_the_environment(monkeypatch) -> None:
    monkeypatch.setenv(trackers.TRACKERS_VAR, "WandB, csv,,csv tensorboard")
    assert trackers.requested() == ["wandb", "csv", "tensorboard"]
    assert trackers.requested(["mlflow"]) == ["mlflow"]
    assert trackers.requested("") == []


def test_csv_from_rank_0_only(tmp_path: Path) -> None:
    with History(tmp_path, rank=1, trackers=["csv"]) as other:
        other.record(0, {"loss": 9.0})
    assert other.trackers == [] and not RunDir(tmp_path).metrics_csv.exists()
    with History(tmp_path, rank=0, trackers="csv") as h:
        for step in range(3):
            h.record(step, {"loss": 3.0 - step, "lr": 0.1}, dt=0.5, samples=2)
    rows = _rows(RunDir(tmp_path).metrics_csv)
    assert [r["step"] for r in rows] == ["0", "1", "2"]
    assert [float(r["loss"]) for r in rows] == [3.0, 2.0, 1.0]
    assert float(rows[0]["samples_per_s"]) == 4.0 and "rank" not in rows[0]


def test_csv_of_all_ranks_has_one_header_and_a_rank_column(tmp_path: Path) -> None:
    histories = [History(tmp_path, rank=r, trackers=["csv"], all_ranks=True) for r in (0, 1)]
    for step in range(2):
        for rank, h in enumerate(histories):
            h.record(step, {"loss": 10.0 * rank + step})
    for h in histories:
        h.close()
    text = RunDir(tmp_path).metrics_csv.read_text()
    assert text.count("rank,step") == 1 and text.startswith("rank,step,timestamp,loss\n")
    got = sorted((r["rank"], r["step"], r["loss"]) for r in _rows(RunDir(tmp_path).metrics_csv))
    assert got == [("0", "0", "0.0"), ("0", "1", "1.0"), ("1", "0", "10.0"), ("1", "1", "11.0")]


def test_a_tracker_whose_import_raises_is_one_line_and_the_run_goes_on(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    with History(tmp_path, rank=0, trackers=["wandb", "csv"]) as h:
        h.record(0, {"loss": 1.0})
    err = capsys.readouterr().err.splitlines()
    off = [line for line in err if "wandb" in line]
    why = "ModuleNotFoundError: import of wandb halted; None in sys.modules"
    assert off == [f"ezpz: tracker wandb is off: {why}"]
    assert [t.name for t in h.trackers] == [] and RunDir(tmp_path).metrics_csv.exists()
    assert json.loads(h.path.read_text())["metrics"] == {"loss": 1.0}


class _Raises:
    name, where = "boom", "nowhere"

    def __init__(self, *_args: object) -> None:
        self.logged = 0

    def log(self, step: int, metrics: object, timestamp: float) -> None:
        self.logged += 1
        raise ConnectionError("server went away\nsecond line")

    def flush(self) -> None: ...

    def close(self) -> None:
        raise AssertionError("a dropped tracker is not closed")


def test_a_tracker_that_raises_while_logging_is_dropped_with_one_line(
    tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setitem(trackers.OPENERS, "boom", _Raises)
    with History(tmp_path, rank=0, trackers=["boom"]) as h:
        tracker = h.trackers[0]
        h.record(0, {"loss": 1.0})
        h.flush()
        h.record(1, {"loss": 0.5})
    lines = [line for line in capsys.readouterr().err.splitlines() if "boom" in line]
    assert lines[1:] == [
        "ezpz: tracker boom stopped: ConnectionError: server went away "
        "(the run goes on; the JSONL has it all)"
    ]
    assert tracker.logged == 1 and len(h.path.read_text().splitlines()) == 2


def test_an_unknown_tracker_is_named(tmp_path: Path, capsys) -> None:
    with History(tmp_path, rank=0, trackers=["neptune"]) as h:
        h.record(0, {"loss": 1.0})
    assert "tracker 'neptune' is unknown" in capsys.readouterr().err


def test_records_reach_the_file_within_the_flush_interval(tmp_path: Path) -> None:
    h = History(tmp_path, rank=0)
    h.record(0, {"loss": 1.0})
    # The thread flushes it after FLUSH_S (0.5 s here); waited for up to 20 times that.
    deadline = time.monotonic() + 20 * FLUSH_S
    while not h.path.read_bytes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert h.path.read_bytes().count(b"\n") == 1  # flushed by the thread, no close needed
    h.record(1, {"loss": 0.5})
    h.close()
    assert h.path.read_bytes().count(b"\n") == 2


def test_exit_without_close_writes_everything_and_imports_no_tracker(tmp_path: Path) -> None:
    code = (
        "import sys; from runtime.history import History\n"
        "h = History(sys.argv[1], rank=0)\n"
        "for i in range(1000): h.record(i, {'loss': 1.0 / (i + 1)})\n"
        "heavy = {'torch', 'wandb', 'mlflow', 'tensorboard', 'tensorboardX', 'numpy'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
        "raise SystemExit(3)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 3 and out.stdout.strip() == "[]", out.stderr
    assert RunDir(tmp_path).metrics(0).read_bytes().count(b"\n") == 1000


KEPT_S = 12 * FLUSH_S


def test_a_killed_rank_loses_at_most_the_last_flush_interval(tmp_path: Path) -> None:
    code = (
        "import sys, time; from runtime.history import History\n"
        "h = History(sys.argv[1], rank=0)\n"
        "print('ready', flush=True)\n"
        "i = 0\n"
        "while True:\n"
        "    h.record(i, {'t': time.time()}); i += 1; time.sleep(0.01)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    path = RunDir(tmp_path).metrics(0)

    def flushed_span() -> float:
        times = [json.loads(line)["metrics"]["t"] for line in path.read_bytes().splitlines()]
        return times[-1] - times[0] if times else 0.0

    # Killed once the file shows KEPT_S of recording, so that a rank losing more than the
    # bound below would show it.
    wait_for(lambda: flushed_span() >= KEPT_S, 120, f"{KEPT_S} s of records flushed")
    os.kill(proc.pid, signal.SIGKILL)
    killed = time.time()
    proc.wait()
    lines = path.read_text().splitlines()
    last = json.loads(lines[-1])["metrics"]["t"]
    # What was recorded since the last flush: about FLUSH_S (0.5 s) here, allowed 10 times that
    # for a loaded machine's scheduling of the flushing thread.
    assert killed - last <= 10 * FLUSH_S


def test_wandb_server_on_a_closed_port_is_unreachable(monkeypatch) -> None:
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # the discard port: refused
    assert trackers.wandb_reachable(timeout=1.0) is False


def test_flat_params_turns_the_plan_into_strings() -> None:
    plan = {"plan": {"tp": 2, "command": ["python", "-m", "x"], "env": {"A": "1"}}}
    assert trackers.flat_params(plan) == {
        "plan.tp": "2",
        "plan.command": "python -m x",
        "plan.env.A": "1",
    }
