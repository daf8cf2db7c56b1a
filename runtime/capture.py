"""The per-rank wrapper the launcher puts in front of the user's command.

``python -m runtime.capture --run-dir D -- CMD ...``

It learns its rank from the launcher's environment (never from MPI: initialising MPI here would
take the PMI connection the real rank needs), points the child's stdout and stderr straight at
``D/logs/rank-NNNNN.log`` (a file, so there is no pipe to stall on and a native crash's last
words are kept), forwards the signals a stop sends, and records how the child ended in
``D/status/rank-NNNNN.json``. Inherited descriptors stay open for the child: MPICH's Hydra hands
each rank its PMI connection as an inherited fd (PMI_FD).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from runtime.atomic import write_atomic
from runtime.env import RUN_DIR_VAR, rank_info_or_single

FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)


def status_path(run_dir: Path, rank: int) -> Path:
    return run_dir / "status" / f"rank-{rank:05d}.json"


def log_path(run_dir: Path, rank: int) -> Path:
    return run_dir / "logs" / f"rank-{rank:05d}.log"


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    write_atomic(path, (json.dumps(data, indent=1) + "\n").encode())


def read_statuses(run_dir: Path) -> list[dict[str, Any]]:
    """Every rank's status file that can be read, by rank; half-written or foreign ones skipped."""
    statuses = []
    for path in sorted((Path(run_dir) / "status").glob("rank-*.json")):
        try:
            data = json.loads(path.read_text(errors="replace"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            statuses.append(data)
    return statuses


def _omp_threads(local_world_size: int) -> str:
    """Split this node's cores among its ranks unless a CPU binding already did."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        usable = os.cpu_count() or 1
    total = os.cpu_count() or usable
    per_rank = usable if usable < total else usable // max(local_world_size, 1)
    return str(max(per_rank, 1))


def child_env(run_dir: Path, local_world_size: int) -> dict[str, str]:
    env = dict(os.environ)
    env[RUN_DIR_VAR] = str(run_dir)
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("OMP_NUM_THREADS", _omp_threads(local_world_size))
    return env


def run(run_dir: Path, command: list[str]) -> int:
    info = rank_info_or_single()
    for sub in ("logs", "status", "metrics"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    status: dict[str, Any] = {
        "rank": info.rank,
        "local_rank": info.local_rank,
        "world_size": info.world_size,
        "host": socket.gethostname(),
        "wrapper_pid": os.getpid(),
        "pid": None,
        "command": command,
        "start": time.time(),
        "end": None,
        "state": "running",
        "exit_code": None,
        "signal": None,
    }
    spath = status_path(run_dir, info.rank)
    received: list[int] = []

    def forward(signum: int, _frame: object) -> None:
        received.append(signum)
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    child: subprocess.Popen[bytes] | None = None
    for sig in FORWARDED:
        signal.signal(sig, forward)
    with open(log_path(run_dir, info.rank), "ab", buffering=0) as log:
        try:
            child = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env(run_dir, info.local_world_size),
                close_fds=False,
            )
        except OSError as exc:
            log.write(f"ezpz capture: cannot start {command[0]!r}: {exc}\n".encode())
            status.update(end=time.time(), state="failed", exit_code=127, error=str(exc))
            write_json_atomic(spath, status)
            return 127
        status["pid"] = child.pid
        write_json_atomic(spath, status)
        if received:  # a stop that arrived while the child was being started
            child.send_signal(received[-1])
        while True:
            try:
                code = child.wait()
                break
            except InterruptedError:  # pragma: no cover - PEP 475 retries for us
                continue
    status["end"] = time.time()
    if code < 0:
        status.update(state="failed", signal=-code, signal_name=signal.Signals(-code).name)
        exit_code = 128 - code
    else:
        status.update(state="succeeded" if code == 0 else "failed", exit_code=code)
        exit_code = code
    if received:
        status["signals_received"] = [signal.Signals(s).name for s in received]
    write_json_atomic(spath, status)
    if code < 0 and -code not in received:
        _die_of(-code)
    return exit_code


def _die_of(signum: int) -> None:
    """End this wrapper by the signal that killed its child (a crash, the OOM killer).

    Launchers tell a crash from an exit: MPICH's Hydra tears the whole job down when a rank
    dies of a signal but lets the others run on after a non-zero exit, so a wrapper that only
    exited 128+N would leave the healthy ranks waiting for a dead peer. No core file: the child
    has written its own.
    """
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    with contextlib.suppress(ValueError, OSError):  # SIGKILL has no handler to reset
        signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m runtime.capture",
        description="Run one rank's command with its output and exit status in the run directory.",
    )
    parser.add_argument("--run-dir", required=True, type=Path, help="the run directory")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given after --")
    return run(args.run_dir.resolve(), command)


if __name__ == "__main__":
    sys.exit(main())
