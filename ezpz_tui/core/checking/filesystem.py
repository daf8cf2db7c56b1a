"""The output directory: can a run directory be made there, is there room, and can every host
write into it?

Rank logs are written by the ranks on their own hosts, so a directory on a node-local
filesystem loses the remote ranks' output without any error; the doctor says so before a launch.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ezpz_tui.core.checking.check import Context, Verdict, declare, error, ok, warning

FREE_SPACE_WARN_BYTES = 5 * 2**30
# Filesystems whose files other nodes cannot see; rank logs from remote hosts would vanish.
_NODE_LOCAL_FS = frozenset({"tmpfs", "ramfs", "overlay", "devtmpfs"})


def _existing_ancestor(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def fs_type(path: Path) -> str | None:
    """Filesystem type of ``path`` from /proc/mounts (longest mount point prefix); Linux only."""
    try:
        mounts = Path("/proc/mounts").read_text(errors="replace").splitlines()
    except OSError:
        return None
    best, fstype = "", None
    target = str(path.resolve())
    for line in mounts:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, fstype = point, parts[2]
    return fstype


@declare("outputs")
def output_dir(ctx: Context) -> Verdict:
    outputs = ctx.outputs
    base = _existing_ancestor(outputs)
    if not base.is_dir():
        return error(
            f"{base} is a file, so the output directory {outputs} cannot be made.",
            "Choose another output directory.",
        )
    try:
        with tempfile.TemporaryFile(dir=base, prefix=".ezpz-doctor-"):
            pass
    except OSError as exc:
        return error(
            f"Cannot write in {base}: {exc.strerror or exc}.",
            "Choose a writable output directory (e.g. on the project filesystem).",
        )
    free = shutil.disk_usage(base).free
    gib = free / 2**30
    if free < FREE_SPACE_WARN_BYTES:
        return warning(
            f"Only {gib:.1f} GiB free under {base}; logs and checkpoints may fill it.",
            "Free space or choose an output directory on a larger filesystem.",
        )
    fstype = fs_type(base)
    others = len(ctx.alloc.hosts) - 1
    if others and fstype in _NODE_LOCAL_FS:
        who = "the other host" if others == 1 else f"the other {others} hosts"
        return warning(
            f"{base} is on {fstype}, which {who} cannot see: their rank logs would not "
            "reach this directory.",
            "Use an output directory on a shared filesystem (Lustre, GPFS, NFS).",
        )
    where = "is writable" if base == outputs.absolute() else f"can be created in {base}"
    return ok(f"{outputs} {where}; {gib:.0f} GiB free.")
