"""The capture wrapper's sampler: a daemon thread appending one telemetry line per interval.

It lives in the wrapper, not the rank, so a rank that hangs in a collective, spins in native
code or never imports Python logging is still sampled, and the rank pays nothing for it. Each
line is one ``os.write`` on an ``O_APPEND`` descriptor, whole or not at all for a follower on
this node. The first line comes one interval after the sampler's start, since CPU use needs two
readings; the wrapper starts it once the rank has run a moment
(``runtime.capture.SAMPLER_AFTER_S``), so a rank that ends sooner, which would have had no
line, does not pay for its start.

It must never hurt the rank or the wrapper: memory stays bounded (only the previous reading is
kept), a sample that raises is skipped, a tool that hangs is killed (:mod:`.tools`), and once
the file cannot be written (a full disk, a folder that was removed) it stops writing, quietly.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from runtime import node_digest
from runtime.rundir import RunDir
from runtime.telemetry.accelerator import Accelerator, sources_for
from runtime.telemetry.devices import expected
from runtime.telemetry.host import ProcessTree
from runtime.telemetry.record import DEFAULT_INTERVAL_S, INTERVAL_VAR, Sample
from runtime.telemetry.tools import ToolRunner, tool_timeout

STOP_WAIT_S = 1.0  # the wrapper waits this long for a sample in flight before it goes on


def interval_from(env: Mapping[str, str]) -> float:
    """Seconds between samples from ``EZPZ_TELEMETRY_S``; 0 turns sampling off, and a value
    that is not a number of seconds gives the default rather than no telemetry."""
    raw = env.get(INTERVAL_VAR, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_INTERVAL_S
    except ValueError:
        return DEFAULT_INTERVAL_S
    return value if math.isfinite(value) and value >= 0 else DEFAULT_INTERVAL_S


class Sampler:
    """Samples ``tree`` and ``accelerator`` every ``interval_s`` into ``path`` (whose folder
    the run's folders already hold) until :meth:`stop`."""

    def __init__(
        self,
        path: Path,
        tree: ProcessTree,
        accelerator: Accelerator,
        interval_s: float,
        runner: ToolRunner,
        rank: int | None = None,
        run_dir: Path | None = None,
    ) -> None:
        self.path = path
        self._rank = rank  # whose node digest gets each sample (runtime.node_digest)
        self._run_dir = run_dir
        self._tree = tree
        self._accelerator = accelerator
        self._interval_s = interval_s
        self._runner = runner
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ezpz-telemetry", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, wait_s: float = STOP_WAIT_S) -> None:
        """End the sampling: kill a tool in flight and wait up to ``wait_s`` for the thread
        (a daemon, so one stuck in a driver call cannot keep the wrapper alive)."""
        self._stopping.set()
        self._runner.stop()
        self._thread.join(wait_s)

    def sample(self) -> Sample | None:
        """One sample now: the host figures first, so no tool of the sampler's is running.
        None once the rank's processes are gone: a sample of nothing would read as a rank
        holding 0 B (seen as the last line of a run on an H100)."""
        host = self._tree.read()
        if host.get("procs") == 0:  # without procfs there is no count, and samples go on
            return None
        return Sample(time=time.time(), **host, **self._accelerator.read())

    def _report(self, sample: Sample) -> None:
        """The sample in the rank's node digest. Never as its writer: this is the wrapper, not
        the rank, and a node's writer lives in a rank (it is dropped until one has reported)."""
        fields = {k: v for k, v in vars(sample).items() if v is not None}
        node_digest.report(
            "telemetry", fields, rank=self._rank, may_write=False, run_dir=self._run_dir
        )

    def _run(self) -> None:
        fd: int | None = None
        with contextlib.suppress(Exception):
            self._tree.read()  # the first CPU reading, to measure the first interval from
        due = time.monotonic() + self._interval_s
        try:
            while not self._stopping.wait(max(due - time.monotonic(), 0.0)):
                try:
                    sample = self.sample()
                    line = (sample.to_json() + "\n").encode() if sample else b""
                except Exception:  # one bad sample is skipped, never the sampling
                    line = b""
                if line and not self._stopping.is_set():
                    if fd is None:
                        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                    os.write(fd, line)
                    if sample is not None and self._run_dir is not None:
                        self._report(sample)
                due += self._interval_s
                if due < time.monotonic():  # a slow sample skips the ticks it took
                    due = time.monotonic() + self._interval_s
        except OSError:
            pass  # the file cannot be written: stop, and say nothing into a rank's output
        finally:
            if fd is not None:
                os.close(fd)


def start_sampler(
    run_dir: Path,
    rank: int,
    local_rank: int,
    pid: int,
    note: Callable[[str], None],
    env: Mapping[str, str] | None = None,
) -> Sampler | None:
    """Start sampling the rank whose command is ``pid`` (a child of this wrapper), or nothing
    when ``EZPZ_TELEMETRY_S`` is 0 or no thread can be started. ``note`` gets the one log line
    about missing accelerator figures, when a device was expected."""
    env = os.environ if env is None else env
    interval = interval_from(env)
    if interval <= 0:
        return None
    runner = ToolRunner()
    sources = sources_for(local_rank, env, runner, tool_timeout(interval))
    sampler = Sampler(
        RunDir(run_dir, fresh=True).telemetry(rank),
        ProcessTree(pid, adopter=os.getpid()),
        Accelerator(sources, expected(env), note),
        interval,
        runner,
        rank,
        run_dir,
    )
    try:
        sampler.start()
    except RuntimeError:  # no thread to be had: the rank runs unsampled
        return None
    return sampler
