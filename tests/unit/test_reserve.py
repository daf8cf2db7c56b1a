"""The reserve that lets a run whose disk filled up still record its end.

On a real 2 MB tmpfs: a run is made (with its reserve), the disk is filled as a training job
would fill it, and the final state and rank statuses cannot be written; after
release_reserve they can, and the run reads back ``failed`` with the cause.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from ezpz_tui.core.launching.making import RunMaker
from ezpz_tui.core.launching.reserve import (
    NO_SPACE,
    RESERVE_BYTES,
    make_reserve,
    no_space,
    release_reserve,
    reserve_path,
)
from runtime.rundir import (
    RankState,
    RankStatus,
    RunDir,
    RunState,
    State,
    read_state,
    read_statuses,
    write_state,
    write_status,
)
from tests.fixtures.mounts import fill, tmpfs


def test_reserve_holds_real_blocks_and_is_released_once(tmp_path: Path) -> None:
    path = make_reserve(tmp_path)
    assert path == reserve_path(tmp_path) and path.name.startswith(".")
    assert path.stat().st_size == RESERVE_BYTES
    assert path.stat().st_blocks * 512 >= RESERVE_BYTES, "allocated, not a sparse file"
    assert len(set(path.read_bytes()[:4096])) > 16, "not zeros a compressing filesystem drops"
    assert release_reserve(tmp_path) is True
    assert not path.exists()
    assert release_reserve(tmp_path) is False  # twice, or a run made before reserves: quiet
    assert release_reserve(tmp_path / "gone") is False


def test_every_new_run_has_a_reserve_and_lists_normally(tmp_path: Path) -> None:
    store = RunMaker(tmp_path)
    run = store.create({"command": ["x"]})
    assert reserve_path(run).stat().st_size == RESERVE_BYTES
    assert [r.path for r in store.list_runs()] == [run]


def test_no_reserve_on_a_full_disk_and_nothing_left(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs") as where:
        fill(where)
        with pytest.raises(OSError) as caught:
            make_reserve(where)
        assert caught.value.errno == errno.ENOSPC
        assert not reserve_path(where).exists()


def test_no_space_tells_a_full_disk_or_quota_from_other_errors() -> None:
    assert no_space(OSError(errno.ENOSPC, "No space left on device"))
    assert no_space(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert not no_space(OSError(errno.EROFS, "Read-only file system"))
    assert not no_space(ValueError("no space"))


def _end(run: Path) -> None:
    """What a supervisor writes when the run ends on a full disk: rank 1 never wrote a status,
    so the supervisor's record of it is a new file, which only the reserve's room can hold (the
    others are written over their old records: see the next test)."""
    write_status(run, RankStatus(1, state=RankState.FAILED, cause=NO_SPACE))
    write_status(run, RankStatus(0, state=RankState.FAILED, exit_code=1, cause=NO_SPACE))
    state = RunState(State.FAILED, run_id=run.name, exit_code=1, cause=NO_SPACE)
    write_state(run, state)


def test_a_run_whose_disk_fills_can_still_record_its_end(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "fs") as where:
        run = RunMaker(where).create({"command": ["train"]})
        write_status(run, RankStatus(0, host="h", pid=os.getpid()))
        fill(run / "logs", "rank-00000.log")  # the job's own output takes the last byte
        with pytest.raises(OSError) as caught:
            _end(run)
        assert no_space(caught.value), "without the reserve the end is lost"
        assert read_state(run).state == State.PENDING

        assert release_reserve(run)
        _end(run)
        state = read_state(run)
        assert (state.state, state.cause) == (State.FAILED, "no space left on device")
        statuses = read_statuses(run)
        assert [(s.rank, s.state, s.cause) for s in statuses] == [
            (rank, RankState.FAILED, "no space left on device") for rank in (0, 1)
        ]


def test_on_a_full_disk_a_status_is_written_over_the_old_one_in_its_room(tmp_path: Path) -> None:
    """The rank's wrapper records its end although no new file fits: the new record goes over
    the old one (padded, so nothing of the old is left), and the folder's time moves so that
    readers looking at it learn of the change; a rank with no status yet gets ENOSPC."""
    with tmpfs(tmp_path / "fs") as where:
        run = RunMaker(where).create({"command": ["train"]})
        write_status(run, RankStatus(0, host="h", pid=os.getpid(), command=("python", "x.py")))
        folder = RunDir(run).status(0).parent  # its block of ranks, or status/ itself
        before = folder.stat().st_mtime_ns
        fill(run, "checkpoint.pt")
        end = RankStatus(0, host="h", pid=os.getpid(), state=RankState.FAILED, exit_code=1)
        write_status(run, end)  # shorter than what it replaces
        [status] = read_statuses(run)
        assert (status.state, status.exit_code, status.command) == (RankState.FAILED, 1, None)
        assert RunDir(run).status(0).read_bytes().rstrip().endswith(b"}")
        assert folder.stat().st_mtime_ns > before
        assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
        with pytest.raises(OSError) as caught:
            write_status(run, RankStatus(1, host="h"))
        assert no_space(caught.value)
