"""Copy the ranks' Python environment to this node's own disk, check it, and remove it again.

``python -m runtime.stage copy --source PREFIX --dest DIR --python bin/python``
``python -m runtime.stage remove --dest DIR``

ezpz calls this ``yeet``: ten thousand ranks importing torch from one shared filesystem at once
wait on its metadata servers, while each node reading its own copy does not. The launcher runs
this module once per node (``ezpz-tui launch --stage``), before the ranks and again after them.

A copy is made under a temporary name and renamed once it is complete and matches the source's
manifest (every path's kind, size, modification time and link target), so a half copy is never
taken for a whole one; then the staged interpreter is run once, and must call the copy its
``sys.prefix``. Symlinks stay symlinks, so a venv's ``bin/python`` still leads to its base
interpreter while the venv that interpreter reads (``pyvenv.cfg`` beside ``bin/``) is the copy.
A kept copy (``--keep``) whose manifest equals the source's is reused without copying.

Each node answers with one line on stdout, ``EZPZ-STAGE {json}``, naming its host, and exits 0
even when its copy failed: an MPI launcher would otherwise kill the other nodes' copies halfway
through, and the caller needs every node's answer to name the ones that failed.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MARK = "EZPZ-STAGE "  # what starts a node's answer among the launcher's own output
MANIFEST = ".ezpz-stage-manifest.json"  # in the copy: the source it was made from
_TEMP = ".tmp-"  # the copy under way: DEST.tmp-PID
CHECK_TIMEOUT_S = 120.0  # the staged interpreter's first start, from a cold disk

Entry = list[Any]  # ["f", size, mtime_ns] | ["l", target] | ["d"]


def manifest(root: Path) -> dict[str, Entry]:
    """Every path under ``root`` (relative) with its kind, and a file's size and mtime or a
    link's target; links are not followed."""
    out: dict[str, Entry] = {}
    for folder, dirs, files in os.walk(root):
        base = Path(folder)
        for name in [*dirs, *files]:
            path = base / name
            rel = str(path.relative_to(root))
            if rel == MANIFEST:
                continue
            info = path.lstat()
            if path.is_symlink():
                out[rel] = ["l", os.readlink(path)]
            elif path.is_dir():
                out[rel] = ["d"]
            else:
                out[rel] = ["f", info.st_size, info.st_mtime_ns]
    return out


def size_of(entries: dict[str, Entry]) -> int:
    return sum(entry[1] for entry in entries.values() if entry[0] == "f")


def _first_difference(want: dict[str, Entry], have: dict[str, Entry]) -> str | None:
    for rel, entry in want.items():
        if rel not in have:
            return f"{rel} is missing from the copy"
        if have[rel] != entry:
            return f"{rel} differs from the source ({have[rel]} against {entry})"
    extra = sorted(set(have) - set(want))
    return f"{extra[0]} is in the copy but not in the source" if extra else None


def _read_manifest(dest: Path) -> dict[str, Entry] | None:
    try:
        data = json.loads((dest / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data.get("entries") if isinstance(data, dict) else None


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def _leftovers(dest: Path) -> list[Path]:
    """Copies under way (or abandoned by a killed copy) of ``dest``."""
    return sorted(dest.parent.glob(f"{dest.name}{_TEMP}*")) if dest.parent.is_dir() else []


@contextlib.contextmanager
def _locked(dest: Path) -> Iterator[None]:
    """One copy or removal of ``dest`` at a time on this node (two runs keeping one stage)."""
    fd = os.open(dest.parent / f"{dest.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _why(exc: BaseException) -> str:
    """An error in words; shutil's copy errors carry a list of (source, copy, why)."""
    if isinstance(exc, shutil.Error) and exc.args and isinstance(exc.args[0], list):
        first = exc.args[0][0]
        more = len(exc.args[0]) - 1
        return str(first[2]) + (f" (and {more} more files)" if more else "")
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    return str(exc) or type(exc).__name__


def bytes_text(count: int) -> str:
    """``1.8 GiB``, ``14 KiB``, ``0 B``: a size as people read it."""
    size, unit = float(count), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{size:.0f} {unit}" if unit == "B" or size >= 10 else f"{size:.1f} {unit}"


def _check_interpreter(dest: Path, python: str) -> str | None:
    """Why the staged interpreter cannot stand in for the source's, or None when it can."""
    staged = dest / python
    try:
        done = subprocess.run(
            [str(staged), "-c", "import sys; print(sys.prefix)"],
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"the staged interpreter {staged} did not run: {_why(exc)}"
    prefix = done.stdout.strip()
    if done.returncode != 0:
        return f"the staged interpreter {staged} failed: {done.stderr.strip()[-300:]}"
    if Path(prefix).resolve() != dest.resolve():
        return f"the staged interpreter's sys.prefix is {prefix}, not the copy {dest}"
    return None


def copy(source: Path, dest: Path, python: str, keep: bool) -> dict[str, Any]:
    """Stage ``source`` at ``dest`` (or reuse a kept copy of it); this node's answer."""
    began = time.monotonic()
    want = manifest(source)
    total = size_of(want)
    answer: dict[str, Any] = {"bytes": total, "files": len(want), "dest": str(dest)}
    if dest.parent.exists() and not dest.parent.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(dest.parent))
    dest.parent.mkdir(parents=True, exist_ok=True)
    with _locked(dest):
        if keep and _read_manifest(dest) == want and _check_interpreter(dest, python) is None:
            return answer | {"ok": True, "reused": True, "seconds": time.monotonic() - began}
        for stale in [dest, *_leftovers(dest)]:
            _remove(stale)
        free = shutil.disk_usage(dest.parent).free
        if free < total:
            raise OSError(
                errno.ENOSPC,
                f"{dest.parent} has {bytes_text(free)} free, "
                f"the environment needs {bytes_text(total)}",
            )
        temp = dest.with_name(f"{dest.name}{_TEMP}{os.getpid()}")
        try:
            shutil.copytree(source, temp, symlinks=True)
            problem = _first_difference(want, manifest(temp))
            if problem:
                raise OSError(errno.EIO, f"the copy does not match its source: {problem}")
            record = {"source": str(source), "entries": want}
            (temp / MANIFEST).write_text(json.dumps(record), encoding="utf-8")
            temp.rename(dest)
        finally:
            _remove(temp)
        problem = _check_interpreter(dest, python)
        if problem:
            _remove(dest)
            raise OSError(errno.ENOEXEC, problem)
    return answer | {"ok": True, "reused": False, "seconds": time.monotonic() - began}


def remove(dest: Path) -> dict[str, Any]:
    """Remove the copy at ``dest`` and any copy of it under way; this node's answer."""
    began = time.monotonic()
    found = [p for p in [dest, *_leftovers(dest)] if p.exists() or p.is_symlink()]
    if dest.parent.is_dir():
        with _locked(dest):
            for path in found:
                _remove(path)
        with contextlib.suppress(OSError):
            (dest.parent / f"{dest.name}.lock").unlink()
    return {"ok": True, "removed": len(found), "seconds": time.monotonic() - began}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtime.stage", description=__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    to = sub.add_parser("copy", help="stage an environment on this node")
    to.add_argument("--source", type=Path, required=True, help="the environment (sys.prefix)")
    to.add_argument("--dest", type=Path, required=True, help="where its copy goes")
    to.add_argument("--python", required=True, help="the interpreter, relative to the source")
    to.add_argument("--keep", action="store_true", help="reuse a copy that matches the source")
    gone = sub.add_parser("remove", help="remove a staged copy from this node")
    gone.add_argument("--dest", type=Path, required=True)
    args = parser.parse_args(argv)
    answer: dict[str, Any] = {"host": socket.gethostname(), "action": args.action}
    try:
        if args.action == "copy":
            answer |= copy(args.source, args.dest, args.python, args.keep)
        else:
            answer |= remove(args.dest)
    except Exception as exc:  # every node answers, whatever went wrong on it
        answer |= {"ok": False, "error": _why(exc)}
    sys.stdout.write(MARK + json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
