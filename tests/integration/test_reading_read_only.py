"""Reading commands never write: every one of them on a copy of an outputs directory holding real
runs (one succeeded, one failed: tests/fixtures/finished.py), once on a read-only tmpfs and once
on a plain writable copy.

On the read-only mount a write would fail, so there the test is that each command still answers
as documented; on the writable copy a write would succeed, so there the test is that the full
listing (every path, its type, size and modification time, folders included) is the same after
every command has run. ``attach`` is the TUI through Textual's Pilot, in this process.

No run here is a node fault: ``why`` of a node-fault run adds its host to ``bad_hosts.txt``
(issue 26 moves that write to the supervisor; a node-fault run belongs here once it has).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.logview import LogView
from ezpz_tui.ui.widgets.ranks import RankList
from tests.fixtures.cli import base_env, cli
from tests.fixtures.finished import Finished
from tests.fixtures.mounts import make_read_only, tmpfs
from tests.pilots import LOCAL, started, text_of, until

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(300)]


JOB = "4242"
"""A batch job ``ezpz-tui submit`` queued that ended before it made a run (the queue no longer
holds it): ``runs`` lists it ``lost`` until a run claims its submission."""


def _copy(runs: Finished, to: Path) -> Finished:
    for run in (runs.good, runs.bad):
        shutil.copytree(run, to / run.name, symlinks=True)
    batch = to / ".batch"
    batch.mkdir()
    record = {"submission": "batch-20261122-101010-000", "job_id": JOB, "scheduler": "SLURM"}
    record |= {"submitted": 1795352400.0, "output": str(batch / "job.out"), "command": ["t"]}
    (batch / "batch-20261122-101010-000.json").write_text(json.dumps(record))
    return Finished(to, to / runs.good.name, to / runs.bad.name)


def _env(outputs: Path, tmp_path: Path) -> dict[str, str]:
    """The CLI's environment, with ``squeue`` answering for a queue that holds none of this
    user's jobs (the Slurm controller itself cannot run here for every test)."""
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    (tools / "squeue").write_text("#!/bin/sh\nexit 0\n")
    (tools / "squeue").chmod(0o755)
    env = base_env(outputs)
    env["PATH"] = f"{tools}{os.pathsep}{env.get('PATH', '')}"
    return env


@pytest.fixture(params=["read-only mount", "writable copy"])
def copied(
    request: pytest.FixtureRequest, finished: Finished, tmp_path: Path
) -> Iterator[Finished]:
    if request.param == "writable copy":
        yield _copy(finished, tmp_path / "copy")
        return
    with tmpfs(tmp_path / "fs") as where:
        runs = _copy(finished, where)
        make_read_only(where)
        yield runs


def listing(root: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``root`` (and ``root`` itself): its type, size and mtime."""
    out = {}
    for path in [root, *root.rglob("*")]:
        st = path.lstat()
        out[str(path.relative_to(root))] = (stat.S_IFMT(st.st_mode), st.st_size, st.st_mtime_ns)
    return out


def _commands(runs: Finished) -> list[tuple[list[str], int, str]]:
    """Each reading command, the exit status it documents here, and text it must print."""
    good, bad = runs.good.name, runs.bad.name
    return [
        (["runs"], 0, f"{bad}      failed"),
        (["runs"], 0, f"job {JOB} ended before its run began"),
        (["runs", "--json"], 0, f'"run_id": "{good}"'),
        (["why", bad], 0, f"run {bad} failed: rank 1 on "),
        (["why", good], 0, f"run {good} succeeded"),
        # An ended run has no stacks to dump: 2, with one line saying why.
        (["stacks", bad], 2, f"no stacks from {bad}: rank 0: ended (killed)"),
        (["top", good], 0, "2 ranks on 1 host"),
        (["goodput", bad], 0, f"run {bad}\ngoodput "),
        (["plot", good, "--metric", "loss"], 0, f"loss — {good} (2 ranks)"),
        (["compare", good, bad], 0, "run.toml differs"),
    ]


async def test_reading_commands_answer_and_write_nothing(
    copied: Finished, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = listing(copied.outputs)
    env = _env(copied.outputs, tmp_path)
    monkeypatch.setenv("PATH", env["PATH"])  # the TUI's runs list asks the same squeue
    for command, status, said in _commands(copied):
        proc = cli(command, env)
        out = proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr, (command, out)  # why prints the rank's own
        assert proc.returncode == status, (command, out)
        assert said in out, (command, out)

    app = EzpzApp(outputs=copied.outputs, alloc=LOCAL, checks=[], attach=copied.bad)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        ranks, log = app.query_one(RankList), app.query_one(LogView)
        await until(pilot, lambda: {0, 1} <= set(ranks.rows), "both ranks", 10)
        await until(pilot, lambda: "failed" in ranks.render_row(ranks.row_of(1)).plain, "", 10)
        await until(pilot, lambda: log.rank == 1 and bool(log.lines), "rank 1's log", 10)
        header = app.query_one("#run-header")
        await until(pilot, lambda: "failed" in text_of(header), "the run's state", 10)
        errors = [n.message for n in app._notifications if n.severity == "error"]
        assert not errors, errors

    assert listing(copied.outputs) == before
    if copied.outputs.name != "copy":  # and the mount really refuses a write
        with pytest.raises(OSError, match="Read-only file system"):
            (copied.outputs / "probe").write_text("x")
