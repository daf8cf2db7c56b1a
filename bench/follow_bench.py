"""How fast ``RunFollower`` ingests a run directory, each figure against a same-process baseline.

- logs: MB/s of rank log text through ``RunFollower.poll()`` (decode, line split, ``\\r``/cap
  handling, global sequence numbers) against a bare ``f.read()`` + ``bytes.split(b"\\n")`` of the
  same files. Target: at least 200 MB/s.
- metrics: JSONL records/s through ``RunFollower.poll()`` (``runtime.record_columns.parse_columns``:
  one column per field and metric for each rank, no object per record) against the same files
  read whole and parsed three other ways: ``records.parse_chunk`` (one ``Record`` per line, what
  the follower delivered before the columns), and two bare parses of each line with the results
  discarded, ``json.loads`` (the stdlib; what the reader used before orjson) and ``orjson.loads``
  (the parser the reader uses, so the floor of its cost; skipped when orjson is not installed).
  Target: at least 500k records/s.

Files are pre-written to a temporary directory (page cache warm, so this measures the follower,
not the disk). Subject and baseline runs alternate and medians are quoted; on a shared or small
machine the absolute rates drift between runs, the ratios much less. ``--profile`` adds a short
cProfile of one subject run of each kind.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (this checkout first on sys.path)

from ezpz_tui.core.watching.followers import RunFollower
from runtime import records
from runtime.rundir import RunDir

LOG_TARGET_MBS = 200.0
RECORD_TARGET = 500_000.0


def write_logs(run: Path, ranks: int, mb_per_rank: float) -> int:
    """Training-like log lines: timestamps, some ANSI colour, a few progress-bar rewrites."""
    rng = random.Random(0)
    rundir = RunDir(run)
    rundir.logs_dir.mkdir(parents=True)
    total = 0
    for rank in range(ranks):
        lines = []
        size = 0
        i = 0
        while size < mb_per_rank * 1e6:
            kind = rng.random()
            if kind < 0.05:
                line = f"\x1b[33m[W] rank {rank} step {i}: grad norm {rng.random():.4f}\x1b[0m"
            elif kind < 0.06:
                line = "".join(f"\r{p:3d}%|{'#' * (p // 10):10s}|" for p in range(0, 101, 25))
            else:
                line = (
                    f"2026-11-22 10:31:{i % 60:02d} [INFO] rank={rank} step={i} "
                    f"loss={rng.random() * 3:.5f} lr=0.00{rng.randint(1, 9)} "
                    f"dt={rng.random():.4f} tokens/s={rng.randint(10**4, 10**6)}"
                )
            lines.append(line)
            size += len(line) + 1
            i += 1
        data = ("\n".join(lines) + "\n").encode()
        rundir.log(rank).write_bytes(data)
        total += len(data)
    return total


def write_metrics(run: Path, ranks: int, per_rank: int) -> int:
    rng = random.Random(1)
    rundir = RunDir(run)
    rundir.metrics_dir.mkdir(parents=True)
    for rank in range(ranks):
        lines = []
        for step in range(per_rank):
            metrics = {
                "loss": rng.random() * 3,
                "lr": 0.001,
                "dt": rng.random() / 10,
                "grad_norm": rng.random(),
                "tokens_per_s": rng.randint(10**4, 10**6),
            }
            record = {"timestamp": 1.7e9 + step, "rank": rank, "step": step, "metrics": metrics}
            lines.append(json.dumps(record, separators=(",", ":")))
        rundir.metrics(rank).write_text("\n".join(lines) + "\n")
    return ranks * per_rank


def follow_all(run: Path) -> tuple[int, int]:
    """Lines and records a fresh follower delivers until the directory has nothing new."""
    follower = RunFollower(run)
    n_lines = n_records = 0
    while batch := follower.poll():
        n_lines += sum(len(chunk.lines) for chunk in batch.logs)
        n_records += sum(len(recs) for recs in batch.records.values())
    return n_lines, n_records


def baseline_logs(run: Path) -> tuple[int, int]:
    n = 0
    for path, _ in RunDir(run).logs():
        with open(path, "rb") as fh:
            n += len(fh.read().split(b"\n")) - 1
    return n, 0


def _loads_per_line(loads: Callable[[bytes], Any]) -> Callable[[Path], tuple[int, int]]:
    def baseline(run: Path) -> tuple[int, int]:
        n = 0
        for path in sorted(RunDir(run).metrics_dir.iterdir()):
            with open(path, "rb") as fh:
                for line in fh.read().split(b"\n"):
                    if line:
                        loads(line)
                        n += 1
        return 0, n

    return baseline


def baseline_record_objects(run: Path) -> tuple[int, int]:
    """The reader before the columns: one ``Record`` per line (whole files, no follower)."""
    n = 0
    for path in sorted(RunDir(run).metrics_dir.iterdir()):
        with open(path, "rb") as fh:
            n += len(records.parse_chunk(fh.read()).records)
    return 0, n


def metric_baselines() -> list[tuple[str, Callable[[Path], tuple[int, int]]]]:
    out = [
        ("parse_chunk (Records)", baseline_record_objects),
        ("json.loads per line", _loads_per_line(json.loads)),
    ]
    try:
        import orjson
    except ImportError:
        print("  (orjson not installed: no orjson.loads baseline)")
    else:
        out.append(("orjson.loads per line", _loads_per_line(orjson.loads)))
    return out


def timed(fn: Callable[[Path], tuple[int, int]], run: Path) -> tuple[float, tuple[int, int]]:
    start = time.perf_counter()
    counts = fn(run)
    return time.perf_counter() - start, counts


def compare(
    name: str,
    run: Path,
    baselines: list[tuple[str, Callable[[Path], tuple[int, int]]]],
    amount: float,
    unit: str,
    target: float,
    repeats: int,
) -> None:
    subject_s: list[float] = []
    baseline_s: list[list[float]] = [[] for _ in baselines]
    baseline_counts: list[tuple[int, int]] = [(0, 0)] * len(baselines)
    timed(follow_all, run)  # warm the page cache and the code paths
    for _ in range(repeats):
        s, subject_counts = timed(follow_all, run)
        subject_s.append(s)
        for i, (_, baseline) in enumerate(baselines):
            b, baseline_counts[i] = timed(baseline, run)
            baseline_s[i].append(b)
    subject_rate = amount / statistics.median(subject_s)
    verdict = "met" if subject_rate >= target else f"MISSED by {1 - subject_rate / target:.0%}"
    print(f"{name}: {subject_counts} (lines, records) vs baseline {baseline_counts[0]}")
    print(f"  {'RunFollower.poll':24s} median {subject_rate:12,.1f} {unit}  ({repeats} runs)")
    for (label, _), times in zip(baselines, baseline_s, strict=True):
        rate = amount / statistics.median(times)
        print(f"  {label:24s} median {rate:12,.1f} {unit}  follower/this {subject_rate / rate:.2f}")
    print(f"  target >= {target:,.0f} {unit}: {verdict}")


def profile(run: Path) -> None:
    prof = cProfile.Profile()
    prof.runcall(follow_all, run)
    pstats.Stats(prof).sort_stats("tottime").print_stats(8)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--mb-per-rank", type=float, default=16.0)
    parser.add_argument("--records-per-rank", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", choices=("logs", "metrics"))
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    print("rerun:", shlex.join([sys.executable, "bench/follow_bench.py", *sys.argv[1:]]))
    with tempfile.TemporaryDirectory() as tmp:
        logs_run, metrics_run = Path(tmp, "logs-run"), Path(tmp, "metrics-run")
        if args.only != "metrics":
            total_bytes = write_logs(logs_run, args.ranks, args.mb_per_rank)
        if args.only != "logs":
            total_records = write_metrics(metrics_run, args.ranks, args.records_per_rank)
        if args.only != "metrics":
            print(f"logs: {args.ranks} ranks, {total_bytes / 1e6:.1f} MB")
            compare(
                "logs",
                logs_run,
                [("read + split", baseline_logs)],
                total_bytes / 1e6,
                "MB/s",
                LOG_TARGET_MBS,
                args.repeats,
            )
        if args.only != "logs":
            print(f"metrics: {args.ranks} ranks, {total_records:,} records")
            compare(
                "metrics",
                metrics_run,
                metric_baselines(),
                total_records,
                "records/s",
                RECORD_TARGET,
                args.repeats,
            )
        if args.profile:
            if args.only != "metrics":
                profile(logs_run)
            if args.only != "logs":
                profile(metrics_run)


if __name__ == "__main__":
    main()
