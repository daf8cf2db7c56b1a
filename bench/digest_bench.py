"""``why``, ``top``, ``runs`` and ``compare`` of a finished run read from its digest, against its
files.

``python bench/digest_bench.py SRC [SRC...] [--sizes 64,4096,16384] [--repeats 5] [--keep]``

Each SRC is a real finished run (the 300-step 2-rank demo, say, and a failed run: ``why``
reads the ranks of a failed run only, a run that succeeded needs none read). Its copy is
finalized (``ezpz-tui finalize``: its ``digest.json``), then grown to each size with
bench/grow_run.py (every file a real run of that size writes, the digest built from them by
the finalizer's code), each in an outputs directory of its own, beside its child: the grown
run's twin (its files hard-linked) whose record names it as its parent, as a relaunch's does.
Each command (``ezpz-tui why RUN --json``, ``top RUN --json``, ``runs --json``, ``compare RUN
CHILD --json``) is timed as a person sees it, a subprocess's wall time, on every size with the
digests and without them (the same directories, each ``digest.json`` moved aside: an older
run's or one not finalized yet), interleaved in each repeat so the machine's load falls on both
alike. ``compare`` reads every rank's peak memory where rank 0 records a memory metric, and the
child's goodput the parent's highest step: a SRC that exercises both is
``ezpz-tui launch --quiet --ppn 2 -- python tests/ranks/memory_steps.py 300 fail``.

The finalizer's own cost, building the digest from every rank's files, is timed on each size too
(a fresh interpreter's wall and the CPU of it and its workers), its ranks read by one process
(``EZPZ_DIGEST_WORKERS=1``) and by its workers (the default: the CPUs, at most 8), interleaved.

Printed: each grow's seconds (the digest's build among them); each build's medians, one process
against the workers; per command and size the median
wall with and without the digest, their ratio, and the slope: the wall at that size over the
wall at the smallest, against the issue's targets (2 s at 4,096 ranks, 4 s at 16,384, 15 s at
131,072).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import tomli_w
import tomllib
from _common import bench_parser, clean_env, ezpz_tui, scratch, with_repo_path
from grow_run import grow

from ezpz_tui.core.watching.digesting import WORKERS_VAR
from runtime.rundir import RUN_TOML, RunDir

COMMANDS = ("why", "top", "runs", "compare")
CHILD = "child"  # the grown run's twin, relaunched from it
TARGETS_S = {4096: 2.0, 16384: 4.0, 131072: 15.0}
MODES = ("digest", "files")


def _argv(command: str, run: Path) -> list[str]:
    if command == "runs":
        return [*ezpz_tui(), "runs", "--json"]
    if command == "compare":
        return [*ezpz_tui(), "compare", str(run), str(run.with_name(CHILD)), "--json"]
    return [*ezpz_tui(), command, str(run), "--json"]


def _child(run: Path) -> None:
    """The run's twin beside it, its files hard-linked (no disk), its record naming ``run`` as
    its parent."""
    child = run.with_name(CHILD)
    shutil.copytree(run, child, copy_function=os.link)
    record = tomllib.loads((run / RUN_TOML).read_text())
    (child / RUN_TOML).unlink()  # a link to the parent's
    record.update(run_id=CHILD, parent=run.name)
    (child / RUN_TOML).write_text(tomli_w.dumps(record))


def _wall(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return wall


def _grown(src: Path, root: Path, sizes: list[int]) -> dict[int, Path]:
    """``src`` finalized (its digest) in a copy, then grown to each size in an outputs
    directory of its own."""
    source = root / "source" / src.name
    shutil.copytree(src, source, ignore=shutil.ignore_patterns("*.fifo"))
    env = with_repo_path(clean_env(source.parent))
    start = time.perf_counter()
    subprocess.run([*ezpz_tui(), "finalize", str(source)], env=env, check=True, capture_output=True)
    print(f"finalized {src.name} in {time.perf_counter() - start:.1f} s")
    runs: dict[int, Path] = {}
    for n in sizes:
        run = root / f"outputs-{n}" / source.name
        grown = grow(source, run, n, workers=max(1, min(4, os.cpu_count() or 1)))
        print(
            f"grew {src.name} to {n} ranks: {grown.files} files, {grown.bytes / 1e6:.0f} MB, "
            f"{grown.seconds:.1f} s with the digest's build"
        )
        _child(run)
        runs[n] = run
    return runs


_BUILD = """
import resource, sys, time
from pathlib import Path
from ezpz_tui.core.watching.digesting import build_digest
if __name__ == "__main__":
    began = time.perf_counter()
    build_digest(Path(sys.argv[1]))
    wall = time.perf_counter() - began
    used = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    print(wall, sum(u.ru_utime + u.ru_stime for u in used))
"""


def _builds(runs: dict[int, Path], repeats: int) -> None:
    """The digest's build on each size, by one process and by the workers, interleaved."""
    print("the digest's build (wall, CPU of the process and its workers), medians:")
    for n, run in runs.items():
        figures: dict[str, list[tuple[float, float]]] = {"1": [], "": []}
        for _ in range(repeats):
            for workers, held in figures.items():
                env = {**with_repo_path(clean_env(run.parent)), WORKERS_VAR: workers}
                argv = [sys.executable, "-c", _BUILD, str(run)]
                done = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
                wall, cpu = (float(x) for x in done.stdout.split())
                held.append((wall, cpu))
        (w1, c1), (wn, cn) = (
            tuple(statistics.median(x[i] for x in figures[k]) for i in (0, 1)) for k in ("1", "")
        )
        print(
            f"  {n:>7} ranks: one process {w1:.2f} s wall, {c1:.2f} s CPU; workers {wn:.2f} s "
            f"wall ({w1 / wn:.2f}x faster), {cn:.2f} s CPU"
        )


def _timed(runs: dict[int, Path], repeats: int) -> dict[tuple[str, int, str], list[float]]:
    """Each command's walls on each size, with the digest and without, interleaved."""
    walls: dict[tuple[str, int, str], list[float]] = {}
    for _ in range(repeats):
        for command in COMMANDS:
            for n, run in runs.items():
                env = with_repo_path(clean_env(run.parent))
                digests = [RunDir(r).digest_json for r in (run, run.with_name(CHILD))]
                for mode in MODES:
                    if mode == "files":
                        for digest in digests:
                            digest.rename(digest.with_name(digest.name + ".aside"))
                    try:
                        walls.setdefault((command, n, mode), []).append(
                            _wall(_argv(command, run), env)
                        )
                    finally:
                        if mode == "files":
                            for digest in digests:
                                digest.with_name(digest.name + ".aside").rename(digest)
    return walls


def _table(name: str, walls: dict[tuple[str, int, str], list[float]], sizes: list[int]) -> None:
    base = min(sizes)
    print(f"{name}: median wall, s (slope: over {base} ranks)")
    print(
        f"{'command':<8}{'ranks':>8}{'digest':>9}{'files':>9}{'files/digest':>14}"
        f"{'slope':>8}{'target':>8}"
    )
    for command in COMMANDS:
        for n in sizes:
            with_d, files = (statistics.median(walls[(command, n, m)]) for m in MODES)
            slope = with_d / statistics.median(walls[(command, base, "digest")])
            target = TARGETS_S.get(n)
            said = (
                "-" if target is None else f"{target:g}" + (" ok" if with_d <= target else " MISS")
            )
            print(
                f"{command:<8}{n:>8}{with_d:>9.2f}{files:>9.2f}{files / with_d:>13.2f}x"
                f"{slope:>7.2f}x{said:>8}"
            )


def main() -> int:
    parser = bench_parser(__doc__, ())
    parser.add_argument("src", type=Path, nargs="+", help="finished run directories to grow")
    parser.add_argument("--sizes", default="64,4096,16384", help="ranks, comma-separated")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(n) for n in args.sizes.split(",")]
    for src in args.src:
        with scratch("digest-bench-", args.keep) as root:
            runs = _grown(src, root, sizes)
            _builds(runs, args.repeats)
            _table(
                f"{src.name}, {args.repeats} interleaved repeats", _timed(runs, args.repeats), sizes
            )
    flags = f"--sizes {args.sizes} --repeats {args.repeats}" + (" --keep" if args.keep else "")
    print(f"rerun: python bench/digest_bench.py {' '.join(map(str, args.src))} {flags}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
