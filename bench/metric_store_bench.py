"""Memory of the metric store fed a grown run, holding every rank's series vs the lean store
(issue 34): the bands and each rank's last values, a rank's series read when it is shown.

``python bench/metric_store_bench.py [--ranks 4096] [--steps 300] [--keep]``

A run directory of ``--ranks`` ranks is written as the demo writes one (``metrics/rank-N.jsonl``,
``--steps`` records a rank of 9 metrics, through ``runtime.records.encode``); each file is read
with the follower's column parser (``tails.file_columns``) and fed to a store, rank by rank, in
a fresh process per store: ``full`` holds every series (the store before issue 34, and still
what a store of 64 ranks or fewer does), ``lean`` is given the run's loader (as the Metrics tab
does). Printed per store: the Python memory it holds once fed (tracemalloc, current, with the
parsed columns gone), the numpy arrays among it (``nbytes``), the process's RSS then, and the
feeding time (untraced, a run of its own); lean vs full as ratios. Then, for the lean store,
the time to read one rank's series from its file and hand it over (``read_rank`` +
``install``), median of 5.
"""

from __future__ import annotations

import gc
import json
import math
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from _common import PY, bench_parser, print_rerun, scratch

METRICS = (
    "loss",
    "lr",
    "grad_norm",
    "dt",
    "tokens_per_s",
    "samples_per_s",
    "tflops",
    "mfu",
    "mem_peak_gb",
)


def grow(run: Path, ranks: int, steps: int) -> None:
    """Write ``ranks`` metric files of ``steps`` records each, values differing by rank."""
    from runtime.records import encode

    folder = run / "metrics"
    folder.mkdir(parents=True)
    for rank in range(ranks):
        lines = []
        for step in range(steps):
            loss = 4.0 * math.exp(-step / 80) + 0.5 + 0.05 * math.sin(rank + step)
            values = (
                round(loss, 6),
                3e-4 * min(1.0, step / 20),
                round(1.0 + 0.1 * math.cos(rank * step), 6),
                round(0.2 + 0.001 * (rank % 12), 6),
                round(40960 / (0.2 + 0.001 * (rank % 12)), 3),
                round(8 / (0.2 + 0.001 * (rank % 12)), 3),
                round(1.5 + 0.01 * (rank % 7), 4),
                round(0.31 + 0.001 * (rank % 5), 5),
                round(12.5 + 0.01 * (rank % 3), 4),
            )
            metrics = dict(zip(METRICS, values, strict=True))
            lines.append(encode(rank, step, metrics, 1.8e9 + 0.2 * step + 1e-4 * rank))
        (folder / f"rank-{rank:05d}.jsonl").write_bytes(b"".join(lines))


def feed(run: Path, lean: bool) -> object:
    from ezpz_tui.core.watching.metrics.load import rank_loader
    from ezpz_tui.core.watching.metrics.store import MetricStore
    from ezpz_tui.core.watching.tails import file_columns
    from runtime.metric_files import metric_files

    store = MetricStore(rank_loader(run) if lean else None)
    for path, rank in metric_files(run):
        for result in file_columns(path, rank):
            for record_rank, columns in result.columns.items():
                store.add(record_rank, columns)
    return store


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return math.nan


def child(run: Path, variant: str) -> None:
    """One store, measured in this fresh process; prints one JSON line."""
    lean = variant == "lean"
    import numpy  # noqa: F401  (imported before tracing: not the store's memory)

    from ezpz_tui.core.watching.metrics import store as _  # noqa: F401

    started = time.perf_counter()
    store = feed(run, lean)
    seconds = time.perf_counter() - started
    store.band("loss")
    rss = rss_mb()
    del store
    gc.collect()
    tracemalloc.start()
    store = feed(run, lean)
    store.band("loss")
    gc.collect()
    held, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    figures = {"held_mb": held / 2**20, "nbytes_mb": store.nbytes / 2**20, "rss_mb": rss}
    figures["feed_s"] = seconds
    figures["lean"] = store.lean
    if lean:
        times = []
        for rank in (1, 2, 3, 4, 5):
            started = time.perf_counter()
            store.series("loss", rank)
            data = store.read_rank(rank)
            assert data is not None and store.install(rank, data)
            times.append(time.perf_counter() - started)
        figures["read_rank_ms"] = statistics.median(times) * 1000
    print(json.dumps(figures))


def measure(run: Path, variant: str) -> dict[str, float]:
    done = subprocess.run(
        [PY, __file__, "--child", variant, "--run", str(run)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = bench_parser(__doc__, ())
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--child", choices=("full", "lean"), help=None)
    parser.add_argument("--run", type=Path, help=None)
    args = parser.parse_args()
    if args.child:
        child(args.run, args.child)
        return 0
    print_rerun("metric_store_bench.py", args)
    with scratch("metric-store-bench-", args.keep) as root:
        run = root / "20261128-120000-000-tp1pp1cp1"
        started = time.perf_counter()
        grow(run, args.ranks, args.steps)
        grown = time.perf_counter() - started
        print(f"grew {args.ranks:,} ranks x {args.steps} steps in {grown:.1f} s")
        full, lean = measure(run, "full"), measure(run, "lean")
    assert lean["lean"] and not full["lean"]
    print(f"{'':28}{'lean':>12}{'full':>12}{'lean/full':>12}")
    for key, label, form in (
        ("held_mb", "store memory (tracemalloc)", "{:.1f} MB"),
        ("nbytes_mb", "its numpy arrays", "{:.2f} MB"),
        ("rss_mb", "process RSS once fed", "{:.0f} MB"),
        ("feed_s", "feeding every file", "{:.2f} s"),
    ):
        ratio = lean[key] / full[key] if full[key] else math.nan
        print(f"{label:28}{form.format(lean[key]):>12}{form.format(full[key]):>12}{ratio:>11.3f}x")
    print(f"one rank's series read on demand (lean): {lean['read_rank_ms']:.1f} ms (median of 5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
