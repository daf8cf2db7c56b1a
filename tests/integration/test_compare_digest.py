"""``compare`` and goodput read a finished run's ranks from its ``digest.json``, and say from it
what they say from the files.

The runs are real: ``ezpz-tui launch`` over the mpich wheel's mpiexec, 2 ranks each running
tests/ranks/memory_steps.py (``loss``, a rate and ``mem_peak_gb``, whose peak is not its last
value). The parent fails: its last rank records one step past the other (its highest step) and
raises. The child is ``ezpz-tui relaunch`` of it from step 0, so its goodput counts the steps
its failed parent had run as redone: the parent's highest step, read by the child's ledger.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ezpz_tui.core.runs.digest import read_digest
from ezpz_tui.core.watching.goodput import Ancestry
from runtime.rundir import RunDir
from tests.fixtures.cli import PY, REPO, base_env, cli, kill_leftovers, run_dirs
from tests.fixtures.runs import wait_for

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(300)]

SCRIPT = str(REPO / "tests" / "ranks" / "memory_steps.py")
STEPS = 6  # the parent's; its last rank records step 6 too


def _finalized(run_dir: Path) -> bool:
    return RunDir(run_dir).digest_json.is_file() and RunDir(run_dir).metrics_nc.is_file()


@pytest.fixture(scope="module")
def family(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The outputs directory holding the failed parent and its relaunched child, finalized."""
    outputs = tmp_path_factory.mktemp("family") / "outputs"
    env = base_env(outputs)
    try:
        failed = cli(["launch", "--quiet", "--ppn", "2", "--", PY, SCRIPT, str(STEPS), "fail"], env)
        assert failed.returncode == 1, failed.stderr
        (parent,) = run_dirs(outputs)
        wait_for(lambda: _finalized(parent), 60, "the parent's digest.json")
        argv = ["relaunch", parent.name, "--yes", "--no-preflight", "--fresh", "--quiet"]
        child = cli([*argv, "--", PY, SCRIPT, "8"], env)
        assert child.returncode == 0, child.stderr
    finally:
        kill_leftovers(outputs)
    wait_for(lambda: all(map(_finalized, run_dirs(outputs))), 60, "the child's digest.json")
    return outputs


def _compare(outputs: Path) -> dict:
    parent, child = run_dirs(outputs)
    done = cli(["compare", parent.name, child.name, "--json"], base_env(outputs))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.replace(str(outputs), "<outputs>"))


@contextmanager
def _without_digests(outputs: Path) -> Iterator[None]:
    """The runs as if finalized before digests were (or with a broken one): each digest moved
    aside, and back after. In place, since a copy's record names the first place."""
    digests = [RunDir(run_dir).digest_json for run_dir in run_dirs(outputs)]
    for digest in digests:
        digest.rename(digest.with_name("aside"))
    try:
        yield
    finally:
        for digest in digests:
            digest.with_name("aside").rename(digest)


def _run(said: dict, which: Path) -> dict:
    return next(run for run in said["runs"] if run["run_id"] == which.name)


def test_compare_says_from_the_digests_what_it_says_from_the_files(family: Path) -> None:
    parent, child = run_dirs(family)
    digest = read_digest(parent)
    assert digest is not None and digest.highest_step() == (True, STEPS)
    assert digest.peaks() == {"mem_peak_gb": [3.0, 4.0]} and digest.others_garbage() == 0
    from_digest = _compare(family)
    with _without_digests(family):
        assert _compare(family) == from_digest
        assert Ancestry().of(parent).highest == STEPS
    said = _run(from_digest, parent)
    # Each rank's peak (step 3's), not its last value (1.5 and 2.0).
    assert said["memory_metric"] == "mem_peak_gb"
    assert said["peak_mem_gb_by_rank"] == {"0": 3.0, "1": 4.0}
    assert said["figures"]["peak_mem_gb"] == 4.0
    assert _run(from_digest, child)["figures"]["goodput"] is not None
    assert Ancestry().of(parent).highest == STEPS


def test_a_rank_file_broken_after_the_digest_was_written_is_not_read(family: Path) -> None:
    """The digest holds what compare and goodput take from the ranks past rank 0: the parent's
    rank 1 (its peak, its highest step) is not read at all."""
    intact = _compare(family)
    metrics = RunDir(run_dirs(family)[0]).metrics(1)
    kept = metrics.read_bytes()
    metrics.write_bytes(b"not a record\n")
    try:
        assert _compare(family) == intact
        assert Ancestry().of(run_dirs(family)[0]).highest == STEPS
    finally:
        metrics.write_bytes(kept)


def test_a_garbage_line_counts_the_same_from_the_digest(family: Path) -> None:
    """Rank 1's file holding a line that is no record when the run is finalized: the digest
    counts it as the files do, and compare notes it either way."""
    parent = run_dirs(family)[0]
    metrics = RunDir(parent).metrics(1)
    kept = metrics.read_bytes()
    env = base_env(family)
    try:
        metrics.write_bytes(kept + b"not a record\n")
        assert cli(["finalize", str(parent)], env).returncode == 0
        digest = read_digest(parent)
        assert digest is not None and digest.others_garbage() == 1
        from_digest = _compare(family)
        assert "1 unreadable metric lines skipped" in _run(from_digest, parent)["notes"]
        with _without_digests(family):
            assert _compare(family) == from_digest
    finally:
        metrics.write_bytes(kept)
        assert cli(["finalize", str(parent)], env).returncode == 0
