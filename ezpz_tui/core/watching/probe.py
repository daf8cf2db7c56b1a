"""The CPU's peak, measured: a short matmul probe run once per host and interpreter, cached.

No datasheet gives the FLOP/s a CPU run can reach (it depends on the cores, their vector units,
torch's BLAS and its threads), so for a run with no accelerator the peak is measured: the run's
own interpreter runs :mod:`runtime.efficiency.matmul` (torch is never imported here) and the
answer is kept in the user's cache directory (``ezpz-tui/peak-probe.json``), keyed by host and
interpreter and the threads it ran, so it is paid for once. The probe measures at a rank's
threads (``OMP_NUM_THREADS``, which the launcher sets to the host's cores over its ranks), or
the whole host (every core) when the run does not say them; the best of several repetitions
after a warm-up. An answer kept by another way of probing (:data:`METHOD`) is measured again.
Every peak it gives has ``measured`` set and says how it was measured. A run on another host
than this one is measured only where that host's answer is already in the cache: a probe here
would measure the wrong machine.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import platformdirs

from runtime.atomic import write_atomic
from runtime.efficiency.peaks import Peak

APP_NAME = "ezpz-tui"
PROBE_MODULE = "runtime.efficiency.matmul"
TIMEOUT_S = 120.0
METHOD = 2
"""How the kept answers were measured: 2 is every core, warm-up and best of several
(:func:`runtime.efficiency.matmul.best_rate`); an answer without it (the threads the caller
happened to have, one short warm-up) is not this host's peak and is measured again."""


def cache_path() -> Path:
    """Where the measured peaks are kept (``$XDG_CACHE_HOME/ezpz-tui`` on Linux)."""
    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)) / "peak-probe.json"


def _key(host: str, interpreter: str, threads: int | None) -> str:
    return f"{host} {interpreter}" + (f" threads={threads}" if threads else "")


def _read_cache() -> dict[str, dict[str, object]]:
    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _peak(
    host: str, interpreter: str, answer: dict[str, object], threads: int | None
) -> Peak | None:
    tflops = answer.get("tflops")
    if isinstance(tflops, bool) or not isinstance(tflops, (int, float)) or not tflops > 0:
        return None
    how = (
        f"measured: {answer.get('size')}x{answer.get('size')} float32 matmul, "
        f"{answer.get('threads')} threads, best of {answer.get('repeats')}, by {interpreter}"
    )
    what = f"CPU of {host}"
    if threads:
        what = f"{threads} thread{'s' * (threads > 1)} of the {what}"
    return Peak(float(tflops), "fp32", what, how, clock="", measured=True)


def cached_peak(host: str, interpreter: str, threads: int | None = None) -> Peak | None:
    """The peak measured before for ``interpreter`` on ``host`` at ``threads`` (None: every
    core), if any."""
    answer = _read_cache().get(_key(host, interpreter, threads))
    if not isinstance(answer, dict) or answer.get("method") != METHOD:
        return None
    return _peak(host, interpreter, answer, threads)


def this_host() -> str:
    return socket.gethostname()


def measure(interpreter: str, refresh: bool = False, threads: int | None = None) -> Peak | str:
    """This host's peak for ``interpreter`` at ``threads`` (None: every core): the cached one,
    else measured now (seconds) and cached; or why it cannot be had, in a sentence."""
    host = this_host()
    if not refresh:
        found = cached_peak(host, interpreter, threads)
        if found is not None:
            return found
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])  # where runtime/ is, for any interpreter
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    try:
        done = subprocess.run(
            [interpreter, "-m", PROBE_MODULE, *(["--threads", str(threads)] if threads else [])],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the CPU probe could not run {interpreter}: {exc}"
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except ValueError:
        answer = None
    peak = _peak(host, interpreter, answer, threads) if isinstance(answer, dict) else None
    if peak is None or not isinstance(answer, dict):
        said = (done.stderr.strip().splitlines() or ["no answer"])[-1]
        return f"the CPU probe failed under {interpreter}: {said}"
    cache = _read_cache()
    cache[_key(host, interpreter, threads)] = {
        **answer,
        "method": METHOD,
        "measured_at": time.time(),
    }
    try:
        cache_path().parent.mkdir(parents=True, exist_ok=True)
        write_atomic(cache_path(), json.dumps(cache, indent=1).encode())
    except OSError:
        pass  # measured, not kept: the next reader measures again
    return peak
