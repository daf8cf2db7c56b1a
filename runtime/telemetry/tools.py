"""Vendor tools (nvidia-smi, xpu-smi, rocm-smi) run from the sampler thread, and how a source
says it cannot answer.

A tool runs in its own session with a deadline: one that hangs (a driver stuck in a reset) is
killed with everything it started, so the sampler goes on and the rank never waits on it.

Its exit status is not trusted, only its output: the capture wrapper is a child subreaper whose
:func:`runtime.reaper.wait_for` reaps *any* child that ends while the rank runs, the tool
included, and then Python's ``subprocess`` finds the child already gone and reports exit 0. The
output is read from the pipe to its end either way, so a source judges the answer by whether it
parses, never by the status.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import threading

from runtime.telemetry.devices import Pick

MAX_TIMEOUT_S = 5.0
MIN_TIMEOUT_S = 2.0  # xpu-smi samples for about a second before it prints


class Unavailable(Exception):
    """The source cannot answer in this run (not installed, no device for this rank): it is
    dropped at once."""


class Failed(Exception):
    """This try gave nothing usable; a source that fails :data:`FAILURES_TO_DROP` times in a
    row is dropped."""


FAILURES_TO_DROP = 3


def tool_timeout(interval_s: float) -> float:
    """How long one tool may take: about the interval, so a slow tool only delays a sample,
    but never so long that a hung one holds the sampler for more than a few seconds."""
    return min(MAX_TIMEOUT_S, max(MIN_TIMEOUT_S, interval_s))


class ToolRunner:
    """Runs one tool at a time for one sampler, and kills the one in flight when it stops."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopped = False

    def run(self, argv: list[str], timeout_s: float) -> str:
        """The tool's stdout, decoded with replacement; :class:`Unavailable` when it is not on
        PATH or cannot start, :class:`Failed` when it runs past ``timeout_s``."""
        path = shutil.which(argv[0])
        if path is None:
            raise Unavailable("not found")
        with self._lock:
            if self._stopped:
                raise Failed("stopped")
            try:
                proc = subprocess.Popen(
                    [path, *argv[1:]],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            except OSError as exc:
                raise Unavailable(exc.strerror or str(exc)) from None
            self._proc = proc
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill(proc)
            with contextlib.suppress(subprocess.TimeoutExpired):  # a grandchild that left the
                proc.communicate(timeout=1.0)  # session may hold the pipe: give up on it
            raise Failed(f"no answer in {timeout_s:g} s") from None
        finally:
            with self._lock:
                self._proc = None
        return out.decode("utf-8", "replace")

    def stop(self) -> None:
        """Kill the tool in flight, if any, and refuse to start another."""
        with self._lock:
            self._stopped = True
            if self._proc is not None:
                _kill(self._proc)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """The tool and whatever it started (its own session), so no grandchild keeps the pipe."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


Figures = dict[str, float | int | str]
"""A source's answer: :class:`runtime.telemetry.record.Sample` field names (``device``,
``util_pct``, ``mem_used_bytes``, ...) to values; a field the device did not report is absent."""


def number(text: str) -> float | None:
    """A figure as a tool prints it; None for ``N/A``, ``[Not Supported]`` and the like."""
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


class ToolSource:
    """A vendor tool run once a sample for the rank's device: the tool's command line and how
    to read the rank's figures out of what it prints are all that differ between vendors."""

    name = ""
    vendor = ""  # in "no <vendor> GPU visible to this rank"

    def __init__(self, choice: Pick | None, runner: ToolRunner, timeout_s: float) -> None:
        self._pick = choice
        self._runner = runner
        self._timeout_s = timeout_s

    def argv(self, choice: Pick) -> list[str]:
        raise NotImplementedError

    def parse(self, text: str, choice: Pick) -> Figures:
        raise NotImplementedError

    def read(self) -> Figures:
        if self._pick is None:
            raise Unavailable(f"no {self.vendor} GPU visible to this rank")
        return self.parse(self._runner.run(self.argv(self._pick), self._timeout_s), self._pick)
