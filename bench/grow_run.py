"""Grow a real finished run to N ranks, every file as a real N-rank run would have written it.

``python bench/grow_run.py SRC DST N [--ranks-per-node P] [--workers W]``

Scale is measured on run directories that hold what a real run writes, not on a few chosen
files: a reader that grows with ranks x files shows only when every folder is there. So each
file of ``SRC`` (a finished run of R ranks) is placed in ``DST`` for a run of N ranks on N / P
nodes, the last one partly filled where P does not divide N (P: the source's ranks per node
unless given), with what names a rank, a host or a size
rewritten:

- a rank's files (``logs/``, ``status/``, ``metrics/``, ``telemetry/``, ``flight/``, ``profiles/``,
  a raise record, a checkpoint's ``__R_0.distcp`` shard, NCCL's ``nccl-rank-R`` dump, or any
  other ``rank-NNNNN`` file a later version adds) are written for every rank T from source rank
  T mod R, except what only the failing rank writes (a raise record, NCCL's dump), which stays
  with its rank: the status's rank, local rank, world size and host, the records' ``"rank"``, the
  log's ``[rank T]`` and ``rank T/N (local L, node K``, the Flight Recorder file's rank;
- a node's files (``node-NNNNN`` anywhere) for every node K from source node K mod its nodes;
- the node digests (``nodes/sNN/node-HOST.json``, :mod:`runtime.node_digest`): one for each
  grown node, in the shard its host names, holding that node's ranks, each rank T's entry the
  one source rank T mod R's node digest held, its writer the node's first rank, as the node's
  writer of a real N-rank run would have left it;
- the run's own files (``run.toml``, ``summary.json``, the rest copied): the world size, DP,
  ranks per node, the hosts and the launcher's ``-n``; the summary's rank count and its
  per-rank verdict tables. ``metrics.nc`` keeps the source's ranks (no reader of a live or
  ended run opens it; the finalizer of a real N-rank run writes N ranks there). A source's
  ``digest.json`` is built again from the grown files by the finalizer's code
  (:func:`ezpz_tui.core.watching.digesting.build_digest`), as a real N-rank run's finalizer
  would have written it; a source without one (an older run) grows into a run without one.

A rank's file goes into its block of 1,024 ranks (``logs/b0124/rank-127487.log``), as this
version's ranks write them, whether the source holds its rank files in blocks or (a run made
before the blocks) in the folders themselves.

Hosts are named like Aurora's (``x4000c0s3b0n0``), so host-keyed readers see N / P of them.
A named pipe (a rank's Flight Recorder request FIFO) is never copied: a finished run holds
none. The last line printed says what was written: files, bytes, seconds.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import shutil
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import _common  # noqa: F401  (this checkout first on sys.path)

from runtime.rundir import (
    BLOCK_DIR,
    NODE_FILE,
    NODE_SHARDS,
    NODES,
    PROFILES,
    RANK_FOLDERS,
    RunDir,
    block_name,
    blocks_of,
)
from runtime.rundir import DIGEST_JSON as DIGEST  # rebuilt, never copied

BLOCKED = frozenset((*RANK_FOLDERS, PROFILES))  # the folders whose rank files lie in blocks
RANK_NAME = re.compile(r"^(?P<head>.*?rank-)(?P<n>\d+)(?P<tail>\.[^/]*)$")
SHARD_NAME = re.compile(r"^(?P<head>__)(?P<n>\d+)(?P<tail>_\d+\.distcp)$")
NCCL_NAME = re.compile(r"^(?P<head>nccl-rank-)(?P<n>\d+)(?P<tail>)$")
NODE_NAME = re.compile(r"^(?P<head>.*?node-)(?P<n>\d+)(?P<tail>\.[^/]*)?$")
RANK_PATTERNS = (RANK_NAME, SHARD_NAME, NCCL_NAME)


@dataclass(frozen=True)
class Shape:
    """The source's ranks and nodes, and the grown run's."""

    source_ranks: int
    source_per_node: int
    ranks: int
    per_node: int

    @property
    def nodes(self) -> int:
        return -(-self.ranks // self.per_node)

    @property
    def source_nodes(self) -> int:
        return -(-self.source_ranks // self.source_per_node)

    def host(self, node: int) -> str:
        """Aurora's naming: rack, chassis, slot, blade, node."""
        rack, rest = divmod(node, 64 * 8)
        return f"x{4000 + rack}c{rest // 64}s{(rest // 8) % 8}b0n{rest % 8}"

    def hosts(self) -> list[str]:
        return [self.host(node) for node in range(self.nodes)]


@dataclass(frozen=True)
class Source:
    """One file of the source that belongs to a rank or a node: its parts and its bytes."""

    folder: str  # relative to the run, "" at the top
    head: str
    width: int  # the digits of the number in its name (rank-00001: 5)
    tail: str
    number: int
    data: bytes


def _numbered(name: str, patterns: tuple[re.Pattern[str], ...]) -> re.Match[str] | None:
    for pattern in patterns:
        found = pattern.match(name)
        if found:
            return found
    return None


@dataclass
class Survey:
    """What the source holds, by how each file grows."""

    ranks: list[Source]
    nodes: list[Source]  # node-NNNNN files
    run_files: list[Path]  # relative to the source
    special: list[Path]  # not regular files: left behind
    node_digests: list[Path]  # nodes/sNN/node-HOST.json


def survey(src: Path) -> Survey:
    """The source's files, each by how it grows."""
    ranks: list[Source] = []
    nodes: list[Source] = []
    run_files: list[Path] = []
    special: list[Path] = []
    node_digests: list[Path] = []
    for root, folders, files in os.walk(src):
        folders.sort()
        here = Path(root).relative_to(src)
        for name in sorted(files):
            path = Path(root) / name
            mode = path.lstat().st_mode
            if not stat.S_ISREG(mode):
                special.append(here / name)
                continue
            if here.parent == Path(NODES) and NODE_FILE.fullmatch(name):
                node_digests.append(path)
                continue
            folder = "" if str(here) == "." else str(here)
            if BLOCK_DIR.fullmatch(here.name) and str(here.parent) in BLOCKED:
                folder = str(here.parent)  # a block: the rank's file goes into its own
            found = _numbered(name, RANK_PATTERNS)
            bucket = ranks
            if found is None:
                found, bucket = NODE_NAME.match(name), nodes
            if found is None:
                run_files.append(here / name)
                continue
            number = found.group("n")
            bucket.append(
                Source(
                    folder,
                    found.group("head"),
                    len(number),
                    found.group("tail") or "",
                    int(number),
                    path.read_bytes(),
                )
            )
    return Survey(ranks, nodes, run_files, special, node_digests)


# --- a rank's files ----------------------------------------------------------------------------


def _status(data: bytes, rank: int, shape: Shape) -> bytes:
    status = json.loads(data)
    status.update(
        rank=rank,
        local_rank=rank % shape.per_node,
        world_size=shape.ranks,
        host=shape.host(rank // shape.per_node),
    )
    return json.dumps(status, indent=1).encode()


def _records(data: bytes, old: int, rank: int) -> bytes:
    return data.replace(b'"rank":%d,' % old, b'"rank":%d,' % rank)


def _log(data: bytes, old: int, rank: int, shape: Shape) -> bytes:
    said = re.compile(rb"rank %d/%d \(local \d+, node \d+," % (old, shape.source_ranks))
    local, node = rank % shape.per_node, rank // shape.per_node
    new = b"rank %d/%d (local %d, node %d," % (rank, shape.ranks, local, node)
    data = said.sub(new, data)
    return data.replace(b"[rank %d]" % old, b"[rank %d]" % rank)


def _flight(data: bytes, old: int, rank: int) -> bytes:
    head, body = data[:64], data[64:]
    head = re.sub(rb'^(\{"rank": ?)%d,' % old, rb"\g<1>%d," % rank, head)
    return head + body


def rewrite(source: Source, rank: int, shape: Shape) -> bytes:
    """The source rank's file as ``rank`` of the grown run writes it."""
    old, data = source.number, source.data
    if source.folder == "status" and source.tail == ".json":
        return _status(data, rank, shape)
    if source.tail == ".jsonl":
        return _records(data, old, rank)
    if source.tail == ".log":
        return _log(data, old, rank, shape)
    if source.folder == "flight" and source.tail == ".json":
        return _flight(data, old, rank)
    return data


def _name(source: Source, number: int) -> str:
    return f"{source.head}{number:0{source.width}d}{source.tail}"


def _once(source: Source) -> bool:
    """Written by the rank that failed, not by every rank like it."""
    return source.tail.endswith(".raised") or source.head == "nccl-rank-"


def _where(dst: Path, folder: str, rank: int) -> Path:
    """The folder of ``rank``'s file: its block in a rank folder."""
    return dst / folder / block_name(rank) if folder in BLOCKED else dst / folder


def _write_ranks(job: tuple[Path, list[Source], Shape, int, int]) -> tuple[int, int]:
    """Ranks ``first`` to ``last - 1``: every rank file, from its source rank."""
    dst, sources, shape, first, last = job
    by_rank: dict[int, list[Source]] = {}
    for source in sources:
        by_rank.setdefault(source.number, []).append(source)
    files = size = 0
    for rank in range(first, last):
        for source in by_rank.get(rank % shape.source_ranks, ()):
            if _once(source) and rank != source.number:
                continue
            data = rewrite(source, rank, shape)
            (_where(dst, source.folder, rank) / _name(source, rank)).write_bytes(data)
            files, size = files + 1, size + len(data)
    return files, size


# --- the node digests ---------------------------------------------------------------------------


def _source_entries(paths: list[Path]) -> tuple[dict[str, object], dict[int, dict[str, object]]]:
    """The source's node digests: the first one's own fields (its format, intervals, when it
    was written) and every rank's entry, by rank."""
    head: dict[str, object] = {}
    entries: dict[int, dict[str, object]] = {}
    for path in paths:
        try:
            data = json.loads(path.read_bytes())
        except (OSError, ValueError):
            continue  # a torn digest: what a reader of the source met too
        if not isinstance(data, dict) or not isinstance(data.get("ranks"), dict):
            continue
        head = head or {k: v for k, v in data.items() if k != "ranks"}
        for key, entry in data["ranks"].items():
            if key.isdigit() and isinstance(entry, dict):
                entries[int(key)] = entry
    return head, entries


def _write_node_digests(dst: Path, paths: list[Path], shape: Shape) -> tuple[int, int]:
    """One digest per grown node in its host's shard, holding its ranks' entries as the source's
    node digests held their source ranks' (a source rank no digest held is left out of it, as
    the source's writer left it out)."""
    head, entries = _source_entries(paths)
    if not head:
        return 0, 0
    run = RunDir(dst)
    for shard in range(NODE_SHARDS):
        (run.nodes_dir / f"s{shard:02d}").mkdir(parents=True, exist_ok=True)
    writer = head.get("writer") if isinstance(head.get("writer"), dict) else {}
    files = size = 0
    for node in range(shape.nodes):
        first, last = node * shape.per_node, min(shape.ranks, (node + 1) * shape.per_node)
        ranks = {
            str(rank): entries[rank % shape.source_ranks]
            for rank in range(first, last)
            if rank % shape.source_ranks in entries
        }
        host = shape.host(node)
        digest = {**head, "host": host, "writer": {**writer, "rank": first}, "ranks": ranks}
        data = json.dumps(digest, separators=(",", ":")).encode()
        run.node_digest(host).write_bytes(data)
        files, size = files + 1, size + len(data)
    return files, size


# --- the run's own files -----------------------------------------------------------------------


def _toml_list(values: list[str]) -> str:
    return "[\n" + "".join(f'    "{v}",\n' for v in values) + "]"


def _run_toml(text: str, shape: Shape, sizes: dict[str, int]) -> str:
    model = sizes.get("tp", 1) * sizes.get("pp", 1) * sizes.get("cp", 1)
    text = re.sub(r"(?m)^world_size = \d+$", f"world_size = {shape.ranks}", text)
    text = re.sub(r"(?m)^dp = \d+$", f"dp = {shape.ranks // model}", text)
    text = re.sub(r"(?m)^ranks_per_node = \d+$", f"ranks_per_node = {shape.per_node}", text)
    text = re.sub(r"(?m)^ppn = \d+$", f"ppn = {shape.per_node}", text)
    text = re.sub(r"(?ms)^hosts = \[.*?^\]", "hosts = " + _toml_list(shape.hosts()), text)
    for flag, value in (("-n", shape.ranks), ("-ppn", shape.per_node)):
        text = re.sub(rf'(?m)^(    "{flag}",\n    )"\d+"', rf'\g<1>"{value}"', text)
    return text


def _per_rank(table: dict[str, object], shape: Shape) -> dict[str, object]:
    """A verdict's table keyed by rank, for every rank of the grown run."""
    return {str(r): table.get(str(r % shape.source_ranks)) for r in range(shape.ranks)}


def _summary(data: bytes, shape: Shape, sizes: dict[str, int]) -> bytes:
    summary = json.loads(data)
    summary["ranks"] = shape.ranks
    model = sizes.get("tp", 1) * sizes.get("pp", 1) * sizes.get("cp", 1)
    launch = summary.get("launch") or {}
    if isinstance(launch.get("sizes"), dict):
        launch["sizes"].update(world_size=shape.ranks, dp=shape.ranks // model)
    if "hosts" in launch:
        launch["hosts"] = shape.hosts()
    if "ranks_per_node" in launch:
        launch["ranks_per_node"] = shape.per_node
    efficiency = (summary.get("speed") or {}).get("efficiency") or {}
    if "world_size" in efficiency:
        efficiency["world_size"] = shape.ranks
    arrival = (summary.get("verdicts") or {}).get("arrival") or {}
    for key in ("lag_s", "last_share"):
        if isinstance(arrival.get(key), dict):
            arrival[key] = _per_rank(arrival[key], shape)
    return json.dumps(summary, indent=1).encode()


def _sizes(src: Path) -> dict[str, int]:
    import tomllib

    plan = tomllib.loads((src / "run.toml").read_text())
    return {k: int(v) for k, v in plan.get("sizes", {}).items()}


def _run_file(src: Path, dst: Path, relative: Path, shape: Shape, sizes: dict[str, int]) -> int:
    target = dst / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    if relative == Path("run.toml"):
        target.write_text(_run_toml((src / relative).read_text(), shape, sizes))
    elif relative == Path("summary.json"):
        target.write_bytes(_summary((src / relative).read_bytes(), shape, sizes))
    elif relative == Path("hostfile"):
        target.write_text("".join(f"{h}\n" for h in shape.hosts()))
    else:
        shutil.copy2(src / relative, target)
    return target.stat().st_size


def _digest(dst: Path) -> int:
    """``digest.json`` as the finalizer of a real run of these ranks writes it: built from the
    grown files by the finalizer's own code (what a reader shows must hold for every rank, so
    no figure of it is guessed from the source's), with the grown summary's verdicts."""
    from ezpz_tui.core.runs.digest import write_digest
    from ezpz_tui.core.watching.digesting import build_digest

    write_digest(dst, build_digest(dst))
    return (dst / DIGEST).stat().st_size


# --- growing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grown:
    files: int
    bytes: int
    seconds: float
    skipped: tuple[str, ...]  # special files left behind


def source_shape(src: Path, ranks: int, per_node: int | None) -> Shape:
    import tomllib

    plan = tomllib.loads((src / "run.toml").read_text())
    source_ranks = int(plan["sizes"]["world_size"])
    source_per_node = int(plan.get("ranks_per_node") or source_ranks)
    return Shape(source_ranks, source_per_node, ranks, per_node or source_per_node)


def grow(
    src: Path,
    dst: Path,
    ranks: int,
    per_node: int | None = None,
    workers: int = 2,
    progress: Callable[[str], None] | None = None,
) -> Grown:
    """``src`` grown into ``dst`` (which must not exist) for ``ranks`` ranks."""
    start = time.perf_counter()
    shape = source_shape(src, ranks, per_node)
    sizes = _sizes(src)
    found = survey(src)
    rank_files, node_files, run_files, special = (
        found.ranks,
        found.nodes,
        found.run_files,
        found.special,
    )
    dst.mkdir(parents=True)
    for folder in {s.folder for s in rank_files + node_files}:
        (dst / folder).mkdir(parents=True, exist_ok=True)
        for block in blocks_of(ranks) if folder in BLOCKED else ():
            (dst / folder / block).mkdir()
    files = size = 0
    for relative in run_files:
        if relative == Path(DIGEST):
            continue  # what the N ranks' files hold: built from them below
        size += _run_file(src, dst, relative, shape, sizes)
        files += 1
    for source in node_files:
        for node in range(source.number, shape.nodes, shape.source_nodes):
            data = source.data
            (dst / source.folder / _name(source, node)).write_bytes(data)
            files, size = files + 1, size + len(data)
    n, b = _write_node_digests(dst, found.node_digests, shape)
    files, size = files + n, size + b
    chunk = max(1, -(-ranks // (workers * 8)))
    jobs = [(dst, rank_files, shape, a, min(ranks, a + chunk)) for a in range(0, ranks, chunk)]
    if workers > 1:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            done = pool.imap_unordered(_write_ranks, jobs)
            for index, (n, b) in enumerate(done, 1):
                files, size = files + n, size + b
                if progress:
                    progress(f"{index}/{len(jobs)} blocks of ranks written")
    else:
        for n, b in map(_write_ranks, jobs):
            files, size = files + n, size + b
    if Path(DIGEST) in run_files:
        size += _digest(dst)
        files += 1
        if progress:
            progress("digest.json built from the grown ranks' files")
    return Grown(files, size, time.perf_counter() - start, tuple(str(p) for p in special))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("src", type=Path, help="a finished run directory")
    parser.add_argument("dst", type=Path, help="the grown run directory (must not exist)")
    parser.add_argument("ranks", type=int, help="the grown run's ranks")
    parser.add_argument("--ranks-per-node", type=int, help="default: the source's")
    parser.add_argument("--workers", type=int, default=2, help="processes writing (default 2)")
    args = parser.parse_args(argv)
    if not (args.src / "run.toml").is_file():
        parser.error(f"{args.src} is not a run directory (no run.toml)")
    if args.dst.exists():
        parser.error(f"{args.dst} exists: give a new directory")
    said = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    grown = grow(args.src, args.dst, args.ranks, args.ranks_per_node, args.workers, said)
    for path in grown.skipped:
        print(f"skipped {path}: not a regular file (a finished run holds none)")
    print(
        f"grew {args.src} to {args.ranks} ranks in {args.dst}: {grown.files} files, "
        f"{grown.bytes / 1e6:.0f} MB, {grown.seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
