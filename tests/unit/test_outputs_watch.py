"""The runs list's look every 2 s: an outputs directory that has not changed is not listed
again, a run made or ended shows at the next look, a settling mtime is not trusted."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from ezpz_tui.core.launching.making import RunMaker
from ezpz_tui.core.runs.outputs_watch import OutputsWatch
from ezpz_tui.core.runs.store import RunSummary
from runtime.rundir import State, read_state, write_state

PAST = time.time() - 3600


class Scans(RunMaker):
    """The real store, counting its full listings."""

    scans = 0

    def scan(self) -> tuple[list[RunSummary], list[Path]]:
        self.scans += 1
        return super().scan()


def end(run: Path, state: State = State.SUCCEEDED) -> None:
    write_state(run, replace(read_state(run), state=state, exit_code=0))


def settle(*folders: Path) -> None:
    """Their mtimes an hour old: past the watch's doubt about a mtime that is still settling."""
    for folder in folders:
        os.utime(folder, (PAST, PAST))


@pytest.fixture
def store(tmp_path: Path) -> Scans:
    return Scans(tmp_path / "outputs")


def test_an_unchanged_outputs_directory_is_not_listed_again(store: Scans) -> None:
    ended = store.create({"command": ["a"]})
    end(ended)
    settle(store.outputs)
    watch = OutputsWatch(store, ask=lambda *_: None)
    assert [r.path for r in watch.look(whole=True) or []] == [ended]
    assert store.scans == 1
    for _ in range(3):
        assert watch.look() is None  # nothing it shows can have changed
    assert store.scans == 1
    assert [r.state for r in watch.runs] == ["succeeded"]


def test_a_new_run_shows_at_the_next_look(store: Scans) -> None:
    first = store.create({"command": ["a"]})
    end(first)
    settle(store.outputs)
    watch = OutputsWatch(store, ask=lambda *_: None)
    watch.look(whole=True)
    second = store.create({"command": ["b"]})  # the outputs directory changes
    end(second)
    listed = watch.look()
    assert listed is not None and {r.path for r in listed} == {first, second}
    assert store.scans == 2


def test_a_live_run_is_read_again_without_listing_the_rest(store: Scans) -> None:
    live, ended = store.create({"command": ["a"]}), store.create({"command": ["b"]})
    write_state(live, replace(read_state(live), state=State.RUNNING))
    end(ended)
    settle(store.outputs)
    watch = OutputsWatch(store, ask=lambda *_: None)
    watch.look(whole=True)
    assert watch.look() is None  # still running: read again, and the same
    end(live, State.FAILED)
    listed = watch.look()
    assert listed is not None
    assert {r.path: r.state for r in listed} == {live: "failed", ended: "succeeded"}
    assert store.scans == 1  # the live run was read again, the outputs not listed


def test_a_folder_that_is_not_a_run_yet_is_watched(store: Scans) -> None:
    """ezpz's ``<module>/<timestamp>`` folder gets its metrics after the look that found it
    empty: the folder's own change brings it in."""
    store.outputs.mkdir(parents=True)
    module = store.outputs / "train"
    stamp = module / "2026-11-28-120000"
    stamp.mkdir(parents=True)
    settle(stamp, module, store.outputs)
    watch = OutputsWatch(store, ask=lambda *_: None)
    assert watch.look(whole=True) == []
    assert watch.look() is None
    (stamp / "metrics.jsonl").write_text('{"timestamp": 1.0, "rank": 0, "metrics": {}}\n')
    listed = watch.look()
    assert listed is not None and [r.path for r in listed] == [stamp]


def test_a_settling_mtime_is_not_trusted(store: Scans) -> None:
    """A folder changed within the filesystem's mtime tick may change again within it: the
    look after one lists in full."""
    ended = store.create({"command": ["a"]})
    end(ended)
    watch = OutputsWatch(store, ask=lambda *_: None)
    watch.look(whole=True)  # the outputs directory was made just now
    watch.look()
    assert store.scans == 2
    settle(store.outputs)
    watch.look()  # listed once more, its mtime now settled
    assert watch.look() is None
    assert store.scans == 3
