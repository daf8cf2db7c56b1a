"""The host figures of a real process tree and the sampler thread that writes them."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.procfs import proc_stat
from runtime.telemetry.accelerator import Accelerator, Source
from runtime.telemetry.devices import Pick
from runtime.telemetry.host import ProcessTree
from runtime.telemetry.nvidia import Nvml
from runtime.telemetry.record import DEFAULT_INTERVAL_S, parse_line
from runtime.telemetry.sampler import Sampler, interval_from, start_sampler
from runtime.telemetry.tools import Figures, ToolRunner
from tests.fixtures.nvml import fake_nvml
from tests.fixtures.runs import wait_for

BUSY = "while True: pass"
# A rank that runs until the test makes a file.
WAIT_FOR_FILE = "import os, time\nwhile not os.path.exists({path!r}):\n    time.sleep(0.02)\n"
INTERVAL_S = 0.2
# time.time (a sample's stamp) and time.monotonic (the sampler's schedule) may differ by this.
CLOCK_SLACK_S = 0.01
# The sampler's thread ends at its first write into a file it cannot write: within one
# interval (0.05 s) on an idle machine.
ENDS_WITHIN_S = 10.0
# A parent that starts a busy child and a sleeping one, then waits.
FAMILY = (
    "import subprocess, sys, time\n"
    f"subprocess.Popen([sys.executable, '-c', {BUSY!r}])\n"
    "subprocess.Popen(['sleep', '60'])\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def spawn() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes the test starts, each ended (with its own children) when it is done."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: its children too
        proc.wait()


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True) if path.exists() else []


def start(spawn: list[subprocess.Popen[bytes]], code: str) -> int:
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    spawn.append(proc)
    return proc.pid


class Clock:
    """The interval a tree divides CPU time by, set by the test: how long a loaded machine
    takes to give a process its CPU time is then no part of the figure."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def cpu_seconds(pids: list[int]) -> float:
    """The CPU time the kernel has counted for ``pids`` (their reaped children included)."""
    stats = [proc_stat(pid) for pid in pids]
    return sum(s.cpu_ticks for s in stats if s is not None) / os.sysconf("SC_CLK_TCK")


def spend(pids: list[int], seconds: float) -> None:
    """Wait until ``pids`` have used ``seconds`` more CPU time, however long that takes."""
    target = cpu_seconds(pids) + seconds
    wait_for(lambda: cpu_seconds(pids) >= target, 120, f"{seconds} s of CPU time")


def test_a_busy_tree_reads_busy_and_a_sleeping_one_idle(
    spawn: list[subprocess.Popen[bytes]],
) -> None:
    clock = Clock()
    busy = ProcessTree(start(spawn, BUSY), clock=clock)
    idle = ProcessTree(start(spawn, "import time; time.sleep(60)"), clock=clock)
    assert "cpu_pct" not in idle.read()  # one reading has no interval
    busy.read()
    # One second on the tree's clock, in which the busy loop used at least half a second of
    # CPU and the sleeper, which waits as long in real time, next to nothing.
    spend([busy.root], 0.5)
    clock.now = 1.0
    assert busy.read()["cpu_pct"] >= 50
    assert idle.read()["cpu_pct"] < 10


def test_the_tree_holds_every_descendant(spawn: list[subprocess.Popen[bytes]]) -> None:
    clock = Clock()
    tree = ProcessTree(start(spawn, FAMILY), clock=clock)
    wait_for(lambda: len(tree.pids()) == 3, 60, "the family's three processes")
    tree.read()
    # The root only waits: the half second of CPU is the busy grandchild's.
    spend(tree.pids()[1:], 0.5)
    clock.now = 1.0
    figures = tree.read()
    assert figures["procs"] == 3
    assert figures["cpu_pct"] >= 50  # the busy grandchild counts
    assert figures["rss_bytes"] > 3 * 1_000_000  # three interpreters' worth, roughly


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        (None, DEFAULT_INTERVAL_S),
        ("", DEFAULT_INTERVAL_S),
        ("0", 0.0),
        ("0.25", 0.25),
        ("fast", DEFAULT_INTERVAL_S),
        ("-1", DEFAULT_INTERVAL_S),
        ("nan", DEFAULT_INTERVAL_S),
    ],
)
def test_interval_from_the_environment(raw: str | None, want: float) -> None:
    env = {} if raw is None else {"EZPZ_TELEMETRY_S": raw}
    assert interval_from(env) == want


def test_zero_interval_starts_nothing(tmp_path: Path) -> None:
    env = {"EZPZ_TELEMETRY_S": "0"}
    assert start_sampler(tmp_path, 0, 0, 1, lambda _line: None, env) is None
    assert list(tmp_path.iterdir()) == []


def sampler(path: Path, root: int, interval_s: float, source: Source) -> Sampler:
    runner = ToolRunner()
    chain = Accelerator([source], True, lambda _line: None)
    return Sampler(path, ProcessTree(root), chain, interval_s, runner)


def test_one_line_per_interval_from_the_first_interval_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spawn: list[subprocess.Popen[bytes]]
) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml())
    path = tmp_path / "rank-00000.jsonl"
    run = sampler(path, start(spawn, BUSY), INTERVAL_S, Nvml(Pick(1)))
    began = time.time()
    run.start()
    wait_for(lambda: len(lines_of(path)) >= 3, 60, "three samples")
    run.stop()
    lines = lines_of(path)
    assert all(line.endswith(b"\n") for line in lines)
    samples = [parse_line(line) for line in lines]
    for sample in samples:
        assert sample is not None and sample.cpu_pct is not None and sample.rss_bytes
        assert (sample.device, sample.util_pct, sample.power_w) == ("nvml:1", 17.0, 101.5)
    # Never ahead of the schedule: the n-th line comes n intervals after the start at the
    # soonest (a loaded machine can only make a line late, or skip one).
    times = [sample.time for sample in samples if sample is not None]
    assert len(times) >= 3
    for n, at in enumerate(times, start=1):
        assert at >= began + n * INTERVAL_S - CLOCK_SLACK_S, (n, at - began)
    size = path.stat().st_size
    time.sleep(0.5)
    assert path.stat().st_size == size  # stopped means stopped


class Broken:
    """A source whose library raises something of its own."""

    name = "broken"

    def read(self) -> Figures:
        raise RuntimeError("driver went away")


def test_a_failing_source_leaves_host_figures(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    path = tmp_path / "rank-00003.jsonl"
    run = sampler(path, start(spawn, "import time; time.sleep(60)"), 0.1, Broken())
    run.start()
    wait_for(lambda: len(lines_of(path)) >= 4, 60, "four samples")
    run.stop()
    samples = [parse_line(line) for line in lines_of(path)]
    assert len(samples) >= 4
    assert all(s is not None and s.device is None and s.rss_bytes for s in samples)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_stops_the_writing_quietly(spawn: list[subprocess.Popen[bytes]]) -> None:
    run = sampler(Path("/dev/full"), start(spawn, "import time; time.sleep(60)"), 0.05, Broken())
    run.start()
    run._thread.join(ENDS_WITHIN_S)
    assert not run._thread.is_alive()  # ended by ENOSPC, without a traceback
    run.stop()


def test_a_missing_folder_stops_the_writing_quietly(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    rank = start(spawn, "import time; time.sleep(60)")
    run = sampler(tmp_path / "gone" / "r.jsonl", rank, 0.05, Broken())
    run.start()
    run._thread.join(ENDS_WITHIN_S)
    assert not run._thread.is_alive()
    run.stop()


def test_no_sample_of_a_rank_whose_processes_are_gone(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    """Between the rank's end and the sampler's stop, a sample would read as a rank holding 0 B."""
    done = tmp_path / "done"
    rank = start(spawn, WAIT_FOR_FILE.format(path=str(done)))
    path = tmp_path / "rank-00000.jsonl"
    run = sampler(path, rank, 0.1, Broken())
    run.start()
    wait_for(lambda: len(lines_of(path)) >= 1, 60, "a sample of the running rank")
    done.touch()
    spawn[-1].wait(60)
    time.sleep(0.5)  # five intervals in which the sampler may look at the rank that is gone
    run.stop()
    samples = [parse_line(line) for line in lines_of(path)]
    assert samples, "the rank was sampled while it ran"
    assert all(s is not None and s.procs and s.rss_bytes for s in samples), samples
