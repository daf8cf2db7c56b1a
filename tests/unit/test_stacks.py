"""Reading faulthandler dumps and folding ranks by stack, on dumps made by faulthandler itself."""

from __future__ import annotations

import faulthandler
import inspect
import threading
from pathlib import Path

import pytest

from ezpz_tui.core.watching.stacks import (
    Frame,
    RankStacks,
    Skipped,
    StacksReport,
    format_report,
    group_stacks,
    parse_dump,
    rank_ranges,
    report_json,
)

HERE = Path(__file__).name


def dump_of_this_process(path: Path) -> str:
    """A real all-threads dump, taken while a helper thread waits in ``parked_worker``."""
    parked, release = threading.Event(), threading.Event()

    def parked_worker() -> None:
        parked.set()
        release.wait(30)

    thread = threading.Thread(target=parked_worker, daemon=True)
    thread.start()
    parked.wait(30)
    try:
        with open(path, "w") as fh:
            faulthandler.dump_traceback(fh, all_threads=True)
    finally:
        release.set()
        thread.join(30)
    return path.read_text()


def take_dump(path: Path) -> str:
    return dump_of_this_process(path)


def other_place(path: Path) -> str:
    return dump_of_this_process(path)


def line_of(function: object, text: str) -> int:
    lines, start = inspect.getsourcelines(function)  # type: ignore[arg-type]
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_parse_a_real_dump(tmp_path: Path) -> None:
    threads = parse_dump(take_dump(tmp_path / "dump"))
    assert len(threads) >= 2
    main = RankStacks(0, threads).main
    assert main.current  # the dump was taken on the main thread, which faulthandler lists last
    inner = main.frames[0]
    assert inner.function == "dump_of_this_process" and Path(inner.file).name == HERE
    assert inner.line == line_of(dump_of_this_process, "faulthandler.dump_traceback")
    assert main.frames[1].function == "take_dump"
    worker = next(t for t in threads if any(f.function == "parked_worker" for f in t.frames))
    assert not worker.current and worker.thread and worker.thread.startswith("0x")
    assert worker.thread != main.thread


def test_parse_skips_output_around_and_keeps_the_first_dump(tmp_path: Path) -> None:
    first = take_dump(tmp_path / "a")
    second = other_place(tmp_path / "b")
    text = f"step 10 loss 2.3\n{first}some later output\n{second}"
    threads = parse_dump(text)
    assert threads == parse_dump(first)
    assert threads[-1].frames[1].function == "take_dump"
    assert parse_dump('no dump here\n  File "x.py", line 3 in f\n') == ()


def test_a_thread_started_between_two_dumps_is_not_the_first_dump_s(tmp_path: Path) -> None:
    """The rank's output after the first dump ends it, even when the next dump begins with a
    thread the first never listed (the newest thread comes first; the suite's full run met one,
    a thread of an earlier test)."""
    first = take_dump(tmp_path / "a")
    newer = 'Thread 0x00000000deadbeef (most recent call first):\n  File "x.py", line 3 in f\n\n'
    assert "0x00000000deadbeef" not in first
    second = newer + other_place(tmp_path / "b")
    assert parse_dump(f"{first}some later output\n{second}") == parse_dump(first)


def test_a_dump_made_on_another_thread_keeps_the_main_thread(tmp_path: Path) -> None:
    """The signal may run faulthandler on any thread (the Flight Recorder's while it writes):
    that thread is "Current thread" and listed first, and the main thread still comes last."""
    path = tmp_path / "dump.txt"

    def dumper() -> None:
        with open(path, "w") as fh:
            faulthandler.dump_traceback(fh, all_threads=True)

    thread = threading.Thread(target=dumper)
    thread.start()
    thread.join(30)
    threads = parse_dump(path.read_text() + "the rank's next line\n")
    assert threads[0].current and threads[0].frames[0].function == "dumper"
    main = RankStacks(0, threads).main
    assert not main.current
    here = "test_a_dump_made_on_another_thread_keeps_the_main_thread"
    assert here in [f.function for f in main.frames]


def test_parse_the_odd_lines_faulthandler_writes() -> None:
    text = (
        "Thread 0x00007f0000000001 (most recent call first):\n"
        "  <no Python frame>\n"
        "\n"
        "Current thread 0x00007f0000000002 [MainThread] (most recent call first):\n"
        '  File "train.py", line ??? in <module>\n'
        "  File ???, line 4 in ???\n"
        "  ...\n"
    )
    idle, main = parse_dump(text)
    assert idle.frames == () and not idle.current
    assert main.current and main.truncated
    assert main.frames == (Frame("train.py", None, "<module>"), Frame("???", 4, "???"))
    (single,) = parse_dump('Stack (most recent call first):\n  File "a.py", line 2 in f\n')
    assert single.thread is None and single.frames == (Frame("a.py", 2, "f"),)


def test_group_identical_main_stacks(tmp_path: Path) -> None:
    a = parse_dump(take_dump(tmp_path / "a"))
    b = parse_dump(other_place(tmp_path / "b"))
    stacks = [RankStacks(r, a) for r in (7, 0, 1, 2, 3)] + [RankStacks(5, b)]
    stacks.append(RankStacks(6, ()))  # a rank with nothing parsed is in no group
    groups = group_stacks(stacks)
    assert [g.ranks for g in groups] == [(0, 1, 2, 3, 7), (5,)]
    line = line_of(dump_of_this_process, "faulthandler.dump_traceback")
    assert groups[0].headline() == f"ranks 0-3,7: dump_of_this_process at {HERE}:{line}"
    assert groups[1].frames[1].function == "other_place"
    assert groups[1].headline().startswith("rank 5: dump_of_this_process at ")


@pytest.mark.parametrize(
    ("ranks", "text"),
    [([], ""), ([3], "3"), ([0, 1, 2, 3, 7], "0-3,7"), ([9, 1, 2, 2, 0, 5, 4], "0-2,4-5,9")],
)
def test_rank_ranges(ranks: list[int], text: str) -> None:
    assert rank_ranges(ranks) == text


def test_format_report_folds_groups_and_reasons(tmp_path: Path) -> None:
    a = parse_dump(take_dump(tmp_path / "a"))
    report = StacksReport(
        tmp_path,
        (RankStacks(0, a), RankStacks(1, a)),
        (Skipped(2, "on host x1"), Skipped(3, "on host x1"), Skipped(4, "ended (failed)")),
    )
    lines = format_report(report)
    assert lines[0].startswith("ranks 0-1: dump_of_this_process at ")
    assert lines[1].startswith("    dump_of_this_process at ") and lines[1].endswith(
        f"{HERE}:{line_of(dump_of_this_process, 'faulthandler.dump_traceback')}"
    )
    assert lines[2].startswith("    take_dump at ")
    assert lines[-2:] == ["ranks 2-3: no stacks: on host x1", "rank 4: no stacks: ended (failed)"]
    data = report_json(report)
    assert data["groups"][0]["ranks"] == [0, 1] and data["groups"][0]["ranks_text"] == "0-1"
    assert data["groups"][0]["frames"][1]["function"] == "take_dump"
    assert set(data["ranks"]) == {"0", "1"} and len(data["skipped"]) == 3
