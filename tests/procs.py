"""An independent scan of /proc for what is left of a run, shared by the tests that stop runs.

Independent of the supervisor on purpose: a test of "no process of the run is left" must not ask
the code under test.
"""

from __future__ import annotations

import os
from pathlib import Path


def processes_of(*run_dirs: Path) -> list[int]:
    """Live (not zombie) processes whose environment names one of ``run_dirs`` (EZPZ_RUN_DIR,
    either spelling of the path, since the capture wrapper resolves symlinks)."""
    needles = {f"EZPZ_RUN_DIR={p}".encode() for run in run_dirs for p in (run, run.resolve())}
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
            if stat.rpartition(")")[2].split()[0] in ("Z", "X"):
                continue
            environ = set(Path(f"/proc/{name}/environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if environ & needles:
            found.append(int(name))
    return found
