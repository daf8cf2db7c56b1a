"""The launcher's word: what mpiexec, PALS and srun print when a job fails, read as data.

When a rank dies, the launcher writes the only account that names the host and says how the
process ended from outside it (killed, out of memory, time limit), while the rank's own log
stops mid-line. This module turns those lines, and the handful of crash lines a rank's own log
may hold (CUDA, NCCL, bus error, watchdog timeout), into :class:`LauncherMessage` values that
the failure explanation (:mod:`ezpz_tui.core.watching.failure`) and failover read.

The patterns are one table (:data:`PATTERNS`), not code per pattern, so adding a machine's
message is one row with a sample in the tests. Hosts and ranks come from named groups. The exact
texts follow what the launchers print and what ezpz's failover package matches on Aurora,
Polaris and Perlmutter (``<host>: shepherd died from signal 9``, ``srun: error: nid001321:
tasks 4-7: Killed``). ``node_fault`` marks the messages that implicate the node rather than the
program; like ezpz, a rank that "died from signal 11/15" or was "Terminated" is not one, since
those are usually the cascade of a failure elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.tail import read_tail
from ezpz_tui.core.watching.tails import strip_ansi
from runtime.rundir import LAUNCHER_LOG

MAX_READ = 256 << 10  # bytes read from the end of a log: a failure is told at its end
MAX_MESSAGES = 50  # per file: a 10,000-rank cascade repeats the same line 10,000 times

_HOST = r"(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*)"
# PALS ``--label`` / Hydra ``-prepend-pattern`` style prefix: ``<host> <rank>: text``.
_LABEL = r"^(?:" + _HOST + r"\s+(?P<rank>\d+):\s+)?.*?"


@dataclass(frozen=True)
class Pattern:
    """One row of the table: how a message looks and what it usually means."""

    kind: str
    launcher: str  # "hydra" | "pals" | "srun" | "any"
    regex: re.Pattern[str]
    meaning: str
    node_fault: bool = False  # implicates the host it names, not the program


def _row(kind: str, launcher: str, regex: str, meaning: str, node_fault: bool = False) -> Pattern:
    return Pattern(kind, launcher, re.compile(regex), meaning, node_fault)


PATTERNS: tuple[Pattern, ...] = (
    # --- MPICH Hydra (mpiexec from MPICH, the mpich wheel, Intel MPI) ---
    _row(
        "hydra_bad_termination",
        "hydra",
        r"BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES",
        "a rank ended with a non-zero exit or a signal; Hydra tore the job down",
    ),
    _row(
        "hydra_running_at",
        "hydra",
        r"^=?\s*PID (?P<pid>\d+) RUNNING AT " + _HOST,
        "the process Hydra reports and its host",
    ),
    _row(
        "hydra_exit_code",
        "hydra",
        r"^=?\s*EXIT CODE: (?P<code>\d+)",
        "the exit status Hydra saw (a signal's number when the process was killed)",
    ),
    _row(
        "hydra_killed_by_signal",
        "hydra",
        r"KILLED BY SIGNAL: (?P<signal>\d+)",
        "the process was killed by this signal",
    ),
    _row(
        "hydra_exit_string",
        "hydra",
        r"TERMINATED WITH THE EXIT STRING: .*\(signal (?P<signal>\d+)\)",
        "the job ended because a process was killed by this signal",
    ),
    # --- Cray PALS (Aurora, Sunspot, Polaris) ---
    _row(
        "pals_shepherd_killed",
        "pals",
        r"^" + _HOST + r":\s+shepherd\s+died\s+from\s+signal\s+(?P<signal>9)\b",
        "PALS killed the node's shepherd: the node went unresponsive, almost always a "
        "hardware fault",
        node_fault=True,
    ),
    _row(
        "pals_rank_signal",
        "pals",
        r"^(?:" + _HOST + r":\s+)?rank (?P<rank>\d+) died from signal (?P<signal>\d+)",
        "a rank was killed by a signal (11 and 15 are usually the cascade of a failure elsewhere)",
    ),
    _row(
        "pals_rank_exit",
        "pals",
        r"^(?:" + _HOST + r":\s+)?rank (?P<rank>\d+) exited with code (?P<code>\d+)",
        "a rank exited with a non-zero code",
    ),
    _row(
        "pals_exit_codes",
        "pals",
        r"application \d+ exit codes: (?P<code>\d+)",
        "the exit codes PALS collected from the ranks",
    ),
    _row(
        "pals_exit_signals",
        "pals",
        r"application \d+ exit signals: (?P<what>.+)",
        "the signals PALS saw end the ranks",
    ),
    # --- Slurm srun / slurmstepd ---
    _row(
        "srun_task_killed",
        "srun",
        r"^srun: error: " + _HOST + r": tasks? (?P<ranks>[\d,\-]+): Killed\b",
        "srun saw the task killed (SIGKILL) on this node: the node or the OOM killer",
        node_fault=True,
    ),
    _row(
        "srun_task_exit",
        "srun",
        r"^srun: error: "
        + _HOST
        + r": tasks? (?P<ranks>[\d,\-]+): Exited with exit code (?P<code>\d+)",
        "the task exited with a non-zero code",
    ),
    _row(
        "srun_task_oom",
        "srun",
        r"^srun: error: " + _HOST + r": tasks? (?P<ranks>[\d,\-]+): Out Of Memory",
        "the task ran out of memory (the cgroup's OOM killer)",
    ),
    _row(
        "slurm_oom_kill",
        "srun",
        r"Detected \d+ oom[-_]kill event",
        "the cgroup's out-of-memory handler killed processes of the step",
    ),
    _row(
        "slurm_step_aborted",
        "srun",
        r"^srun: Job step aborted",
        "srun is tearing the step down after a task failed",
    ),
    _row(
        "slurm_time_limit",
        "srun",
        r"\*\*\* (?:STEP|JOB) [\d.]+ ON " + _HOST + r" CANCELLED AT \S+ DUE TO TIME LIMIT",
        "the job ran out of walltime",
    ),
    _row(
        "slurm_node_failure",
        "srun",
        r"\*\*\* (?:STEP|JOB) [\d.]+ ON " + _HOST + r" CANCELLED AT \S+ DUE TO NODE FAIL",
        "Slurm lost a node of the job",
        node_fault=True,
    ),
    # --- anywhere: launcher output or a rank's own log ---
    _row(
        "cuda_oom",
        "any",
        _LABEL + r"(?:CUDA out of memory|CUDA error: out of memory|OutOfMemoryError"
        r"|UR_RESULT_ERROR_OUT_OF_RESOURCES)",
        "the accelerator ran out of memory",
    ),
    _row(
        "gpu_lost",
        "any",
        _LABEL
        + r"(?:GPU is lost|has fallen off the bus|Uncorrectable ECC error"
        + r"|CUDA-capable device\(s\) is/are busy or unavailable)",
        "the GPU failed or is held by another process: a node fault",
        node_fault=True,
    ),
    _row(
        "cuda_error",
        "any",
        _LABEL + r"CUDA error(?!: out of memory)",
        "a CUDA runtime error: a driver or device fault, or a bad kernel launch",
        node_fault=True,
    ),
    _row(
        "nccl_error",
        "any",
        _LABEL + r"(?:NCCL error|ncclSystemError|ncclUnhandledCudaError|ncclInternalError"
        r"|ncclRemoteError)",
        "NCCL failed: often the network fabric or a GPU of this node",
        node_fault=True,
    ),
    _row(
        "nccl_warn",
        "any",
        _LABEL + r"NCCL WARN",
        "NCCL warned: read it for the fabric or GPU that misbehaved",
    ),
    _row(
        "collective_timeout",
        "any",
        _LABEL + r"(?:Watchdog caught collective operation timeout|\[.*gloo.*\] Timed out)",
        "a collective timed out: a rank fell behind, hung or died before joining",
    ),
    _row(
        "gloo_peer_closed",
        "any",
        r"Connection closed by peer \[(?P<host>[0-9a-fA-F.:]+)\]:\d+",
        "a peer's connection closed: the named peer died or its node failed",
    ),
    _row(
        "no_space",
        "any",
        _LABEL + r"(?:No space left on device|Disk quota exceeded)",
        "the disk (or the quota on it) is full: nothing more could be written there",
    ),
    _row(
        "bus_error",
        "any",
        _LABEL + r"\bBus error\b",
        "bus error: bad memory access, often a failing node or a full /dev/shm",
        node_fault=True,
    ),
    _row(
        "segfault",
        "any",
        _LABEL + r"\bSegmentation fault\b",
        "segmentation fault: a native crash (an extension, a library or a driver)",
    ),
    _row(
        "bad_alloc",
        "any",
        _LABEL + r"std::bad_alloc",
        "a native allocation failed: host memory ran out",
    ),
)


@dataclass(frozen=True)
class LauncherMessage:
    """One line that says how a job failed, with what it names."""

    kind: str
    launcher: str
    text: str
    meaning: str
    source: str  # the file it came from, relative to the run directory
    line: int  # 1-based, counted within what was read
    node_fault: bool = False
    rank: int | None = None
    host: str | None = None
    pid: int | None = None
    exit_code: int | None = None
    signal: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _group(match: re.Match[str], name: str) -> str | None:
    return match.groupdict().get(name)


def _int_group(match: re.Match[str], name: str) -> int | None:
    value = _group(match, name)
    return int(value) if value is not None and value.isdigit() else None


def _single_rank(match: re.Match[str]) -> int | None:
    """``rank N`` or srun's ``task N``; a range (``tasks 4-7``) names no one rank."""
    rank = _int_group(match, "rank")
    return rank if rank is not None else _int_group(match, "ranks")


def match_line(
    text: str, source: str = LAUNCHER_LOG, line: int = 0, patterns: Sequence[Pattern] = PATTERNS
) -> LauncherMessage | None:
    """The first pattern ``text`` matches, as a message; ``None`` for an ordinary line."""
    plain = strip_ansi(text).rstrip("\r\n")
    for pattern in patterns:
        match = pattern.regex.search(plain)
        if match is None:
            continue
        return LauncherMessage(
            kind=pattern.kind,
            launcher=pattern.launcher,
            text=plain.strip().strip("=").strip(),  # Hydra frames its block in '='
            meaning=pattern.meaning,
            source=source,
            line=line,
            node_fault=pattern.node_fault,
            rank=_single_rank(match),
            host=_group(match, "host"),
            pid=_int_group(match, "pid"),
            exit_code=_int_group(match, "code"),
            signal=_int_group(match, "signal"),
        )
    return None


def parse_text(text: str, source: str = LAUNCHER_LOG) -> list[LauncherMessage]:
    """Every failure message in ``text``, in order, repeats of the same line dropped."""
    found: list[LauncherMessage] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        message = match_line(line, source, number)
        if message is None or message.text in seen:
            continue
        seen.add(message.text)
        found.append(message)
        if len(found) >= MAX_MESSAGES:
            break
    return found


def read_messages(path: Path, source: str) -> list[LauncherMessage]:
    """The failure messages in the end of one log file; never raises."""
    return parse_text(read_tail(path, MAX_READ), source)
