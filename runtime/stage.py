"""Stage the ranks' Python environment on this node's own disk, check it, and remove it again.

``python -m runtime.stage copy --source PREFIX --dest DIR --python bin/python --pack PACK``
``python -m runtime.stage remove --dest DIR``

ezpz calls this ``yeet``: ten thousand ranks importing torch from one shared filesystem at once
wait on its metadata servers, while each node reading its own copy does not. The launcher runs
this module once per node (``ezpz-tui launch --stage``), before the ranks and again after them.

The source is read once a launch, by the first node: its manifest (every path's kind, size,
modification time and link target), and its pack (:mod:`runtime.stage_pack`: one tar, kept at
``PACK`` and reused while the manifest is the one it was made from, so an unchanged source has
none of its files read). The pack reaches the other nodes through the launcher's own job
(:mod:`runtime.stage_spread`: an MPI broadcast), each node unpacking it as it arrives.

A copy is unpacked under a temporary name and renamed once it is complete and matches the
source's manifest, so a half copy is never taken for a whole one; then the staged interpreter is
run once, and must call the copy its ``sys.prefix``. Symlinks stay symlinks, so a venv's
``bin/python`` still leads to its base interpreter while the venv that interpreter reads
(``pyvenv.cfg`` beside ``bin/``) is the copy. A kept copy (``--keep``) whose manifest equals the
source's is reused without unpacking; when every node has one, the pack is not even read.

Each node answers with one line on stdout, ``EZPZ-STAGE {json}``, naming its host, and exits 0
even when its copy failed: an MPI launcher would otherwise kill the other nodes' copies halfway
through, and the caller needs every node's answer to name the ones that failed. A node that
failed still takes its part in the broadcast to the end, which the others wait on.
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

from runtime.stage_pack import MANIFEST, Entry, ensure_pack, manifest, size_of, unpack
from runtime.stage_spread import Peers, peers

MARK = "EZPZ-STAGE "  # what starts a node's answer among the launcher's own output
_TEMP = ".tmp-"  # the copy under way: DEST.tmp-PID
CHECK_TIMEOUT_S = 120.0  # the staged interpreter's first start, from a cold disk


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


def _describe(source: Path, host: str) -> dict[str, Any]:
    """What the first node tells the others of the source: its manifest, or why it has none."""
    try:
        if not source.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "no such environment", str(source))
        return {"entries": manifest(source)}
    except Exception as exc:
        return {"error": f"cannot read the source on {host}: {_why(exc)}"}


def _packed(source: Path, pack: Path, want: dict[str, Entry], host: str) -> dict[str, Any]:
    """The first node's pack of the source, made or reused, or why there is none."""
    try:
        return ensure_pack(source, pack, want)
    except Exception as exc:
        return {"error": f"the pack {pack} could not be made on {host}: {_why(exc)}"}


def _prepare(dest: Path, want: dict[str, Entry], python: str, keep: bool) -> bool:
    """Whether this node needs the pack: False when its kept copy is the source's (the caller
    holds ``dest``'s lock); else ``dest`` is cleared and there is room for the copy."""
    if keep and _read_manifest(dest) == want and _check_interpreter(dest, python) is None:
        return False
    for stale in [dest, *_leftovers(dest)]:
        _remove(stale)
    free, total = shutil.disk_usage(dest.parent).free, size_of(want)
    if free < total:
        raise OSError(
            errno.ENOSPC,
            f"{dest.parent} has {bytes_text(free)} free, the environment needs {bytes_text(total)}",
        )
    return True


def copy(
    source: Path,
    dest: Path,
    python: str,
    keep: bool,
    pack: Path,
    nodes: Peers,
    answer: dict[str, Any],
) -> None:
    """Stage ``source`` at ``dest`` (or reuse a kept copy of it) with the other ``nodes``,
    filling in this node's ``answer`` as it goes (what a failed node had found is said too).
    Every node makes the same calls among the nodes whatever fails on it, and raises what did
    only after the last of them."""
    began = time.monotonic()
    host = answer["host"]
    answer.update(dest=str(dest), spread=nodes.spread)
    described = nodes.share(_describe(source, host) if nodes.first else None)
    if "error" in described:
        raise OSError(errno.EIO, described["error"])
    want: dict[str, Entry] = described["entries"]
    answer.update(bytes=size_of(want), files=len(want))
    failed: Exception | None = None
    needs = False
    with contextlib.ExitStack() as held:
        try:
            if dest.parent.exists() and not dest.parent.is_dir():
                raise NotADirectoryError(
                    errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(dest.parent)
                )
            dest.parent.mkdir(parents=True, exist_ok=True)
            held.enter_context(_locked(dest))
            needs = _prepare(dest, want, python, keep)
        except Exception as exc:
            failed = exc
        if nodes.count(int(needs)):
            made = nodes.share(_packed(source, pack, want, host) if nodes.first else None)
            if nodes.first:
                answer["pack"] = {"path": str(pack), **made}
            temp = dest.with_name(f"{dest.name}{_TEMP}{os.getpid()}")
            try:
                if "error" in made:  # on every node alike: no pack is sent
                    if needs:
                        raise OSError(errno.EIO, made["error"])
                else:
                    _receive(nodes, pack, made["bytes"], temp if needs else None)
                if needs:
                    _settle(temp, dest, want, str(source))
            except Exception as exc:
                failed = failed or exc
            finally:
                _remove(temp)
        if failed is not None:
            raise failed
        if needs:
            problem = _check_interpreter(dest, python)
            if problem:
                _remove(dest)
                raise OSError(errno.ENOEXEC, problem)
    answer.update(ok=True, reused=not needs, seconds=time.monotonic() - began)


def _receive(nodes: Peers, pack: Path, size: int, temp: Path | None) -> None:
    """Take the pack as it arrives, unpacking it at ``temp`` (None: this node has no use for
    it, but the broadcast needs it all the same)."""
    stream = nodes.stream(pack, size)
    try:
        if temp is not None:
            unpack(stream, temp)
    finally:
        stream.drain()
        stream.close()


def _settle(temp: Path, dest: Path, want: dict[str, Entry], source: str) -> None:
    """``temp``, once it matches the source's manifest, as ``dest``."""
    problem = _first_difference(want, manifest(temp))
    if problem:
        raise OSError(errno.EIO, f"the copy does not match its source: {problem}")
    record = {"source": source, "entries": want}
    (temp / MANIFEST).write_text(json.dumps(record), encoding="utf-8")
    temp.rename(dest)


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
    to.add_argument("--pack", type=Path, required=True, help="the source's pack, kept between runs")
    gone = sub.add_parser("remove", help="remove a staged copy from this node")
    gone.add_argument("--dest", type=Path, required=True)
    args = parser.parse_args(argv)
    answer: dict[str, Any] = {"host": socket.gethostname(), "action": args.action}
    try:
        if args.action == "copy":
            nodes = peers()
            copy(args.source, args.dest, args.python, args.keep, args.pack, nodes, answer)
        else:
            answer |= remove(args.dest)
    except Exception as exc:  # every node answers, whatever went wrong on it
        answer |= {"ok": False, "error": _why(exc)}
    sys.stdout.write(MARK + json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
