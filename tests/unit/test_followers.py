"""Followers against real files written by another process, as a training run writes them."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ezpz_tui.core.watching.followers import Batch, RunFollower
from ezpz_tui.core.watching.progress import Progress
from ezpz_tui.core.watching.tails import Line, LineTail, strip_ansi
from runtime import records
from runtime.record_columns import RecordColumns
from runtime.rundir import RankStatus

# A writer in its own process, driven over stdin, acknowledging each command once it is done.
_WRITER = r"""
import json, os, sys
for cmd in map(json.loads, sys.stdin):
    path, data = cmd["path"], bytes.fromhex(cmd.get("hex", ""))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if cmd["op"] == "append":
        with open(path, "ab") as fh:
            for _ in range(cmd.get("times", 1)):
                fh.write(data)
    elif cmd["op"] == "truncate":  # same inode, shorter content
        with open(path, "wb") as fh:
            fh.write(data)
    elif cmd["op"] == "replace":  # a new inode renamed over the old one
        with open(path + ".tmp", "wb") as fh:
            fh.write(data)
        os.replace(path + ".tmp", path)
    elif cmd["op"] == "delete":
        os.unlink(path)
    print("ok", flush=True)
"""


class Writer:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def do(self, op: str, path: Path, data: bytes = b"", times: int = 1) -> None:
        assert self.proc.stdin and self.proc.stdout
        cmd = {"op": op, "path": str(path), "hex": data.hex(), "times": times}
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "ok\n"

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture
def writer() -> Iterator[Writer]:
    w = Writer()
    yield w
    w.close()


def texts(tail: LineTail) -> list[str]:
    return tail.read().texts


def log_texts(batch: Batch) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for chunk in batch.logs:
        out.setdefault(chunk.rank, []).extend(chunk.lines.texts)
    return out


def test_incremental_lines_from_a_concurrent_writer(tmp_path: Path) -> None:
    path = tmp_path / "rank-00000.log"
    script = (
        "import sys, time\n"
        "with open(sys.argv[1], 'ab', buffering=0) as fh:\n"
        "    for i in range(2000):\n"
        "        fh.write(b'line %d\\n' % i)\n"
        "        if i % 100 == 0: time.sleep(0.005)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, str(path)])
    tail = LineTail(path)
    got: list[str] = []
    while proc.poll() is None:
        got += texts(tail)
    got += texts(tail)
    assert got == [f"line {i}" for i in range(2000)]


def test_torn_write_waits_for_the_rest(tmp_path: Path, writer: Writer) -> None:
    path = tmp_path / "a.log"
    tail = LineTail(path)
    writer.do("append", path, b"first\nsec")
    lines = tail.read()
    assert [(x.text, x.offset, x.length) for x in lines] == [("first", 0, 5)]
    assert tail.read().texts == []
    writer.do("append", path, b"ond half\nthird")
    lines = tail.read()
    assert [(x.text, x.offset, x.length, x.cut) for x in lines] == [("second half", 6, 11, 0)]
    writer.do("append", path, b"\n")
    assert [(x.text, x.offset) for x in tail.read()] == [("third", 18)]


def test_ten_megabyte_line_is_capped_without_holding_it(tmp_path: Path, writer: Writer) -> None:
    path = tmp_path / "a.log"
    tail = LineTail(path, max_line=1000)
    writer.do("append", path, b"before\n")
    assert texts(tail) == ["before"]
    tracemalloc.start()
    try:
        for _ in range(10):  # 10 MB arriving while it is being written, no newline yet
            writer.do("append", path, b"x" * 1024, times=1024)
            assert tail.read(max_bytes=1 << 20).texts == []
        writer.do("append", path, b"\xc3\xa9" * 10 + b"\nafter\n")
        got = drain(tail, 1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, "the follower held the long line"
    big, after = got
    assert big.truncated and big.length == (10 << 20) + 20 and big.offset == 7
    assert big.cut == big.length - 1000
    assert big.text == "x" * 1000 + f" … [{big.cut} bytes cut]"
    assert (after.text, after.offset) == ("after", 7 + big.length + 1)


def test_cut_inside_a_multibyte_character_leaves_no_half_character(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    path.write_bytes("é".encode() * 10 + b"\n")
    (line,) = LineTail(path, max_line=5).read()
    assert line.text == "éé … [16 bytes cut]"


def test_non_utf8_and_split_multibyte_character(tmp_path: Path, writer: Writer) -> None:
    path = tmp_path / "a.log"
    tail = LineTail(path)
    euro = "€".encode()
    writer.do("append", path, b"bad \xff\xfe byte\nprice 3" + euro[:1])
    assert texts(tail) == ["bad \ufffd\ufffd byte"]
    writer.do("append", path, euro[1:2])
    assert texts(tail) == []
    writer.do("append", path, euro[2:] + b"\n")
    assert texts(tail) == ["price 3€"]


def test_truncation_restarts_from_the_top(tmp_path: Path, writer: Writer) -> None:
    path = tmp_path / "a.log"
    tail = LineTail(path)
    writer.do("append", path, b"one\ntwo\nthree\n")
    assert texts(tail) == ["one", "two", "three"]
    writer.do("truncate", path, b"new\n")
    lines = tail.read()
    assert lines.restarted and lines.texts == ["new"]
    assert not tail.read().restarted


@pytest.mark.parametrize(
    ("first", "changes", "new"),
    [
        # replaced by a rename
        (b"old 1\nold 2\npartial", [("replace", b"")], "new 1 is longer than the old file was"),
        # deleted, then made again (which may reuse the inode number)
        (b"a\nb\n", [("delete", b""), ("append", b"")], "again, longer than before"),
    ],
)
def test_a_replaced_or_recreated_log_restarts(
    tmp_path: Path, writer: Writer, first: bytes, changes: list[tuple[str, bytes]], new: str
) -> None:
    path = tmp_path / "a.log"
    tail = LineTail(path)
    writer.do("append", path, first)
    assert texts(tail) == first.decode().split("\n")[:-1]
    *before, (last, _) = changes
    for op, _ in before:
        writer.do(op, path)
        assert texts(tail) == []
    writer.do(last, path, new.encode() + b"\n")
    lines = tail.read()
    assert lines.restarted and lines.texts == [new]


def test_carriage_return_rewrites_collapse_and_ansi_is_kept(tmp_path: Path, writer: Writer) -> None:
    path = tmp_path / "a.log"
    tail = LineTail(path)
    writer.do("append", path, b"\x1b[32mok\x1b[0m\r\n 10%\r 50%")
    assert texts(tail) == ["\x1b[32mok\x1b[0m"]
    writer.do("append", path, b"\r100%\r\ndone\n")
    assert texts(tail) == ["100%", "done"]
    assert strip_ansi("\x1b[1;31merror\x1b[0m: \x1b]8;;http://x\x07link\x1b]8;;\x07") == (
        "error: link"
    )


def _run(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    (run / "logs").mkdir(parents=True)
    return run


def test_four_ranks_interleaved_in_global_order(tmp_path: Path, writer: Writer) -> None:
    run = _run(tmp_path)
    follower = RunFollower(run, rescan_s=0)
    seen: list[tuple[int, int, str]] = []
    for step in range(5):
        for rank in (3, 1, 0, 2):
            lines = b"".join(b"r%d s%d l%d\n" % (rank, step, i) for i in range(step + 1))
            writer.do("append", run / "logs" / f"rank-{rank:05d}.log", lines)
        batch = follower.poll()
        for chunk in batch.logs:
            seen += [(chunk.seq + i, chunk.rank, t) for i, t in enumerate(chunk.lines.texts)]
    seqs = [s for s, _, _ in seen]
    assert seqs == list(range(len(seen)))  # dense, increasing across ranks and polls
    steps = [int(t.split()[1][1:]) for _, _, t in seen]
    assert steps == sorted(steps)  # nothing of a later round before an earlier one
    for rank in range(4):
        mine = [t for _, r, t in seen if r == rank]
        assert mine == [f"r{rank} s{s} l{i}" for s in range(5) for i in range(s + 1)]


def test_files_that_appear_later_metrics_and_status(tmp_path: Path, writer: Writer) -> None:
    run = _run(tmp_path)
    follower = RunFollower(run, rescan_s=0)
    assert not follower.poll()
    writer.do("append", run / "logs" / "rank-00001.log", b"hello from 1\n")
    rec = {"timestamp": 1.0, "rank": 1, "step": 3, "metrics": {"loss": "NaN"}}
    good = json.dumps(rec).encode() + b"\n"
    writer.do("append", run / "metrics" / "rank-00001.jsonl", good + b"garbage\n{torn")
    writer.do("replace", run / "status" / "rank-00001.json", b'{"rank": 1, "pid": 42}')
    batch = follower.poll()
    assert log_texts(batch) == {1: ["hello from 1"]}
    assert [r.step for r in batch.records[1]] == [3]
    assert batch.garbage == {1: 1}
    assert batch.status == {1: RankStatus(rank=1, pid=42)}
    assert not follower.poll()  # nothing new: nothing re-read
    writer.do("append", run / "metrics" / "rank-00001.jsonl", b"}\n" + good)
    writer.do("replace", run / "status" / "rank-00001.json", b'{"rank": 1, "exit_code": 0}')
    batch = follower.poll()
    assert batch.garbage == {1: 1} and len(batch.records[1]) == 1  # "{torn}" is garbage
    assert batch.status == {1: RankStatus(rank=1, exit_code=0)}
    # ezpz's shared file: records name their own rank
    shared = b"".join(json.dumps({"rank": r, "loss": 1.0}).encode() + b"\n" for r in (0, 2))
    writer.do("append", run / "metrics.jsonl", shared)
    assert sorted(follower.poll().records) == [0, 2]


def test_restarts_are_reported_per_rank(tmp_path: Path, writer: Writer) -> None:
    run = _run(tmp_path)
    follower = RunFollower(run, rescan_s=0)
    writer.do("append", run / "logs" / "rank-00002.log", b"a\nb\n")
    follower.poll()
    writer.do("truncate", run / "logs" / "rank-00002.log", b"c\n")
    batch = follower.poll()
    assert batch.log_restarts == {2} and log_texts(batch) == {2: ["c"]}


def test_watch_sees_writes_within_the_interval(tmp_path: Path, writer: Writer) -> None:
    run = _run(tmp_path)
    stop = threading.Event()
    got: list[str] = []
    done = threading.Event()

    def consume() -> None:
        for batch in RunFollower(run, rescan_s=0.1).watch(stop, interval_s=0.1):
            got.extend(t for texts in log_texts(batch).values() for t in texts)
            if len(got) == 2:
                done.set()

    thread = threading.Thread(target=consume)
    thread.start()
    try:
        writer.do("append", run / "logs" / "rank-00000.log", b"one\n")
        time.sleep(0.3)
        writer.do("append", run / "logs" / "rank-00000.log", b"two\n")
        assert done.wait(5)
    finally:
        stop.set()
        thread.join(5)
    assert got == ["one", "two"] and not thread.is_alive()


def test_watch_polls_when_notification_reports_nothing(
    tmp_path: Path, writer: Writer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write on another node gives no inotify event: only the timeout wakes the loop."""
    import ezpz_tui.core.watching.followers as followers

    def silent(*_paths: object, stop_event: threading.Event, rust_timeout: int, **_: object):
        while not stop_event.wait(rust_timeout / 1000):
            yield set()

    monkeypatch.setattr(followers.watchfiles, "watch", silent)
    run = _run(tmp_path)
    writer.do("append", run / "logs" / "rank-00000.log", b"early\n")
    stop = threading.Event()
    watcher = RunFollower(run).watch(stop, interval_s=0.05)
    assert log_texts(next(watcher)) == {0: ["early"]}
    writer.do("append", run / "logs" / "rank-00000.log", b"remote\n")
    start = time.monotonic()
    assert log_texts(next(watcher)) == {0: ["remote"]}
    assert time.monotonic() - start < 2
    stop.set()


def test_watch_waits_for_a_run_dir_that_does_not_exist_yet(tmp_path: Path, writer: Writer) -> None:
    run = tmp_path / "later"
    stop = threading.Event()
    watcher = RunFollower(run, rescan_s=0).watch(stop, interval_s=0.05)
    threading.Timer(0.2, writer.do, ("append", run / "logs" / "rank-00000.log", b"hi\n")).start()
    assert log_texts(next(watcher)) == {0: ["hi"]}
    stop.set()


def drain(tail: LineTail, max_bytes: int) -> list[Line]:
    """Every line readable now, however small the reads (a read may yield only a partial)."""
    out: list[Line] = []
    while True:
        before = tail.offset
        out += list(tail.read(max_bytes))
        if tail.offset == before:
            return out


@settings(max_examples=200, deadline=None)
@given(
    content=st.lists(
        st.sampled_from([b"a", b"bc", b"\n", b"\r", b"\xe2\x82\xac", b"\xff", b"\x1b[1m"]),
        max_size=60,
    ).map(b"".join),
    cuts=st.lists(st.integers(0, 200), max_size=8),
    max_line=st.integers(1, 12),
    max_bytes=st.integers(1, 9),
)
def test_any_split_gives_the_same_lines(
    content: bytes, cuts: list[int], max_line: int, max_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        whole_path, split_path = Path(tmp, "whole"), Path(tmp, "split")
        whole_path.write_bytes(content)
        whole = drain(LineTail(whole_path, max_line=max_line), 1 << 20)
        tail = LineTail(split_path, max_line=max_line)
        split = []
        pos = 0
        for cut in [*sorted(min(c, len(content)) for c in cuts), len(content)]:
            with open(split_path, "ab") as fh:
                fh.write(content[pos:cut])
            pos = max(pos, cut)
            split += drain(tail, max_bytes)
    assert split == whole
    if b"\r" not in content:  # an independent oracle: decode each line on its own
        raw = content.split(b"\n")[:-1]
        assert [x.length for x in whole] == [len(r) for r in raw]
        uncut = [(x.text, r) for x, r in zip(whole, raw, strict=True) if not x.truncated]
        assert all(t == r.decode("utf-8", "replace") for t, r in uncut)
        assert all(len(r) > max_line for x, r in zip(whole, raw, strict=True) if x.truncated)


def test_a_backlog_starts_existing_logs_at_their_last_lines(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    old = logs / "rank-00000.log"
    old.write_text("".join(f"line {i:04d}\n" for i in range(1000)))  # 10 bytes a line
    follower = RunFollower(tmp_path, log_backlog=95)
    (first,) = follower.poll().logs
    assert first.lines.texts == [f"line {i:04d}" for i in range(991, 1000)]
    assert first.lines[0].offset == 9910, "offsets stay true for reading back"
    later = logs / "rank-00001.log"
    later.write_text("a\nb\n")
    with open(old, "a") as fh:
        fh.write("line 1000\n")
    follower.rescan()
    batch = follower.poll()
    assert {r.rank: r.lines.texts for r in batch.logs} == {0: ["line 1000"], 1: ["a", "b"]}


class _RecordProgress:
    """Progress as it was computed record by record, the reference for the columns."""

    def __init__(self) -> None:
        self.step: int | None = None
        self.loss: float | None = None
        self.steps_per_s: float | None = None
        self._first: tuple[int, float] | None = None

    def update(self, new: list[records.Record]) -> None:
        for rec in new:
            if rec.step is None:
                continue
            self.step = rec.step
            if "loss" in rec.metrics:
                self.loss = rec.metrics["loss"]
            if rec.timestamp is None:
                continue
            if self._first is None:
                self._first = (rec.step, rec.timestamp)
            elif rec.timestamp > self._first[1]:
                self.steps_per_s = (rec.step - self._first[0]) / (rec.timestamp - self._first[1])


progress_records = st.builds(
    lambda step, stamp, loss: records.Record(0, step, stamp, {"x": 1.0, **loss}),
    st.none() | st.integers(min_value=-5, max_value=50),
    st.none() | st.floats(allow_infinity=False, min_value=-10, max_value=100),
    st.fixed_dictionaries({}, optional={"loss": st.floats()}),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(progress_records, max_size=6), max_size=5))
def test_progress_from_columns_matches_the_record_by_record_reading(
    batches: list[list[records.Record]],
) -> None:
    columnar, reference = Progress(), _RecordProgress()
    for batch in batches:
        columnar.update(RecordColumns.from_records(batch, 0))
        reference.update(batch)
        got = (columnar.step, columnar.loss, columnar.steps_per_s)
        want = (reference.step, reference.loss, reference.steps_per_s)
        assert repr(got) == repr(want)


def test_records_arrive_as_columns_by_their_rank(tmp_path: Path) -> None:
    run = _run(tmp_path)
    lines = [records.encode(2, s, {"loss": 1.0 / (s + 1), "tok": s}, 10.0 + s) for s in range(3000)]
    (run / "metrics").mkdir(parents=True, exist_ok=True)
    (run / "metrics" / "rank-00002.jsonl").write_bytes(b"".join(lines))
    batch = RunFollower(run).poll()
    columns = batch.records[2]
    assert isinstance(columns, RecordColumns) and len(columns) == 3000
    assert columns.steps == list(range(3000)) and columns.metrics["tok"][-1] == 2999.0
    progress = Progress()
    progress.update(columns)
    assert (progress.step, progress.loss, progress.steps_per_s) == (2999, 1 / 3000, 1.0)
