"""A relaunch's preflight: the new layout runs one step before the healthy run is touched.

A layout the plan's check accepts can still fail in the script (the demo's ``--heads 3`` under
TP 2, a shard that does not fit); found after the stop, it costs the run that was fine. So the
ranks that differ most, rank 0 (the first pipeline stage, the embedding) and the first rank of
the last stage (the head and the loss) when PP > 1, run the plan's command alone, side by side,
on this node's CPU, each in a world of the new size whose peers are torch's fake process group
(:mod:`runtime.preflight`: ``EZPZ_PREFLIGHT=rank,world``). Each stops after its first recorded
step. What they come to is the relaunch question's verdict: passed with the peak memory, failed
with the cause (the exception's line of the traceback, else the last line the script wrote),
or not preflighted for a script that never calls ``runtime.setup()`` (it leaves no mark).

Nothing is written to the outputs directory: the ranks' run directory is a temporary one, and
the checkpoint a relaunch resumes from is not loaded (a fake group cannot carry a load's
collectives): the preflight checks the layout, not the checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ezpz_tui.core.launching.plan import CheckedPlan
from ezpz_tui.core.runs.exit_meanings import meaning
from ezpz_tui.core.runs.tail import read_tail
from ezpz_tui.core.runs.tracebacks import last_traceback, raised_in
from runtime.checkpoint_dirs import RESUME_VAR
from runtime.env import RANK_SOURCE_VAR, RANK_VARS, RUN_DIR_VAR, SIZE_VARS
from runtime.exit_hook import DESTROYED
from runtime.preflight import PREFLIGHT_VAR, SETUP, SOURCE, STEP, mark_path

TIMEOUT_S = 120.0  # the demo takes seconds; a script's imports and data may take longer
OUTPUT = "output.txt"  # each rank's stdout and stderr, in its temporary folder

PASSED, FAILED, NOT_PREFLIGHTED = "passed", "failed", "not preflighted"


@dataclass(frozen=True)
class RankOutcome:
    """What one preflight rank came to."""

    rank: int
    verdict: str  # PASSED, FAILED or NOT_PREFLIGHTED
    cause: str = ""  # FAILED: what it raised or said; NOT_PREFLIGHTED: why not
    peak_rss_bytes: int | None = None


@dataclass(frozen=True)
class Preflight:
    """The preflight of one plan: the worst of its ranks' verdicts, the cause, the peak."""

    world: int
    ranks: tuple[RankOutcome, ...]
    seconds: float

    @property
    def verdict(self) -> str:
        verdicts = {r.verdict for r in self.ranks}
        return next(v for v in (FAILED, NOT_PREFLIGHTED, PASSED) if v in verdicts)

    @property
    def refuses(self) -> bool:
        """Whether the relaunch should not go ahead unasked: the layout failed its step."""
        return self.verdict == FAILED

    @property
    def said_by(self) -> RankOutcome:
        """The first rank whose verdict is the preflight's."""
        return next(r for r in self.ranks if r.verdict == self.verdict)

    @property
    def cause(self) -> str:
        """Why it failed, or why it was not preflighted ("" when it passed)."""
        return self.said_by.cause

    @property
    def peak_rss_bytes(self) -> int | None:
        peaks = [r.peak_rss_bytes for r in self.ranks if r.peak_rss_bytes is not None]
        return max(peaks) if peaks else None

    def lines(
        self, estimate_bytes: float | None = None, available_bytes: float | None = None
    ) -> list[str]:
        """The question's lines: the verdict with its cause, or with the peak memory, set
        against the demo's estimate and what a rank has here (each when known)."""
        took = f"{self.seconds:.0f} s"
        if self.verdict == FAILED:
            where = f"rank {self.said_by.rank} of {self.world}"
            return [f"Preflight failed on {where} ({took}): {self.cause}"]
        if self.verdict == NOT_PREFLIGHTED:
            return [f"Not preflighted: {self.cause}"]
        ranks = " and ".join(f"rank {r.rank}" for r in self.ranks)
        said = f"Preflight passed: {ranks} of {self.world} ran a step alone in {took}"
        peak = self.peak_rss_bytes
        if peak is None:
            return [said]
        memory = f"peak memory {_size(peak)} a rank (resident on the CPU, torch included"
        if available_bytes is not None:
            memory += f"; {_size(available_bytes)} available a rank here"
        memory += ")"
        if estimate_bytes is not None:
            memory += f"; the demo's estimate of its model's share: {_size(estimate_bytes)}"
        return [said, memory]


def available_a_rank(checked: CheckedPlan) -> float | None:
    """What each rank of ``checked`` may hold on a CPU allocation (this host's available
    memory over its ranks); None on accelerators, whose memory the CPU's peak does not meet."""
    if checked.alloc.accelerator_kind != "cpu":
        return None
    try:
        with open("/proc/meminfo") as fh:
            fields = dict(line.split(":", 1) for line in fh)
    except (OSError, ValueError):
        return None
    kib = fields.get("MemAvailable", "").split()
    if not kib or not kib[0].isdigit():
        return None
    return int(kib[0]) * 1024 / max(1, checked.plan.ranks_per_node(checked.alloc))


def preflight_ranks(world: int, pp: int) -> tuple[int, ...]:
    """Rank 0, and the first rank of the last pipeline stage (PP is the outermost mesh
    dimension, so the stages are contiguous blocks of ranks)."""
    last = (pp - 1) * (world // pp) if pp > 1 else 0
    return (0, last) if last else (0,)


def rank_env(
    base: Mapping[str, str], checked: CheckedPlan, rank: int, run_dir: Path
) -> dict[str, str]:
    """The environment of preflight rank ``rank``: this one's, less any launcher's placement
    and the checkpoint to resume from, plus the plan's env, its sizes, torchrun's variables
    for this rank (what a script's logger and History read), the CPU and the fake world."""
    plan, world = checked.plan, checked.world_size
    env = {k: v for k, v in base.items() if k not in RANK_VARS}
    env.update(plan.env_dict())
    env.pop(RESUME_VAR, None)
    env.update({SIZE_VARS[name]: str(getattr(plan, name)) for name in ("tp", "pp", "cp")})
    env.update(RANK=str(rank), LOCAL_RANK="0", WORLD_SIZE=str(world), LOCAL_WORLD_SIZE="1")
    env.update(GROUP_RANK="0", PYTHONUNBUFFERED="1", TORCH_DEVICE="cpu")
    env.setdefault("OMP_NUM_THREADS", "1")
    env[RANK_SOURCE_VAR] = SOURCE
    env[PREFLIGHT_VAR] = f"{rank},{world}"
    env[RUN_DIR_VAR] = str(run_dir)
    return env


def run_preflight(
    checked: CheckedPlan,
    timeout_s: float = TIMEOUT_S,
    cwd: Path | None = None,
    base_env: Mapping[str, str] | None = None,
) -> Preflight:
    """Run ``checked``'s preflight ranks side by side and wait for them (at most
    ``timeout_s``); never raises for what the script does."""
    world, start = checked.world_size, time.monotonic()
    base = os.environ if base_env is None else base_env
    ranks = preflight_ranks(world, checked.plan.pp)
    with tempfile.TemporaryDirectory(prefix="ezpz-preflight-") as tmp:
        started: list[tuple[int, Path, subprocess.Popen[bytes] | str]] = []
        for rank in ranks:
            folder = Path(tmp) / f"rank-{rank}"
            folder.mkdir()
            env = rank_env(base, checked, rank, folder)
            started.append((rank, folder, _start(checked.plan.command, folder, cwd, env)))
        outcomes = [
            _outcome(rank, folder, proc, start + timeout_s) for rank, folder, proc in started
        ]
    return Preflight(world, tuple(outcomes), time.monotonic() - start)


def _start(
    command: Sequence[str], folder: Path, cwd: Path | None, env: Mapping[str, str]
) -> subprocess.Popen[bytes] | str:
    """The rank's process in its own session (so a timeout ends what it started too), its
    output in ``folder``; or why it could not start."""
    try:
        with open(folder / OUTPUT, "wb") as out:
            return subprocess.Popen(
                list(command),
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    except OSError as exc:
        return f"{command[0] if command else 'the command'} cannot start: {exc.strerror or exc}"


def _size(value: float) -> str:
    if value >= 2**30:
        return f"{value / 2**30:.1f} GiB"
    return f"{value / 2**20:.0f} MiB"


def _outcome(
    rank: int, folder: Path, proc: subprocess.Popen[bytes] | str, deadline: float
) -> RankOutcome:
    if isinstance(proc, str):
        return RankOutcome(rank, FAILED, proc)
    try:
        code = proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        _end(proc)
        code = None
    mark = _read_mark(mark_path(folder, rank))
    phase = mark.get("phase")
    if phase == STEP:
        peak = mark.get("peak_rss_bytes")
        return RankOutcome(rank, PASSED, peak_rss_bytes=peak if isinstance(peak, int) else None)
    if phase != SETUP:
        ended = "still running" if code is None else _ended(code)
        why = f"the command never called runtime.setup() ({ended})"
        return RankOutcome(rank, NOT_PREFLIGHTED, why)
    if code is None:
        return RankOutcome(rank, NOT_PREFLIGHTED, "no step recorded in time")
    if code == 0:
        why = "it reached runtime.setup() but recorded no step (runtime.History)"
        return RankOutcome(rank, NOT_PREFLIGHTED, why)
    return RankOutcome(rank, FAILED, _cause(folder / OUTPUT, code))


def _end(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the rank's session: a preflight has nothing to save."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _read_mark(path: Path) -> dict[str, object]:
    try:
        mark = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return mark if isinstance(mark, dict) else {}


def _ended(code: int) -> str:
    """How a process ended, in words: ``exit 1``, ``SIGKILL (out of memory?)``."""
    if code >= 0:
        return f"exit {code}"
    name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
    said = meaning(None, -code)
    return f"{name}: {said}" if said else name


def _cause(output: Path, code: int) -> str:
    """What the rank raised (its traceback's last line), else the last line it wrote (a
    ``SystemExit`` with a message prints only that), with how it ended."""
    lines = read_tail(output, 64 * 1024).splitlines()
    exception, _block = last_traceback(lines)
    if exception is not None:
        raised = raised_in(exception, _block)
        return f"{raised.type}: {raised.message}" if raised.message else raised.type
    said = [line.strip() for line in lines if line.strip() and line.strip() != DESTROYED]
    return said[-1] if said else f"it ended with {_ended(code)} and said nothing"
