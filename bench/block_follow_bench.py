"""What following a live run costs in its blocks of ranks against the same run in flat folders.

A run directory of ``--ranks`` live ranks (each a log, a status, a metrics and a telemetry file,
all written, the last rank's log not yet) is written twice: in blocks of 1,024 ranks
(``logs/b0015/rank-16383.log``, this version) and flat (``logs/rank-16383.log``, a run made
before). The two alternate, ``--reps`` times, each with a fresh ``RunFollower`` under the
``[follow]`` budget (200 calls a second; the polls every 0.25 s, as the TUI's; no change
notification, as on a shared filesystem written from other nodes), measuring:

- first: seconds and metadata calls until every file was found and read once;
- idle: metadata calls a second over ``--idle-s`` seconds after that (stat, listing, open), beside
  what the budget allows (200 a second, or the ``slowest`` promise's files / 60 s when more);
- new file: the last rank's log created, seconds until its line is delivered, and the entries
  the listings read meanwhile (flat: the whole folder again; blocks: one block);
- status: a rank's status rewritten (a rename: its end), seconds until it is delivered.

Calls are counted in-process (``ezpz_tui/core/watching/fscalls.py``); entries listed by a
counting ``os.scandir``. Each figure is printed per layout (median) with the ratio
blocks/flat.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import _common  # noqa: F401  (this checkout first on sys.path)
from _common import print_rerun

from ezpz_tui.core.watching import fscalls
from ezpz_tui.core.watching.followers import RunFollower
from runtime.rundir import RankState, RankStatus, RunDir, RunState, State, write_state

BUDGET = 200.0  # [follow] stats_per_second's default
POLL_S = 0.25
LAYOUTS = ("flat", "blocks")

_listed = [0]
_scandir = os.scandir


class _Counted:
    """``os.scandir`` that counts the entries it yields (what a listing costs the server)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._it = _scandir(path)

    def __enter__(self) -> _Counted:
        return self

    def __exit__(self, *exc: object) -> None:
        self._it.close()

    def __iter__(self) -> _Counted:
        return self

    def __next__(self) -> os.DirEntry[str]:
        entry = next(self._it)
        _listed[0] += 1
        return entry


def write_run(root: Path, ranks: int, layout: str) -> Path:
    """A live run of ``ranks`` ranks in ``layout``; the last rank's log not yet made."""
    run = RunDir(root)
    if layout == "blocks":
        run.make_folders(ranks)
        place: Callable[[Path], Path] = lambda path: path  # noqa: E731
    else:
        for folder in (run.logs_dir, run.status_dir, run.metrics_dir, run.telemetry_dir):
            folder.mkdir(parents=True)
        place = lambda path: path.parent.parent / path.name  # noqa: E731
    write_state(root, RunState(State.RUNNING, start=time.time()))
    fresh = RunDir(root, fresh=True)
    record = b'{"timestamp": 1.0, "rank": 0, "step": 1, "metrics": {"loss": 1.0}}\n'
    for rank in range(ranks):
        status = RankStatus(rank, world_size=ranks, host="h", state=RankState.RUNNING)
        place(fresh.status(rank)).write_text(json.dumps(status.to_json()))
        if rank != ranks - 1:
            place(fresh.log(rank)).write_text(f"rank {rank} started\n")
        place(fresh.metrics(rank)).write_bytes(record)
        place(fresh.telemetry(rank)).write_text('{"time": 1.0, "cpu_pct": 5.0}\n')
    return root


def _counted() -> tuple[int, int]:
    return fscalls.total(), _listed[0]


def measure(root: Path, ranks: int, idle_s: float) -> dict[str, float]:
    follower = RunFollower(root, stats_per_second=BUDGET, first_reads=4096)
    files = 3 * ranks - 1  # logs, metrics, telemetry (statuses are followed apart)
    start, (calls0, _) = time.monotonic(), _counted()
    while len(follower._files) < files or follower._unread:
        follower.poll()
        time.sleep(POLL_S)
    found: dict[str, float] = {
        "first_s": time.monotonic() - start,
        "first_calls": fscalls.total() - calls0,
    }
    start, (calls0, _) = time.monotonic(), _counted()
    while time.monotonic() - start < idle_s:
        follower.poll()
        time.sleep(POLL_S)
    found["idle_calls_per_s"] = (fscalls.total() - calls0) / (time.monotonic() - start)

    run = RunDir(root)
    late = ranks - 1
    path = run.log(late)
    calls0, listed0 = _counted()
    path.write_text("late line\n")
    written = time.monotonic()
    while True:
        if any(r == late for r, _s, _l in follower.poll().logs):
            break
        time.sleep(POLL_S)
    found["new_file_s"] = time.monotonic() - written
    found["new_file_entries"] = _listed[0] - listed0

    rank = ranks // 2
    ended = RankStatus(rank, world_size=ranks, host="h", state=RankState.FAILED, exit_code=3)
    target = run.status(rank)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(json.dumps(ended.to_json()))
    tmp.replace(target)
    written = time.monotonic()
    while rank not in follower.poll().status:
        time.sleep(POLL_S)
    found["status_s"] = time.monotonic() - written
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ranks", type=int, default=16384)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--idle-s", type=float, default=5.0)
    args = parser.parse_args(argv)
    print_rerun("block_follow_bench.py", args)
    os.scandir = _Counted  # type: ignore[assignment,misc]  # the listings' entries, counted
    allowed = max(BUDGET, (4 * args.ranks) / 60.0)
    results: dict[str, list[dict[str, float]]] = {layout: [] for layout in LAYOUTS}
    with tempfile.TemporaryDirectory(prefix="block-follow-") as tmp:
        for rep in range(args.reps):
            for layout in LAYOUTS if rep % 2 == 0 else LAYOUTS[::-1]:
                root = write_run(Path(tmp) / f"{layout}-{rep}", args.ranks, layout)
                found = measure(root, args.ranks, args.idle_s)
                shutil.rmtree(root)
                results[layout].append(found)
                said = ", ".join(f"{k} {v:,.2f}" for k, v in found.items())
                print(f"  rep {rep} {layout:6s}: {said}", flush=True)
    print(f"\n{args.ranks:,} live ranks, medians of {args.reps} (blocks/flat):")
    for key in results["flat"][0]:
        flat = statistics.median(r[key] for r in results["flat"])
        blocks = statistics.median(r[key] for r in results["blocks"])
        ratio = f"{blocks / flat:.2f}" if flat else "-"
        print(f"  {key:18s} flat {flat:12,.2f}   blocks {blocks:12,.2f}   ratio {ratio}")
    idle = statistics.median(r["idle_calls_per_s"] for r in results["blocks"])
    verdict = "within" if idle <= allowed * 1.1 else "OVER"
    print(f"  idle calls/s in blocks: {idle:,.0f}, {verdict} the budget's {allowed:,.0f}")


if __name__ == "__main__":
    main()
