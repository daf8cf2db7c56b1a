"""Staging N simulated nodes from one read of the source, against ``cp -a`` of it per node.

``python bench/stage_spread_bench.py [--nodes 1,2,4,8] [--reps 3] [--files 20000]
[--source generated|venv] [--disk tmpfs|scratch] [--only time|reads] [--keep]``

Each simulated node is a process of one real mpiexec job in its own namespaces, with its own
hostname and its own staging folder (``tests/fixtures/nodes.py``; needs root, as the tests do),
running ``python -m runtime.stage copy`` as ``ezpz-tui launch --stage`` has every node run it:
the first node reads the source's manifest and its pack (kept between launches, made once here
before the timing), broadcasts them, and every node unpacks as the pieces arrive.

(time) The staging of N = 1, 2, 4, 8 nodes (wall clock of the launcher, every node's copy
checked), against ``cp -a`` of the source by each node at once (the floor of a per-node copy,
what staging did before: every node reading the source), interleaved, medians, the ratio; and
how it grows with N: stage(N)/stage(1) beside 1 + log2(N), the bound of a tree where each level
costs at most one node's copy, and beside N. On one machine the nodes share its cores and disk:
past the cores, N unpacks in parallel cost N/cores of one, which no spreading can avoid; the
line says how many cores there are.

(reads) The bytes and files of the source read per launch, counted with ``strace`` over every
process of the launch (``read`` calls on a file under the source, files opened under it), with
the pack made during the launch and with the pack reused, and the bytes of the pack read, for
each N; ``cp -a`` per node reads the whole source N times.

The nodes' disks are one tmpfs by default (``--disk tmpfs``, as ``/dev/shm`` on a compute node):
on a machine whose one disk other work writes to, the copies' writeback made every figure noise
(``cp -a`` of the same tree took 6 s, then 89 s). ``--disk scratch`` puts them on the scratch
folder's disk. ``--source generated`` (default): a venv with ``--files`` generated files in 100
folders (most a few KiB, some tens of KiB, a few MiB ones; ~8 KiB each on average);
``--source venv``: this venv itself (torch and all; then the staging program's own start reads a
little of it too).
"""

from __future__ import annotations

import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import PY, REPO, bench_parser, print_rerun, scratch, with_repo_path

from runtime.stage import MARK
from runtime.stage_pack import ensure_pack, manifest, size_of
from tests.fixtures.nodes import cannot_simulate, install_launcher, node_disk

PARTS = ("time", "reads")
TIMEOUT_S = 1800.0
MIB = 2**20
_READ = re.compile(r"^(?:read|pread64|readv|preadv)\(\d+<(.*?)>, .*\) = (\d+)$")
_OPEN = re.compile(r"^open(?:at)?\(.*\) = \d+<(.*?)>$")


def generated_source(root: Path, files: int) -> tuple[Path, str]:
    """A venv of this interpreter with ``files`` generated files (the same for every run)."""
    where = root / "source"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(where)], check=True)
    lib = next((where / "lib").glob("python*")) / "site-packages" / "bench_tree"
    draw = random.Random(20260)
    for index in range(files):
        folder = lib / f"pkg{index % 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        pick = draw.random()
        size = (
            draw.randint(1 << 20, 2 << 20)
            if pick < 0.002
            else draw.randint(8 << 10, 32 << 10)
            if pick < 0.1
            else draw.randint(512, 6 << 10)
        )
        (folder / f"mod{index:05d}.py").write_bytes(draw.randbytes(size))
    return where, "bin/python"


def this_venv() -> tuple[Path, str]:
    source = Path(sys.prefix)
    if not (source / "pyvenv.cfg").exists():
        raise SystemExit(
            f"{source} is not a venv: run the bench from one, or use --source generated"
        )
    return source, os.path.relpath(PY, source)


class Nodes:
    """Up to ``most`` simulated nodes made in ``root``, and their staging folder; ``tmpfs``:
    their disks are one tmpfs (else the scratch folder's disk)."""

    def __init__(self, root: Path, most: int, tmpfs: bool) -> None:
        self.root, self.stage_dir = root, root / "node-local"
        self.stage_dir.mkdir()
        self.tmpfs = node_disk(root, "any").parent if tmpfs else None
        if self.tmpfs is not None:
            self.tmpfs.mkdir()
            subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(self.tmpfs)], check=True)
        self.hosts = [f"vm{i + 1}" for i in range(most)]
        self.env = with_repo_path(dict(os.environ))
        self.env.update(install_launcher(root, self.stage_dir, self.hosts))
        self.launcher = str(root / "sim-bin" / "mpiexec")

    def close(self) -> None:
        if self.tmpfs is not None:
            subprocess.run(["umount", str(self.tmpfs)], check=False)

    def hostfile(self, n: int) -> Path:
        path = self.root / f"nodefile-{n}"
        path.write_text("".join(f"{h}\n" for h in self.hosts[:n]))
        return path

    def clear(self) -> None:
        for host in self.hosts:
            disk = node_disk(self.root, host)
            for path in disk.iterdir():
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()

    def stage_argv(self, n: int, source: Path, python: str, pack: Path) -> list[str]:
        argv = [self.launcher, "-f", str(self.hostfile(n)), "-n", str(n), "-ppn", "1", PY]
        argv += ["-m", "runtime.stage", "copy", "--source", str(source), "--python", python]
        return [*argv, "--dest", str(self.stage_dir / "copy"), "--pack", str(pack)]

    def stage(self, n: int, source: Path, python: str, pack: Path, wrap: list[str]) -> float:
        """Seconds to stage on ``n`` nodes; every node's copy checked (``wrap``: e.g. strace)."""
        self.clear()
        began = time.perf_counter()
        done = subprocess.run(
            [*wrap, *self.stage_argv(n, source, python, pack)],
            env=self.env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
        took = time.perf_counter() - began
        answers = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
        failed = [a for a in answers if '"ok": true' not in a]
        if done.returncode != 0 or len(answers) != n or failed:
            raise SystemExit(f"staging on {n} nodes failed:\n{done.stdout}{done.stderr[-3000:]}")
        for host in self.hosts[:n]:
            if not (node_disk(self.root, host) / "copy" / python).exists():
                raise SystemExit(f"{host} has no copy")
        return took

    def copy_each(self, n: int, source: Path) -> float:
        """Seconds for ``cp -a`` of the source by ``n`` nodes at once."""
        self.clear()
        began = time.perf_counter()
        procs = [
            subprocess.Popen(["cp", "-a", str(source), str(node_disk(self.root, host) / "copy")])
            for host in self.hosts[:n]
        ]
        if any(proc.wait(TIMEOUT_S) != 0 for proc in procs):
            raise SystemExit("cp -a failed")
        return time.perf_counter() - began


def bench_time(nodes: Nodes, counts: list[int], reps: int, source: Path, python: str) -> None:
    pack = nodes.root / "cache" / "source.tar"
    made = ensure_pack(source, pack, manifest(source))
    print(
        f"the pack: {made['bytes'] / MIB:.0f} MiB made once in {made['seconds']:.1f} s "
        f"(the source read once: {made['source_read'] / MIB:.0f} MiB), reused by every launch below"
    )
    staged: dict[int, list[float]] = {n: [] for n in counts}
    copied: dict[int, list[float]] = {n: [] for n in counts}
    for rep in range(reps):
        for n in counts:
            for name in ("stage", "cp") if (rep + n) % 2 == 0 else ("cp", "stage"):
                if name == "stage":
                    staged[n].append(nodes.stage(n, source, python, pack, []))
                else:
                    copied[n].append(nodes.copy_each(n, source))
            print(
                f"  rep {rep + 1}, {n} node{'s' * (n > 1)}: stage {staged[n][-1]:.2f} s, "
                f"cp -a each {copied[n][-1]:.2f} s",
                flush=True,
            )
    nodes.clear()
    one = statistics.median(staged[counts[0]]) if counts[0] == 1 else None
    print(
        f"staging on N simulated nodes (median of {reps}; this machine has {os.cpu_count()} cores):"
    )
    print("  nodes   stage   cp -a each  stage/cp   stage(N)/stage(1)  1+log2(N)     N")
    for n in counts:
        stage, floor = statistics.median(staged[n]), statistics.median(copied[n])
        growth = f"{stage / one:17.2f}" if one else f"{'':>17}"
        print(
            f"  {n:5d} {stage:6.2f} s {floor:8.2f} s {stage / floor:8.2f}x  {growth}  "
            f"{1 + math.log2(n):9.2f} {n:5d}"
        )


def _traced(folder: Path, source: Path, pack: Path) -> dict[str, int]:
    """What the traces in ``folder`` say was read: the source's bytes and files, the pack's."""
    src, tar = str(source) + "/", str(pack)
    found = {"source_bytes": 0, "source_files": 0, "pack_bytes": 0}
    for trace in folder.iterdir():
        for line in trace.read_text(errors="replace").splitlines():
            read = _READ.match(line)
            if read:
                path, count = read.group(1), int(read.group(2))
                if path.startswith(src):
                    found["source_bytes"] += count
                elif path == tar:
                    found["pack_bytes"] += count
                continue
            opening = _OPEN.match(line)
            if opening and opening.group(1).startswith(src) and "O_DIRECTORY" not in line:
                found["source_files"] += 1
    return found


def bench_reads(nodes: Nodes, counts: list[int], source: Path, python: str) -> None:
    strace = shutil.which("strace")
    if strace is None:
        raise SystemExit("the reads part needs strace: apt-get install strace")
    want = manifest(source)
    size, files = size_of(want), sum(1 for e in want.values() if e[0] == "f")
    pack = nodes.root / "cache" / "traced.tar"
    print(
        "bytes read per launch (strace of every process; the source: "
        f"{size / MIB:.0f} MiB, {files} files):"
    )
    print("  nodes  pack   source read (files opened)   pack read   cp -a each reads")
    for n in counts:
        for made in ("made", "reused"):
            if made == "made":
                for path in pack.parent.glob(pack.name + "*"):
                    path.unlink()
            folder = nodes.root / f"trace-{n}-{made}"
            folder.mkdir()
            wrap = [strace, "-f", "-ff", "-qq", "-y", "-s", "0", "-e", "signal=none"]
            wrap += ["-e", "trace=openat,open,read,pread64,readv,preadv", "-o", str(folder / "t")]
            nodes.stage(n, source, python, pack, wrap)
            got = _traced(folder, source, pack)
            shutil.rmtree(folder)
            source_read = f"{got['source_bytes'] / MIB:8.1f} MiB ({got['source_files']:6d})"
            print(
                f"  {n:5d}  {made:6s} {source_read}   {got['pack_bytes'] / MIB:7.1f} MiB   "
                f"{n * size / MIB:8.1f} MiB ({n * files})"
            )
    nodes.clear()


def main() -> None:
    parser = bench_parser(__doc__, PARTS)
    parser.add_argument("--nodes", default="1,2,4,8", help="the node counts, comma-separated")
    parser.add_argument("--reps", type=int, default=3, help="runs of each variant")
    parser.add_argument("--files", type=int, default=20000, help="files of the generated source")
    parser.add_argument("--source", choices=("generated", "venv"), default="generated")
    parser.add_argument(
        "--disk",
        choices=("tmpfs", "scratch"),
        default="tmpfs",
        help="the nodes' disks: one tmpfs (as /dev/shm on a compute node), or the scratch disk",
    )
    args = parser.parse_args()
    print_rerun("stage_spread_bench.py", args)
    why_not = cannot_simulate()
    if why_not:
        raise SystemExit(f"cannot simulate nodes here: {why_not} (the bench needs root)")
    counts = sorted({int(n) for n in args.nodes.split(",")})
    with scratch("stage-spread-bench-", args.keep) as root:
        if args.source == "generated":
            source, python = generated_source(root, args.files)
        else:
            source, python = this_venv()
        nodes = Nodes(root, max(counts), args.disk == "tmpfs")
        try:
            if args.only in (None, "time"):
                bench_time(nodes, counts, args.reps, source, python)
            if args.only in (None, "reads"):
                bench_reads(nodes, counts, source, python)
        finally:
            nodes.close()


if __name__ == "__main__":
    main()
