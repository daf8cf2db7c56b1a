"""The scheduler's and the vendors' tools, asked within a deadline: ``squeue`` and ``qstat``
for the runs list and the allocation, ``nvidia-smi`` and the like for the accelerators."""

from __future__ import annotations

import shutil
import subprocess


def run_tool(argv: list[str], timeout_s: float) -> subprocess.CompletedProcess[str] | None:
    """A scheduler's or vendor's tool run to its end, or None when it is missing or runs past
    ``timeout_s``: a login node's qstat can hang, and nothing here may wait on it for long."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError):
        return None
