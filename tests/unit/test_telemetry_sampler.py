"""The host figures of a real process tree and the sampler thread that writes them."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from runtime.telemetry.accelerator import Accelerator, Source
from runtime.telemetry.devices import Pick
from runtime.telemetry.host import ProcessTree
from runtime.telemetry.nvidia import Nvml
from runtime.telemetry.record import DEFAULT_INTERVAL_S, parse_line
from runtime.telemetry.sampler import Sampler, interval_from, start_sampler
from runtime.telemetry.tools import Figures, ToolRunner
from tests.fixtures.nvml import fake_nvml

BUSY = "while True: pass"
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


def start(spawn: list[subprocess.Popen[bytes]], code: str) -> int:
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    spawn.append(proc)
    return proc.pid


def cpu_over(tree: ProcessTree, seconds: float) -> Figures:
    tree.read()
    time.sleep(seconds)
    return tree.read()


def test_a_busy_tree_reads_busy_and_a_sleeping_one_idle(
    spawn: list[subprocess.Popen[bytes]],
) -> None:
    busy = ProcessTree(start(spawn, BUSY))
    idle = ProcessTree(start(spawn, "import time; time.sleep(60)"))
    time.sleep(0.3)  # past the interpreters' start
    assert "cpu_pct" not in ProcessTree(idle.root).read()  # one reading has no interval
    # A busy loop owns a core; on a loaded 2-core machine it still gets well over a fifth.
    assert cpu_over(busy, 1.0)["cpu_pct"] > 20
    assert cpu_over(idle, 1.0)["cpu_pct"] < 10


def test_the_tree_holds_every_descendant(spawn: list[subprocess.Popen[bytes]]) -> None:
    tree = ProcessTree(start(spawn, FAMILY))
    deadline = time.monotonic() + 10
    while len(tree.pids()) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    figures = cpu_over(tree, 1.0)
    assert figures["procs"] == 3
    assert figures["cpu_pct"] > 50  # the busy grandchild counts
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
    run = sampler(path, start(spawn, BUSY), 0.2, Nvml(Pick(1)))
    began = time.time()
    run.start()
    time.sleep(1.1)
    run.stop()
    lines = path.read_bytes().splitlines(keepends=True)
    assert all(line.endswith(b"\n") for line in lines)
    samples = [parse_line(line) for line in lines]
    assert 3 <= len(samples) <= 6
    assert samples[0] is not None and samples[0].time >= began + 0.2
    for sample in samples:
        assert sample is not None and sample.cpu_pct is not None and sample.rss_bytes
        assert (sample.device, sample.util_pct, sample.power_w) == ("nvml:1", 17.0, 101.5)
    times = [sample.time for sample in samples if sample is not None]
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert all(0.1 < gap < 0.5 for gap in gaps), gaps
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
    time.sleep(0.65)
    run.stop()
    samples = [parse_line(line) for line in path.read_bytes().splitlines()]
    assert len(samples) >= 4
    assert all(s is not None and s.device is None and s.rss_bytes for s in samples)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_full_disk_stops_the_writing_quietly(spawn: list[subprocess.Popen[bytes]]) -> None:
    run = sampler(Path("/dev/full"), start(spawn, "import time; time.sleep(60)"), 0.05, Broken())
    run.start()
    time.sleep(0.3)
    assert not run._thread.is_alive()  # ended by ENOSPC, without a traceback
    run.stop()


def test_a_missing_folder_stops_the_writing_quietly(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    rank = start(spawn, "import time; time.sleep(5)")
    run = sampler(tmp_path / "gone" / "r.jsonl", rank, 0.05, Broken())
    run.start()
    time.sleep(0.3)
    assert not run._thread.is_alive()
    run.stop()


def test_no_sample_of_a_rank_whose_processes_are_gone(
    tmp_path: Path, spawn: list[subprocess.Popen[bytes]]
) -> None:
    """Between the rank's end and the sampler's stop, a sample would read as a rank holding 0 B."""
    rank = start(spawn, "import time; time.sleep(0.35)")
    path = tmp_path / "rank-00000.jsonl"
    run = sampler(path, rank, 0.1, Broken())
    run.start()
    spawn[-1].wait(10)
    time.sleep(0.5)
    run.stop()
    samples = [parse_line(line) for line in path.read_bytes().splitlines()]
    assert samples, "the rank was sampled while it ran"
    assert all(s is not None and s.procs and s.rss_bytes for s in samples), samples
