"""The environment as one file: its pack, read once a launch, and unpacked on every node.

Staging thousands of files per node from a shared filesystem is the metadata storm staging
exists to avoid, so the first node reads the environment once into a pack (an uncompressed tar
written in one pass, its manifest beside it as ``PACK.json``) that the launcher spreads to the
other nodes (:mod:`runtime.stage_spread`), each unpacking it as it arrives. The pack is kept in
the user's cache and reused while the source's manifest (every path's kind, a file's size and
mtime, a link's target) is the one it was made from: a launch then reads no file of the source.

Each file's mtime is in the pack to the nanosecond (a pax header: a tar header keeps whole
seconds), so a copy unpacked by the node's ``tar`` can be checked against the source's manifest
exactly.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

Entry = list[Any]  # ["f", size, mtime_ns] | ["l", target] | ["d"]
MANIFEST = ".ezpz-stage-manifest.json"  # in a copy: the source it was made from
CHUNK = 8 << 20  # bytes a read of the pack, a piece of its broadcast, a file's write
_TEMP = ".tmp-"  # a pack being made: PACK.tmp-PID


def manifest(root: Path) -> dict[str, Entry]:
    """Every path under ``root`` (relative, a folder before what it holds) with its kind, and a
    file's size and mtime or a link's target; links are not followed."""
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


def _sidecar(pack: Path) -> Path:
    return pack.with_name(pack.name + ".json")


@contextlib.contextmanager
def _locked(pack: Path) -> Iterator[None]:
    """One maker of ``pack`` at a time (two launches of one source at once)."""
    fd = os.open(pack.with_name(pack.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _current(pack: Path, source: Path, want: dict[str, Entry]) -> bool:
    """Whether ``pack`` is whole and made from ``source`` as ``want`` describes it."""
    try:
        record = json.loads(_sidecar(pack).read_text(encoding="utf-8"))
        size = pack.stat().st_size
    except (OSError, ValueError):
        return False
    return (
        isinstance(record, dict)
        and record.get("source") == str(source)
        and record.get("bytes") == size
        and record.get("entries") == want
    )


def ensure_pack(source: Path, pack: Path, want: dict[str, Entry]) -> dict[str, Any]:
    """``pack`` made from ``source`` (whose manifest is ``want``), or the one there reused:
    its size, whether it was made now, the seconds it took, the bytes of the source read."""
    began = time.monotonic()
    pack.parent.mkdir(parents=True, exist_ok=True)
    with _locked(pack):
        if _current(pack, source, want):
            return {"bytes": pack.stat().st_size, "built": False, "source_read": 0} | {
                "seconds": round(time.monotonic() - began, 3)
            }
        _sidecar(pack).unlink(missing_ok=True)
        for stale in pack.parent.glob(f"{pack.name}{_TEMP}*"):
            stale.unlink(missing_ok=True)
        temp = pack.with_name(f"{pack.name}{_TEMP}{os.getpid()}")
        try:
            read = _write_pack(source, temp, want)
            temp.rename(pack)
        finally:
            temp.unlink(missing_ok=True)
        size = pack.stat().st_size
        record = {"source": str(source), "bytes": size, "entries": want}
        _sidecar(pack).write_text(json.dumps(record), encoding="utf-8")
    took = round(time.monotonic() - began, 3)
    return {"bytes": size, "built": True, "source_read": read, "seconds": took}


def _write_pack(source: Path, temp: Path, want: dict[str, Entry]) -> int:
    """The tar of ``want``'s paths under ``source``, in its order, written to ``temp`` in one
    pass; the bytes of the source read. A file that is not as ``want`` says (changed since its
    manifest was read) fails it, so a pack is never recorded for a manifest it does not match."""
    import tarfile  # here: ezpz-tui imports this module's neighbours, and needs no tar to start

    read = 0
    with tarfile.open(temp, "w", format=tarfile.PAX_FORMAT, copybufsize=CHUNK) as tar:
        for rel, entry in want.items():
            path = source / rel
            info = tarfile.TarInfo(rel)
            if entry[0] == "d":
                info.type, info.mode = tarfile.DIRTYPE, path.lstat().st_mode & 0o7777
                tar.addfile(info)
            elif entry[0] == "l":
                info.type, info.linkname = tarfile.SYMTYPE, entry[1]
                tar.addfile(info)
            else:
                with path.open("rb") as fh:
                    stat = os.fstat(fh.fileno())
                    if [stat.st_size, stat.st_mtime_ns] != entry[1:]:
                        raise OSError(errno.EAGAIN, f"{path} changed while it was packed")
                    info.size, info.mtime = stat.st_size, stat.st_mtime_ns // 10**9
                    info.mode = stat.st_mode & 0o7777
                    seconds, nanoseconds = divmod(stat.st_mtime_ns, 10**9)
                    info.pax_headers = {"mtime": f"{seconds}.{nanoseconds:09d}"}
                    tar.addfile(info, fh)
                read += stat.st_size
    return read


def unpack(stream: IO[bytes], into: Path) -> None:
    """Make the tar that ``stream`` holds at ``into`` (a new folder) as it arrives, with the
    node's ``tar``: in C it keeps up with ``cp -a``, where Python's tarfile took three times as
    long on a loaded machine. Modes kept, owned by whoever unpacks, mtimes to the nanosecond
    (the pack's pax headers); the caller checks the result against the manifest."""
    into.mkdir()
    argv = ["tar", "-x", "-p", "--no-same-owner", "-f", "-", "-C", str(into)]
    try:
        tar = subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot start tar on this node: {exc.strerror or exc}") from exc
    assert tar.stdin is not None and tar.stderr is not None
    said: list[bytes] = []  # read aside: a tar that fails on every file says more than a pipe holds
    reader = threading.Thread(target=lambda: said.append(tar.stderr.read()), daemon=True)
    reader.start()
    try:
        with contextlib.suppress(BrokenPipeError):  # tar stopped: its status says why
            while piece := stream.read(CHUNK):
                tar.stdin.write(piece)
    except BaseException:
        tar.kill()
        raise
    finally:
        with contextlib.suppress(BrokenPipeError):
            tar.stdin.close()
        tar.wait()
        reader.join()
    if tar.returncode != 0:
        text = b"".join(said).decode(errors="replace").strip().splitlines()
        lines = [line.removeprefix("tar: ") for line in text if "Exiting with" not in line]
        first = (lines or [f"tar exited with status {tar.returncode}"])[0]
        raise OSError(errno.EIO, f"unpacking in {into.parent}: {first}")
