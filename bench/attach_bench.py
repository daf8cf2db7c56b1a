"""Attaching to a finished 4,096- or 16,384-rank run copied from a real demo run (issue 27).

``python bench/attach_bench.py [--ranks 4096,16384] [--baseline-ranks 64] [--reps 3] [--idle-s 5]
[--from RUN] [--profile]``

The run is the issue's: a real 300-step 2-rank demo (``ezpz-tui launch --quiet --ppn 2 --
python -m runtime.examples.train --steps 300``, or ``--from`` an existing one) whose rank 0 and
1 files (log, metrics JSONL, telemetry, status) are copied to every even and odd rank of a run
of N ranks, with the rank numbers the formats carry fixed (the JSONL's ``rank``, the status's
rank, world size and host, 12 ranks a host as on Aurora, the log's ``[rank R]``), and its
``run.toml`` given the new world size. The Flight Recorder files are not copied (the issue's run
has none). Then, each time in a fresh process running the real app headless (Textual's
``run_test``, as ``ezpz-tui attach RUN`` does):

- attach: from creating the app until the rank list has every rank's row with its state and
  the summary bar shows the run's last step (rank 0's records read); the RSS then;
- read: until the follower has read every file once (it is then finished: the run ended);
- idle: ``--idle-s`` seconds more: the CPU % of a core, and the RSS at their end.

The baseline is the same run grown the same way to ``--baseline-ranks`` (64), attached by a
process of its own before each of a size's, so the two alternate under the same load (after
one unmeasured attach: the first process of a command pays for cold caches). Each
figure is the median of ``--reps`` processes, printed beside the baseline's median with their
ratio (what the size costs over a small run of the same files), and beside the issue's targets
(4,096 ranks: 1.5 s, 400 MB; 16,384 ranks: 4 s, 600 MB). ``--profile`` adds one more process
per size that prints where the attach's time goes (cProfile, top functions by cumulative time)
and one that prints what holds the memory once everything is read (tracemalloc, top lines and
top tracebacks by size); both slow the app, so their processes are not timed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import PY, REPO, print_rerun, scratch, versus, with_repo_path

RANKS_PER_HOST = 12
TARGETS = {4096: (1.5, 400), 16384: (4.0, 600)}  # attach s, RSS MB (issue 27)
STEPS = 300


def target(size: int) -> tuple[float, int]:
    """The targets of the issue's nearest size at or above ``size`` (the largest beyond)."""
    return next((TARGETS[s] for s in sorted(TARGETS) if size <= s), TARGETS[max(TARGETS)])


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# --- the run ------------------------------------------------------------------------------------


def demo(outputs: Path) -> Path:
    """A real finished 2-rank demo run of ``STEPS`` steps, launched as a person would."""
    script = Path(PY).parent / "ezpz-tui"
    cli = [str(script)] if script.exists() else [PY, "-m", "ezpz_tui"]
    train = [PY, "-m", "runtime.examples.train", "--steps", str(STEPS)]
    argv = [*cli, "launch", "--quiet", "--ppn", "2", "--outputs", str(outputs), "--", *train]
    env = with_repo_path({k: v for k, v in os.environ.items() if not k.startswith("PMI")})
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"the demo run failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    (run,) = [p for p in outputs.iterdir() if (p / "run.toml").is_file()]
    return run


def copy_run(source: Path, run: Path, ranks: int) -> None:
    """``source``'s 2 ranks copied to ``ranks``, the rank numbers fixed where formats hold them."""
    from runtime.rundir import RunDir

    src, dst = RunDir(source), RunDir(run)
    dst.make_folders()
    toml = src.run_toml.read_text()
    toml = re.sub(r"(?m)^world_size = \d+$", f"world_size = {ranks}", toml)
    toml = re.sub(r"(?m)^dp = \d+$", f"dp = {ranks}", toml)
    dst.run_toml.write_text(toml)
    dst.state_json.write_bytes(src.state_json.read_bytes())
    dst.launcher_log.write_bytes(src.launcher_log.read_bytes())
    logs = [src.log(r).read_bytes() for r in (0, 1)]
    metrics = [src.metrics(r).read_bytes() for r in (0, 1)]
    telemetry = [src.telemetry(r).read_bytes() for r in (0, 1)]
    statuses = [json.loads(src.status(r).read_text()) for r in (0, 1)]
    for rank in range(ranks):
        one = rank % 2
        log = logs[one].replace(f"[rank {one}]".encode(), f"[rank {rank}]".encode())
        dst.log(rank).write_bytes(
            log.replace(f"rank {one}/2".encode(), f"rank {rank}/{ranks}".encode())
        )
        dst.metrics(rank).write_bytes(
            metrics[one].replace(b'"rank":%d,' % one, b'"rank":%d,' % rank)
        )
        dst.telemetry(rank).write_bytes(telemetry[one])
        host = f"x4000c0s{rank // RANKS_PER_HOST}b0n0.hsn.cm.aurora.alcf.anl.gov"
        status = {**statuses[one], "rank": rank, "local_rank": rank % RANKS_PER_HOST}
        status.update(world_size=ranks, host=host)
        dst.status(rank).write_text(json.dumps(status, indent=1))


# --- the app, headless --------------------------------------------------------------------------


async def attach(run: Path, ranks: int, idle_s: float, profile: str | None) -> dict[str, object]:
    """The figures of one attach, from inside the app's process."""
    import cProfile
    import pstats
    import tracemalloc

    from ezpz_tui.core.launching.allocation import Allocation
    from ezpz_tui.ui.app import EzpzApp
    from runtime.rundir import RankState

    host = os.uname().nodename
    alloc = Allocation("none", None, host, (host,), 1, "cpu", "bench", None, time.time(), None, 2)
    out: dict[str, object] = {}
    profiler = cProfile.Profile() if profile == "time" else None
    if profile == "memory":
        tracemalloc.start(12)
    if profiler:
        profiler.enable()
    start = time.monotonic()
    app = EzpzApp(outputs=run.parent, alloc=alloc, checks=[], attach=run)
    async with app.run_test(size=(160, 50)) as pilot:
        main = app.main  # type: ignore[attr-defined]

        def shown() -> bool:
            opened = main.opened
            if opened is None or not main.views.mounted or opened.progress.step != STEPS - 1:
                return False
            known = sum(i.status != RankState.WAITING for i in opened.monitor.ranks.values())
            return main.run_panel.ranks.row_count >= ranks and known >= ranks

        while not shown():
            await pilot.pause(0.02)
        out["attach_s"] = time.monotonic() - start
        out["attach_rss_mb"] = rss_mb()
        if profiler:
            profiler.disable()
            stats = pstats.Stats(profiler, stream=sys.stderr)
            stats.sort_stats("cumulative").print_stats(45)
            stats.sort_stats("tottime").print_stats(25)
        while (follower := main.opened.follower) is None or not follower.finished:
            await pilot.pause(0.1)
        out["read_s"] = time.monotonic() - start
        cpu, wall = time.process_time(), time.monotonic()
        await pilot.pause(idle_s)
        out["idle_cpu_pct"] = 100 * (time.process_time() - cpu) / (time.monotonic() - wall)
        out["idle_rss_mb"] = rss_mb()
        if profile == "memory":
            snap = tracemalloc.take_snapshot()
            total = sum(s.size for s in snap.statistics("filename"))
            print(f"tracemalloc: {total / 2**20:.1f} MB traced", file=sys.stderr)
            for stat in snap.statistics("lineno")[:20]:
                print(
                    f"  {stat.size / 2**20:7.2f} MB {stat.count:>9,} {stat.traceback[0]}",
                    file=sys.stderr,
                )
            for stat in snap.statistics("traceback")[:8]:
                print(f"{stat.size / 2**20:7.2f} MB in {stat.count:,} blocks:", file=sys.stderr)
                for frame in stat.traceback.format()[-16:]:
                    print("    " + frame, file=sys.stderr)
    return out


# --- the parent ---------------------------------------------------------------------------------


def child(run: Path, ranks: int, args: argparse.Namespace, profile: str | None = None) -> dict:
    argv = [PY, __file__, "--child", str(run), "--ranks", str(ranks), "--idle-s", str(args.idle_s)]
    if profile:
        argv += ["--profile-kind", profile]
    env = {**os.environ, "EZPZ_TUI_CONFIG_DIR": str(run.parent / "config")}
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=1800)
    if profile:
        print(done.stderr, flush=True)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise SystemExit(f"{ranks}: no result\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def row(size: int, found: list[dict], base: list[dict]) -> str:
    """A size's medians, each beside the baseline's and their ratio, and the targets."""
    med = {k: statistics.median(f[k] for f in found) for k in found[0]}
    low = {k: statistics.median(f[k] for f in base) for k in base[0]}
    secs, mb = target(size)
    cells = [
        f"{size:,}",
        f"{versus(med['attach_s'], low['attach_s'], '{:.2f} s')} (target ≤ {secs:g} s)",
        versus(med["attach_rss_mb"], low["attach_rss_mb"], "{:.0f} MB"),
        versus(med["read_s"], low["read_s"], "{:.2f} s"),
        f"{versus(med['idle_rss_mb'], low['idle_rss_mb'], '{:.0f} MB')} (target ≤ {mb} MB)",
        versus(med["idle_cpu_pct"], low["idle_cpu_pct"], "{:.1f}%"),
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="4096,16384", help="comma-separated sizes")
    parser.add_argument(
        "--baseline-ranks", type=int, default=64, help="the small copy each size is set against"
    )
    parser.add_argument("--reps", type=int, default=3, help="attaching processes per size")
    parser.add_argument("--idle-s", type=float, default=5.0)
    parser.add_argument("--from", dest="source", help="a finished 2-rank demo run to copy")
    parser.add_argument("--profile", action="store_true", help="also print cProfile, tracemalloc")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--profile-kind", choices=("time", "memory"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        found = asyncio.run(
            attach(Path(args.child), int(args.ranks), args.idle_s, args.profile_kind)
        )
        print(json.dumps(found))
        return 0
    print_rerun("attach_bench.py", args)
    sizes = [int(s) for s in args.ranks.split(",")]
    rows: list[str] = []
    with scratch("attach-bench-", args.keep) as root:
        if args.source:
            source = Path(args.source)
        else:
            began = time.monotonic()
            source = demo(root / "demo")
            print(
                f"demo run ({STEPS} steps, 2 ranks): {time.monotonic() - began:.0f} s", flush=True
            )
        small = args.baseline_ranks
        (root / "baseline" / "config").mkdir(parents=True)
        baseline = root / "baseline" / f"{source.name}-x{small}"
        copy_run(source, baseline, small)
        child(baseline, small, args)  # unmeasured: the first process pays for cold caches
        for size in sizes:
            outputs = root / str(size)
            (outputs / "config").mkdir(parents=True)
            run = outputs / f"{source.name}-x{size}"
            began = time.monotonic()
            copy_run(source, run, size)
            print(f"{size:,} ranks: copied in {time.monotonic() - began:.1f} s", flush=True)
            found, base = [], []
            for _ in range(args.reps):  # the baseline and the size alternate
                base.append(child(baseline, small, args))
                print(f"  {small:,}: {json.dumps(base[-1])}", flush=True)
                found.append(child(run, size, args))
                print(f"  {size:,}: {json.dumps(found[-1])}", flush=True)
            if args.profile:
                child(run, size, args, "time")
                child(run, size, args, "memory")
            rows.append(row(size, found, base))
            shutil.rmtree(run, ignore_errors=True)  # 16,384 ranks hold ~1.7 GB
    print(
        f"\nfinished run copied from a real {STEPS}-step demo, medians of {args.reps}, each "
        f"beside the same run copied to {args.baseline_ranks:,} ranks (size/baseline)"
    )
    print(
        "| ranks | attach: every row + summary | RSS then | all files read | RSS idle | idle CPU |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
