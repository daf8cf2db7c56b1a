"""Every reader against every file of a run directory made corrupt or unreadable, one at a time.

The run is a real failed 2-rank run (tests/fixtures/finished.py: rank 1 raised, rank 0 was
killed after it) beside a real succeeded one. Each file of the failed run's directory
(docs/run-directory.md) is broken in turn, in a copy:

* ``garbage``: replaced by bytes no writer of ours writes (NUL, control bytes, invalid UTF-8);
* ``truncated``: cut to its first half, as a copy interrupted or a disk that filled leaves it;
* ``unreadable``: mode 000, the readers run as ``nobody`` (``setpriv``), since root reads
  anything; for the TUI, which runs in this process as root, a folder takes the file's place
  (``Is a directory``), which no permission lets anyone read as a file.

Then the readers: ``runs``, ``why``, ``stacks``, ``top``, ``goodput``, ``plot`` and
``compare`` (in one interpreter, tests/fixtures/read_all.py), and ``attach`` through Pilot
(the follower and the monitor behind the Run tab). Each must answer with its documented status
and no traceback, still show what the broken file does not hold (the other run, the other
rank, the rank's log), and say which file could not be used where it would have shown what
it holds (docs/run-directory.md: "A corrupt or unreadable file costs only what it holds").
``hostfile`` is written only when a plan uses fewer hosts than the allocation: this one-host
run has none.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ezpz_tui.core.runs.digest import FROM_FILES
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.logview import LogView
from ezpz_tui.ui.widgets.ranks import RankList
from runtime.rundir import RANK_FOLDERS, RunDir
from tests.fixtures.cli import PY, REPO, base_env
from tests.fixtures.finished import Finished
from tests.pilots import LOCAL, started, text_of, until

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(300)]

GARBAGE = b"\xff\xfe\x00garbage {[\x1b]0;title\x07\x0e\n" + bytes(range(256)) + b"\n\xc3("
FILES = (
    "run.toml",
    "state.json",
    "launcher.log",
    "logs/b0000/rank-00001.log",
    "status/b0000/rank-00001.json",
    "metrics/b0000/rank-00001.jsonl",
    "telemetry/b0000/rank-00001.jsonl",
    "summary.json",
    "metrics.nc",
    "report.md",
)
READ_BY_NOBODY = ("summary.json", "metrics.nc", "report.md")  # written at the end, for people
MODES = ("garbage", "truncated", "unreadable")
SETPRIV = ("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups")

# What a reader must say about the broken file, by file and mode: (reader, stream, words).
# Truncated text (a log, a JSONL whose last line is cut) is still what its writer wrote, less
# its end: nothing to say. Truncated JSON is garbage.
_STATUS_SAYS = {
    "garbage": "status/b0000/rank-00001.json is not a status record",
    "truncated": "status/b0000/rank-00001.json is not a status record",
    "unreadable": "status/b0000/rank-00001.json cannot be read: Permission denied",
}
SAYS: dict[tuple[str, str], list[tuple[str, str, str]]] = {
    ("run.toml", "garbage"): [
        ("runs", "stderr", "run.toml cannot be read: not valid TOML"),
        ("compare", "stdout", "run.toml cannot be read: not valid TOML"),
    ],
    ("run.toml", "unreadable"): [
        ("runs", "stderr", "run.toml cannot be read: Permission denied"),
        ("compare", "stdout", "run.toml cannot be read: Permission denied"),
    ],
    ("state.json", "garbage"): [
        ("runs", "stdout", "state.json is not valid JSON"),
        ("why", "stdout", "note: state.json is not valid JSON"),
    ],
    ("state.json", "truncated"): [
        ("runs", "stdout", "state.json is not valid JSON"),
        ("why", "stdout", "note: state.json is not valid JSON"),
    ],
    ("state.json", "unreadable"): [
        ("runs", "stdout", "cannot read state.json: Permission denied"),
        ("why", "stdout", "note: cannot read state.json: Permission denied"),
    ],
    ("launcher.log", "unreadable"): [
        ("why", "stdout", "note: launcher.log cannot be read: Permission denied"),
    ],
    ("logs/b0000/rank-00001.log", "unreadable"): [
        ("why", "stdout", "note: logs/b0000/rank-00001.log cannot be read: Permission denied"),
    ],
    **{
        ("status/b0000/rank-00001.json", mode): [
            ("why", "stdout", f"note: {said}"),
            ("why", "stdout", "ValueError: the data ran out at step 3"),  # its log still tells
            ("top", "stdout", said),
            ("stacks", "stderr", f"rank 1: {said}"),
        ]
        for mode, said in _STATUS_SAYS.items()
    },
    ("metrics/b0000/rank-00001.jsonl", "garbage"): [
        ("plot", "stderr", "unreadable lines skipped"),
        ("top", "stdout", "metrics/b0000/rank-00001.jsonl holds no readable record at its end"),
    ],
    ("metrics/b0000/rank-00001.jsonl", "unreadable"): [
        ("plot", "stderr", "metrics/b0000/rank-00001.jsonl cannot be read: Permission denied"),
        ("top", "stdout", "metrics/b0000/rank-00001.jsonl cannot be read: Permission denied"),
    ],
    ("telemetry/b0000/rank-00001.jsonl", "garbage"): [
        ("top", "stdout", "telemetry/b0000/rank-00001.jsonl holds no readable sample at its end"),
    ],
    ("telemetry/b0000/rank-00001.jsonl", "unreadable"): [
        ("top", "stdout", "telemetry/b0000/rank-00001.jsonl cannot be read: Permission denied"),
    ],
}


def _readers(runs: Finished) -> dict[str, tuple[list[str], int, str]]:
    """Each reader's command, its documented status here, and what of the rest it must show."""
    good, bad = runs.good.name, runs.bad.name
    return {
        "runs": (["runs"], 0, good),
        "why": (["why", bad], 0, f"run {bad} "),
        # An ended run has no stacks to dump: 2, with each rank's reason (rank 0's intact).
        "stacks": (["stacks", bad], 2, "rank 0: ended (killed)"),
        "top": (["top", bad], 0, "2 ranks on 1 host"),
        "goodput": (["goodput", bad], 0, f"run {bad}\ngoodput "),
        "plot": (["plot", bad, "--metric", "loss"], 0, f"loss — {bad}"),
        "compare": (["compare", good, bad], 0, good),
    }


@pytest.fixture
def world_readable(finished: Finished) -> Iterator[Finished]:
    """A copy of the runs that ``nobody`` may read, outside pytest's root-only temp folder."""
    root = Path(tempfile.mkdtemp(prefix="ezpz-bad-files-", dir="/tmp"))
    try:
        root.chmod(0o755)
        shutil.copytree(finished.outputs, root / "outputs", symlinks=True)
        subprocess.run(["chmod", "-R", "a+rX", str(root / "outputs")], check=True)
        out = root / "outputs"
        yield Finished(out, out / finished.good.name, out / finished.bad.name)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _break(path: Path, mode: str) -> None:
    if mode == "garbage":
        path.write_bytes(GARBAGE)
    elif mode == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    else:
        path.chmod(0)


def _read_all(runs: Finished, as_nobody: bool) -> dict[str, dict[str, Any]]:
    readers = _readers(runs)
    env = {**base_env(runs.outputs), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(REPO)}
    env["HOME"] = str(runs.outputs.parent)
    argv = [PY, "-m", "tests.fixtures.read_all", json.dumps([c for c, _, _ in readers.values()])]
    done = subprocess.run(
        [*SETPRIV, *argv] if as_nobody else argv,
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    return dict(zip(readers, json.loads(done.stdout), strict=True))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", FILES)
def test_cli_readers_on_a_broken_file(world_readable: Finished, name: str, mode: str) -> None:
    runs = world_readable
    if mode == "unreadable" and os.geteuid() != 0:
        pytest.skip("reading as another user (setpriv --reuid=nobody) needs root")
    if name.partition("/")[0] in RANK_FOLDERS:
        # A finished run's digest holds what its readers show of each rank, so they read no
        # rank's file: these are the files of a run without one (older, or not finalized yet).
        RunDir(runs.bad).digest_json.unlink()
    baseline = _read_all(runs, as_nobody=mode == "unreadable")
    _break(runs.bad / name, mode)
    said = _read_all(runs, as_nobody=mode == "unreadable")

    for reader, (command, status, rest) in _readers(runs).items():
        got = said[reader]
        assert got["traceback"] is None, (command, got["traceback"])
        assert "Traceback" not in got["stderr"], (command, got["stderr"])
        assert got["code"] == status, (command, got)
        assert rest in got["stdout"] + got["stderr"], (command, got)
        printed = got["stdout"] + got["stderr"]
        controls = sorted({c for c in printed if c < " " and c not in "\n\t"})
        assert not controls, (command, controls)  # a garbage byte must not reach a terminal
    for reader, stream, words in SAYS.get((name, mode), []):
        assert words in said[reader][stream], (reader, said[reader])
    if name in READ_BY_NOBODY:  # costs nothing: every reader answers as before
        for reader in ("runs", "why", "stacks", "plot", "compare"):
            assert said[reader] == baseline[reader], reader


@pytest.mark.parametrize("mode", MODES)
def test_cli_readers_on_a_broken_digest(world_readable: Finished, mode: str) -> None:
    """A digest that cannot be used costs only the time to read the ranks' files: ``why`` says
    so and otherwise says what it said from the digest, ``top`` says so below its table."""
    runs = world_readable
    if mode == "unreadable" and os.geteuid() != 0:
        pytest.skip("reading as another user (setpriv --reuid=nobody) needs root")
    baseline = _read_all(runs, as_nobody=mode == "unreadable")
    _break(RunDir(runs.bad).digest_json, mode)
    said = _read_all(runs, as_nobody=mode == "unreadable")
    note = f"note: {FROM_FILES}"
    assert note not in baseline["why"]["stdout"] and FROM_FILES not in baseline["top"]["stdout"]
    why = said["why"]["stdout"].splitlines()
    assert note in why and [line for line in why if line != note] == (
        baseline["why"]["stdout"].splitlines()
    )
    assert FROM_FILES in said["top"]["stdout"].splitlines(), said["top"]
    rows = [  # the table, less each row's last cell: the sample's age, which moves on
        [line.rsplit(None, 1)[0] for line in got["top"]["stdout"].splitlines()[:3]]
        for got in (said, baseline)
    ]
    assert rows[0] == rows[1]


# --- attach: the follower and the monitor behind the Run tab --------------------------------

# The line the TUI shows, and the rank whose log status line shows it (None: the header).
ATTACH_SAYS: dict[str, tuple[int | None, dict[str, str]]] = {
    "run.toml": (None, {"garbage": "run.toml cannot be read: not valid TOML"}),
    "state.json": (None, {"garbage": "state.json is not valid JSON"}),
    "launcher.log": (-1, {}),
    "logs/b0000/rank-00001.log": (1, {}),
    "status/b0000/rank-00001.json": (
        1,
        {"garbage": "status/b0000/rank-00001.json is not a status record"},
    ),
    "metrics/b0000/rank-00001.jsonl": (
        1,
        {"garbage": "metrics/b0000/rank-00001.jsonl: 3 unreadable lines"},
    ),
    "telemetry/b0000/rank-00001.jsonl": (
        1,
        {"garbage": "telemetry/b0000/rank-00001.jsonl: 3 unreadable"},
    ),
}


def first_failure(ranks: RankList) -> int | None:
    return None if ranks.monitor is None else ranks.monitor.first_failure


@pytest.mark.parametrize("mode", ["garbage", "unreadable"])
@pytest.mark.parametrize("name", FILES)
async def test_attach_on_a_broken_file(
    finished: Finished, tmp_path: Path, name: str, mode: str
) -> None:
    outputs = tmp_path / "outputs"
    shutil.copytree(finished.outputs, outputs, symlinks=True)
    run = outputs / finished.bad.name
    if name.startswith(("status/", "metrics/")):
        # Its digest holds every rank's status and last values, so opened from it a broken
        # status or metrics file is never read (unless that rank is plotted): the files' path,
        # an older run's, is what reads them.
        RunDir(run).digest_json.unlink()
    if mode == "garbage":
        (run / name).write_bytes(GARBAGE)
    else:
        (run / name).unlink()
        (run / name).mkdir()
    where, says = ATTACH_SAYS.get(name, (None, {}))
    unreadable = {
        "run.toml": "run.toml cannot be read: Is a directory",
        "state.json": "cannot read state.json: Is a directory",
    }.get(name, f"{name} cannot be read: Is a directory")
    expected = says.get(mode) if mode == "garbage" else unreadable
    if name in READ_BY_NOBODY:
        expected = None

    app = EzpzApp(outputs=outputs, alloc=LOCAL, checks=[], attach=run)
    async with app.run_test(size=(160, 40)) as pilot:
        await started(pilot)
        ranks, log = app.query_one(RankList), app.query_one(LogView)
        header, status = app.query_one("#run-header"), app.query_one("#log-status")
        await until(pilot, lambda: {0, 1} <= set(ranks.rows), "both ranks listed", 10)
        await until(pilot, lambda: "read-only" in text_of(header), "the run's header", 10)
        # The view goes once to the rank that failed first, when the statuses are read: a
        # rank chosen before that would be left for it. Without rank 1's status no rank is
        # known to have failed (rank 0 was killed), and the view stays on rank 0.
        first = None if name == "status/b0000/rank-00001.json" else 1
        await until(
            pilot,
            lambda: first_failure(ranks) == first and log.rank == (first or 0),
            "the first failure",
            10,
        )
        if expected is not None and where is None:
            await until(pilot, lambda: expected in text_of(header), expected, 10)
        elif expected is not None:
            assert ranks.select_rank(where)
            await until(pilot, lambda: log.rank == where, f"the log of {where}", 5)
            await until(pilot, lambda: expected in text_of(status), expected, 10)
        if name == "status/b0000/rank-00001.json":
            row = ranks.render_row(ranks.row_of(1)).plain
            assert row.split()[:2] == ["1", "unknown"], row
        # The rest is shown: rank 0's log, whose files are whole.
        assert ranks.select_rank(0)
        await until(pilot, lambda: log.rank == 0 and len(log.lines) > 3, "rank 0's log", 10)
        errors = [n.message for n in app._notifications if n.severity == "error"]
        assert not errors, errors
