"""What the doctor's probes found last time, so that a start shows the doctor's answer at once.

A probe starts an interpreter that imports torch or mpi4py (a second or more, longer on a
shared filesystem), yet its answer changes only when what it reads changes: the interpreter,
torch and the other packages beside it, the launcher, the job, and the environment variables
those read. Each answer is kept under the user's cache directory, keyed by exactly those (paths,
sizes and mtimes, the job id, the variables). A doctor that reuses answers says so; the UI shows
its rows labelled "cached" and probes again behind them, replacing the rows where they differ.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import platformdirs

APP_NAME = "ezpz-tui"
MAX_ENTRIES = 64
"""Answers kept; the oldest go first (a few interpreters, launchers and jobs a day)."""

ENV_NAMES = frozenset(
    {"PATH", "PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "VIRTUAL_ENV", "CONDA_PREFIX"}
)
ENV_PREFIXES = ("TORCH_", "CUDA_", "HIP_", "ROCR_", "ZE_", "CCL_", "NCCL_", "I_MPI_", "MPICH_")
"""The variables a probe's answer depends on: where Python and its libraries are found, and
what picks the device, the backend and the MPI."""


def cache_path() -> Path:
    """``probes.json`` in the user cache directory (``$XDG_CACHE_HOME/ezpz-tui`` on Linux)."""
    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)) / "probes.json"


def _stat(path: str | os.PathLike[str]) -> list[object]:
    try:
        st = os.stat(path)
    except OSError:
        return [os.fspath(path), None]
    return [os.fspath(path), st.st_size, st.st_mtime_ns]


def _packages(python: str) -> list[list[object]]:
    """Where ``python`` finds torch and the rest: its site-packages folders (their mtime moves
    with every install or removal) and torch's version file.

    Read from the files alone, without starting ``python``: the prefix above its ``bin``, and
    for this process's own interpreter also wherever its ``sys.path`` finds torch."""
    prefix = Path(python).parent.parent
    found = sorted(prefix.glob("lib*/python3*/site-packages"))
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        spec = importlib.util.find_spec("torch")
        if spec is not None and spec.origin:
            found.append(Path(spec.origin).parent.parent)
    facts = [_stat(prefix / "pyvenv.cfg")]
    for site in dict.fromkeys(found):
        facts += [_stat(site), _stat(site / "torch" / "version.py")]
    return facts


def interpreter_key(python: str, env: Mapping[str, str], job: str | None) -> list[object]:
    """What an answer from ``python`` depends on: the interpreter (the path named and the
    binary it resolves to), its packages, the job and the variables probes read."""
    names = sorted(k for k in env if k in ENV_NAMES or k.startswith(ENV_PREFIXES))
    return [
        _stat(python),
        _stat(os.path.realpath(python)),
        _packages(python),
        job,
        [[k, env[k]] for k in names],
    ]


def program_key(binary: str) -> list[object]:
    """What a launcher's ``--version`` depends on: the binary (a wrapper script's own file and
    what it resolves to)."""
    return [_stat(binary), _stat(os.path.realpath(binary))]


class ProbeCache:
    """Answers by key, read from and written back to one file.

    ``reuse`` False probes every time and only records (a re-check, or the doctor asked for
    again); :attr:`used` says whether any answer handed out came from the file. Threads share
    one cache: the doctor's checks run side by side."""

    def __init__(self, path: Path, reuse: bool = True) -> None:
        self.path = path
        self.reuse = reuse
        self.used = False
        self._lock = threading.Lock()
        self._entries: dict[str, Any] = {}
        self._changed = False
        with contextlib.suppress(OSError, ValueError):
            loaded = json.loads(path.read_text())
            if isinstance(loaded, dict):
                self._entries = loaded
        self._kept = frozenset(self._entries)  # what an earlier doctor found

    def answer(self, what: str, key: list[object], probe: Callable[[], Any]) -> Any:
        """The answer to ``what`` (the probe's code or command) under ``key``: kept, or
        ``probe()``'s, which is kept from then on. A probe that raises keeps nothing."""
        digest = hashlib.sha256(json.dumps([what, key], default=str).encode()).hexdigest()
        with self._lock:
            if self.reuse and digest in self._entries:
                self.used = self.used or digest in self._kept
                return self._entries[digest]
        found = probe()
        with self._lock:
            self._entries.pop(digest, None)
            self._entries[digest] = found
            self._changed = True
        return found

    def save(self) -> None:
        """Write the answers back (the newest :data:`MAX_ENTRIES`), atomically; a cache that
        cannot be written is only a slower next start, never an error."""
        with self._lock:
            if not self._changed:
                return
            kept = dict(list(self._entries.items())[-MAX_ENTRIES:])
            self._changed = False
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".probes-")
            try:
                with os.fdopen(fd, "w") as fh:
                    json.dump(kept, fh)
                os.replace(tmp, self.path)
            except OSError:
                os.unlink(tmp)
                raise
