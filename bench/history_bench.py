"""History.record() µs per call with 10 scalar metrics: no tracker, csv, tensorboard, vs floors.

Variants, in interleaved rounds of ``--calls`` calls each, medians quoted:

* ``floor``: what one record cost before buffering: ``json.dumps`` of the record and one
  ``os.write`` per call (no conversion, no statistics);
* ``ezpz-standin``: the per-call work of ezpz's ``BaseHistory.update`` (ezpz/history.py, not
  installable here): for each metric, ``grab_tensor`` (a float passes through), append to that
  metric's list, collect it for the returned dict. It keeps every value in memory and writes
  nothing, so it is a floor on ezpz's bookkeeping, not on a record that reaches the disk;
* ``record``: ``History.record`` with no tracker, the caller's time only (the flusher thread's
  writes run beside it, on the same GIL);
* ``record+flush``, ``csv``, ``tensorboard``: the calls plus the ``flush()`` that writes them
  and feeds the tracker, per call: everything a record costs the rank.

* ``record+digest``, ``record+flush+digest``: ``record`` and ``record+flush`` with this
  process reporting to its node digest (``runtime.node_digest``: the flusher sends the newest
  step, and this process is the node's writer), each round paired with the round of its plain
  variant just before it: the ratio says what the digest costs a record.

Target: ``record`` <= 10 µs (median); the digest costs ``record`` under 10%.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import bench_parser, print_rerun
from _paired import describe, estimate

from runtime import node_digest
from runtime.env import RUN_DIR_VAR
from runtime.history import History

PARTS = (
    "floor",
    "ezpz-standin",
    "record",
    "record+digest",
    "record+flush",
    "record+flush+digest",
    "csv",
    "tensorboard",
)
TARGET_US = 10.0
DIGEST_COST = 0.10  # the most the node digest may add to a record


def _metrics(i: int) -> dict[str, float]:
    return {f"m{j}": i * 0.001 + j for j in range(10)}


class EzpzStandin:
    """ezpz's ``BaseHistory.update`` per call, for plain floats (its ``grab_tensor`` returns
    those unchanged)."""

    def __init__(self) -> None:
        self.history: dict[str, list[Any]] = {}

    def update(self, metrics: dict[str, Any]) -> dict[str, Any]:
        avgs = {}
        for key, val in metrics.items():
            if val is None:
                continue
            try:
                self.history[key].append(val)
            except KeyError:
                self.history[key] = [val]
            avgs[key] = val
        return avgs


def _time(
    calls: int, fn: Callable[[int, dict[str, float]], None], after: Callable[[], None]
) -> float:
    batch = [_metrics(i) for i in range(calls)]
    gc.collect()
    t0 = time.perf_counter()
    for i, m in enumerate(batch):
        fn(i, m)
    after()
    return (time.perf_counter() - t0) / calls * 1e6


def _round(name: str, folder: Path, calls: int) -> float:
    """One round of ``calls`` calls of variant ``name`` in a fresh folder, µs per call."""
    if name == "floor":
        fd = os.open(folder / "floor.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND)

        def floor(i: int, m: dict[str, float]) -> None:
            rec = {"timestamp": time.time(), "rank": 0, "step": i, "metrics": m}
            os.write(fd, (json.dumps(rec) + "\n").encode())

        try:
            return _time(calls, floor, lambda: None)
        finally:
            os.close(fd)
    if name == "ezpz-standin":
        standin = EzpzStandin()
        return _time(calls, lambda i, m: standin.update(m), lambda: None)
    trackers = {"csv": ["csv"], "tensorboard": ["tensorboard"]}.get(name, [])
    _digest(folder if name.endswith("+digest") else None)
    h = History(folder, rank=0, trackers=trackers)
    try:
        after = (lambda: None) if name.startswith("record+digest") or name == "record" else h.flush
        return _time(calls, h.record, after)
    finally:
        h.close()


def _digest(run_dir: Path | None) -> None:
    """This process's node digest on, for ``run_dir``, or off (None): the last round's writer
    closed either way, so no round pays for another's."""
    node_digest._abandon()
    if run_dir is not None:
        os.environ[RUN_DIR_VAR] = str(run_dir)
        node_digest._clients.clear()  # the next report starts a client for run_dir


def _paired(results: dict[str, list[float]]) -> None:
    """Each digest variant over its plain one, round by round (run one after the other)."""
    for on, off in (("record+digest", "record"), ("record+flush+digest", "record+flush")):
        if on in results and off in results:
            ratios = [a / b for a, b in zip(results[on], results[off], strict=True)]
            print(f"\n{on} / {off}, paired by round:")
            for line in describe(estimate(ratios), DIGEST_COST):
                print("  " + line)


def main() -> int:
    parser = bench_parser(__doc__, PARTS)
    parser.add_argument("--calls", type=int, default=20_000, help="calls per round")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    args = parser.parse_args()
    print_rerun("history_bench.py", args)
    names = [args.only] if args.only else list(PARTS)
    results: dict[str, list[float]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory(prefix="history-bench-") as tmp:
        for r in range(args.rounds):
            for n in names:
                folder = Path(tmp) / f"{n}-{r}"
                folder.mkdir()
                results[n].append(_round(n, folder, args.calls))
    floor = statistics.median(results["floor"]) if "floor" in results else None
    print(f"\nHistory.record, 10 float metrics, {args.calls} calls x {args.rounds} rounds")
    print(f"{'variant':<14} {'median µs':>10} {'min µs':>8} {'x floor':>8}")
    for n, values in results.items():
        med = statistics.median(values)
        ratio = f"{med / floor:8.2f}" if floor else f"{'-':>8}"
        print(f"{n:<14} {med:10.2f} {min(values):8.2f} {ratio}")
    if len(results["floor" if "floor" in results else next(iter(results))]) >= 2:
        _paired(results)
    if "record" in results:
        med = statistics.median(results["record"])
        verdict = "met" if med <= TARGET_US else "NOT met"
        print(f"\ntarget record <= {TARGET_US:g} µs: {verdict} ({med:.2f} µs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
