"""How ezpz-tui holds up on Aurora-sized runs: 1,024, 4,096 and 16,384 ranks (issue 14).

``python bench/scale_bench.py [--ranks 1024,4096,16384] [--baseline-ranks 64] [--idle-s 5]
[--live-s 15] [--presses 40]``

For each size a run directory in the layout of docs/run-directory.md is generated (run.toml with
the world size, state.json, and per rank a status, a 40-line ezpz-like log with ANSI colour, 30
metric records and 10 telemetry samples; 12 ranks a host, as on Aurora). Then, each in a fresh
process running the real app headless (Textual's ``run_test``, attached to the run):

- finished: state and statuses say it ended. Measured: the time from starting the app until
  every rank's row shows its state (the first frame that has them all); then, once the
  follower has read everything, ``--idle-s`` seconds idle: the process's CPU use, and the
  metadata calls a second, counted twice: by the in-process counter (``fscalls``) and, in a
  second window, by ``strace -c -f`` attached to the app (when strace exists; said which).
- live: the same run, state and statuses running, a writer process appending 5 lines a second
  to the logs of ``--active`` of the ranks, a record a second to their JSONL, and a stamped
  line every 50 ms to rank 0's log (the rank on screen). Measured over ``--live-s`` seconds:
  metadata calls a second (counter, then strace), how long after its write the newest stamped
  line is in the log view (sampled every 20 ms), key press to repaint (``j``/``k`` in the rank
  list: the time Pilot takes to deliver the key and let the app settle, which includes the
  repaint of the rows and the log it selects), and the RSS at the end.

The baseline is the same measurement on a run of ``--baseline-ranks`` (64) generated the same
way, each variant of it in a process of its own just before the size's (the box is shared with
other work: the two then run under the same load), after one unmeasured process (the first
pays for cold caches). Every figure is printed beside the baseline's with their ratio (what the
size costs over a small run) and beside its target.
Figures are medians of the samples taken; the p95 of the key presses is their 95th percentile.
The RSS target is "after 10 minutes live": the RSS printed is after the live window
(``--live-s 600`` measures the real thing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import PY, REPO, print_rerun, scratch, versus

RANKS_PER_HOST = 12
LOG_LINES, RECORDS, SAMPLES = 40, 30, 10
STAMP = "STAMP "
METADATA = re.compile(r"^(newfstatat|fstatat64|statx|stat|lstat|fstat|openat|open|getdents64)$")
TARGETS = {
    1024: (1.0, 300, 100),  # first frame s, RSS MB, key p95 ms
    4096: (2.0, 400, 150),
    16384: (5.0, 600, 200),
}

LINE = (
    "[\x1b[32mI\x1b[0m][ezpz/examples/train:212] rank={rank} step={step} loss={loss:.4f} "
    "dt=0.1042 dtf=0.0213 dtb=0.0514 lr=0.000300 tps=121234.5"
)


# --- the run directory ---------------------------------------------------------------------------


def generate(run: Path, ranks: int, started: float) -> None:
    """A finished run of ``ranks`` ranks, written as the ranks and the supervisor write it."""
    from runtime import records
    from runtime.rundir import RankState, RankStatus, RunDir, RunState, State, write_state
    from runtime.telemetry.record import Sample

    rundir = RunDir(run)
    rundir.make_folders(ranks)
    rundir.run_toml.write_text(
        f'run_id = "{run.name}"\ncreated_epoch = {started}\n\n'
        f"[sizes]\nworld_size = {ranks}\ntp = 1\npp = 1\ncp = 1\ndp = {ranks}\n"
    )
    write_state(run, RunState(State.SUCCEEDED, start=started, end=started + 600, exit_code=0))
    (rundir.launcher_log).write_text("launched\n")
    for rank in range(ranks):
        host = f"x4000c0s{rank // RANKS_PER_HOST}b0n0.hsn.cm.aurora.alcf.anl.gov"
        status = RankStatus(
            rank,
            local_rank=rank % RANKS_PER_HOST,
            world_size=ranks,
            host=host,
            pid=100000 + rank,
            start=started,
            end=started + 600,
            state=RankState.SUCCEEDED,
            exit_code=0,
        )
        rundir.status(rank).write_text(json.dumps(status.to_json()))
        log = "".join(
            LINE.format(rank=rank, step=i, loss=2.5 - i / 100) + "\n" for i in range(LOG_LINES)
        )
        rundir.log(rank).write_text(log)
        rundir.metrics(rank).write_bytes(
            b"".join(
                records.encode(rank, i, {"loss": 2.5 - i / 100, "dt": 0.1}, started + i)
                for i in range(RECORDS)
            )
        )
        samples = (
            Sample(started + 2 * i, cpu_pct=100.0, rss_bytes=2e9).to_json() for i in range(SAMPLES)
        )
        rundir.telemetry(rank).write_text("\n".join(samples) + "\n")


def make_live(run: Path, ranks: int, started: float) -> None:
    """The same run, running: its state and every status say so."""
    from runtime.rundir import RankState, RankStatus, RunDir, RunState, State, write_state

    rundir = RunDir(run)
    write_state(run, RunState(State.RUNNING, start=started))
    for rank in range(ranks):
        status = json.loads(rundir.status(rank).read_text())
        status.update(state=str(RankState.RUNNING), end=None, exit_code=None)
        rundir.status(rank).write_text(json.dumps(RankStatus.from_json(status, rank).to_json()))


def writer(run: Path, ranks: int, active: float, seconds: float) -> None:
    """Append to the active ranks' logs and JSONL, and stamped lines to rank 0's log."""
    from runtime import records
    from runtime.rundir import RunDir

    rundir = RunDir(run)
    chosen = range(0, ranks, max(1, round(1 / active)))
    flags = os.O_WRONLY | os.O_APPEND
    logs = {r: os.open(rundir.log(r), flags) for r in chosen}
    mets = {r: os.open(rundir.metrics(r), flags) for r in chosen}
    start = time.monotonic()
    tick = 0
    while time.monotonic() - start < seconds:
        tick += 1
        os.write(logs[0], f"{STAMP}{time.time():.3f}\n".encode())
        if tick % 4 == 0:  # every 0.2 s: one line per active rank (5 a second)
            step = LOG_LINES + tick
            for rank, fd in logs.items():
                os.write(fd, (LINE.format(rank=rank, step=step, loss=1.0) + "\n").encode())
        if tick % 20 == 0:  # every second: a record per active rank
            for rank, fd in mets.items():
                os.write(fd, records.encode(rank, tick // 20, {"loss": 1.0}, time.time()))
        time.sleep(max(0.0, start + tick * 0.05 - time.monotonic()))


# --- the app, headless ---------------------------------------------------------------------------


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Strace:
    """``strace -c -f`` attached to this process for a window; None where strace is missing."""

    def __init__(self, out: Path) -> None:
        self.out = out
        argv = ["strace", "-c", "-f", "-qq", "-p", str(os.getpid()), "-o", str(out)]
        self.proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
        time.sleep(0.5)  # attached to every thread

    def metadata_calls(self) -> tuple[int, dict[str, int]]:
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(30)
        found: dict[str, int] = {}
        for line in self.out.read_text().splitlines():
            words = line.split()
            if len(words) >= 5 and METADATA.match(words[-1]) and words[3].isdigit():
                found[words[-1]] = int(words[3])
        return sum(found.values()), found


async def measure(args: argparse.Namespace) -> dict[str, object]:
    """The figures of one variant, from inside the app's process."""
    import shutil

    from ezpz_tui.core.launching.allocation import Allocation
    from ezpz_tui.core.watching import fscalls
    from ezpz_tui.ui.app import EzpzApp
    from ezpz_tui.ui.widgets.logview import LogView
    from ezpz_tui.ui.widgets.ranks import RankList
    from runtime.rundir import RankState

    run, ranks = Path(args.run), int(args.ranks)
    host = os.uname().nodename
    alloc = Allocation("none", None, host, (host,), 1, "cpu", "bench", None, time.time(), None, 2)
    out: dict[str, object] = {"tracer": "strace -c -f" if shutil.which("strace") else "fscalls"}
    start = time.monotonic()
    app = EzpzApp(outputs=run.parent, alloc=alloc, checks=[], attach=run)
    async with app.run_test(size=(160, 50)) as pilot:
        main = app.main  # type: ignore[attr-defined]

        def rows_shown() -> bool:
            opened = main.opened
            if opened is None or not main.views.mounted:
                return False
            monitor = opened.monitor
            known = sum(i.status != RankState.WAITING for i in monitor.ranks.values())
            return main.run_panel.ranks.row_count >= ranks and known >= ranks

        while not rows_shown():
            await pilot.pause(0.02)
        out["first_frame_s"] = time.monotonic() - start
        follower = None
        while follower is None or follower._unread:  # every file read once
            await pilot.pause(0.1)
            follower = main.opened.follower
        out["read_all_s"] = time.monotonic() - start
        await pilot.pause(1.0)
        if args.child == "live":
            writing = subprocess.Popen(
                [PY, __file__, "--writer", str(run), "--ranks", str(ranks), "--active",
                 str(args.active), "--live-s", str(args.live_s + 2 * args.idle_s + 30)]
            )  # fmt: skip
            await pilot.pause(2.0)
        window = args.live_s if args.child == "live" else args.idle_s
        cpu, calls, wall = time.process_time(), fscalls.total(), time.monotonic()
        lags: list[float] = []
        log = app.query_one(LogView)
        deadline = wall + window
        if args.child == "finished":  # idle: no sampling to disturb it
            await pilot.pause(window)
        while time.monotonic() < deadline:
            await pilot.pause(0.02)
            if log.lines and STAMP in log.lines[-1][1]:
                lags.append(time.time() - float(log.lines[-1][1].split()[-1]))
        wall = time.monotonic() - wall
        out["cpu_pct"] = 100 * (time.process_time() - cpu) / wall
        out["fscalls_per_s"] = (fscalls.total() - calls) / wall
        out["finished"] = bool(follower.finished)
        if lags:
            out["lag_s"] = statistics.median(lags)
            out["lag_p95_s"] = sorted(lags)[int(0.95 * (len(lags) - 1))]
        if out["tracer"] != "fscalls":
            tracer = Strace(run.parent / f"strace-{args.child}.txt")
            began = time.monotonic()
            await pilot.pause(args.idle_s)
            total, kinds = tracer.metadata_calls()
            out["strace_per_s"] = total / (time.monotonic() - began)
            out["strace_kinds"] = kinds
        ranks_list = app.query_one(RankList)
        ranks_list.focus()
        await pilot.pause(0.2)
        presses = []
        first = ranks_list.selected
        for i in range(args.presses):
            want = first + 1 if i % 2 == 0 else first
            began = time.monotonic()
            pressing = asyncio.create_task(pilot.press("j" if i % 2 == 0 else "k"))
            while log.rank != want or ranks_list.selected != want:
                await asyncio.sleep(0.002)
            presses.append(time.monotonic() - began)
            await pressing
            await pilot.pause(0.05)
        out["key_ms"] = 1000 * statistics.median(presses)
        out["key_p95_ms"] = 1000 * sorted(presses)[int(0.95 * (len(presses) - 1))]
        out["rss_mb"] = rss_mb()
        if args.child == "live":
            writing.terminate()
            writing.wait(10)
    return out


# --- the parent ----------------------------------------------------------------------------------


def child(variant: str, run: Path, ranks: int, args: argparse.Namespace) -> dict[str, object]:
    argv = [PY, __file__, "--child", variant, "--run", str(run), "--ranks", str(ranks)]
    for name in ("idle_s", "live_s", "presses", "active"):
        argv += ["--" + name.replace("_", "-"), str(getattr(args, name))]
    env = {**os.environ, "EZPZ_TUI_CONFIG_DIR": str(run.parent / "config")}
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env=env, timeout=1800)
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise SystemExit(f"{variant} {ranks}: no result\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")


def target(size: int) -> tuple[float, int, int]:
    """The targets of the issue's nearest size at or above ``size`` (the largest beyond)."""
    return next((TARGETS[s] for s in sorted(TARGETS) if size <= s), TARGETS[max(TARGETS)])


def metadata_per_s(figures: dict[str, Any]) -> float:
    """Metadata calls a second: strace's count where it ran, else the in-process counter's."""
    return float(figures.get("strace_per_s", figures["fscalls_per_s"]))


# name, variant, the figure, its form, its target at a size
FIGURES: list[tuple[str, str, Callable[[dict], float], str, Callable[[int], str]]] = [
    (
        "attach: first frame with every rank's row",
        "finished",
        lambda f: f["first_frame_s"],
        "{:.2f} s",
        lambda s: f"≤ {target(s)[0]:g} s",
    ),
    ("finished run, idle: CPU", "finished", lambda f: f["cpu_pct"], "{:.1f}%", lambda s: "≤ 2%"),
    (
        "finished run, idle: metadata calls/s",
        "finished",
        metadata_per_s,
        "{:.1f}/s",
        lambda s: "≤ 20/s",
    ),
    ("live run: metadata calls/s", "live", metadata_per_s, "{:,.0f}/s", lambda s: "≤ 1,000"),
    (
        "live run: newest line of the rank on screen shown after",
        "live",
        lambda f: f.get("lag_s", float("nan")),
        "{:.2f} s",
        lambda s: "≤ 0.5 s",
    ),
    (
        "RSS after the live window",
        "live",
        lambda f: f["rss_mb"],
        "{:.0f} MB",
        lambda s: f"≤ {target(s)[1]} MB",
    ),
    (
        "key press to repaint, p95 (live)",
        "live",
        lambda f: f["key_p95_ms"],
        "{:.0f} ms",
        lambda s: f"≤ {target(s)[2]} ms",
    ),
]


def table(
    results: dict[int, dict[str, dict]], baselines: dict[int, dict[str, dict]], small: int
) -> str:
    """A row a figure, a column a size: each size's figure beside its baseline's, the ratio."""
    sizes = sorted(results)
    rows = [
        "| figure | " + " | ".join(f"{s:,} ranks vs {small:,}" for s in sizes) + " |",
        "| --- |" + " --- |" * len(sizes),
    ]
    for name, variant, figure, form, aim in FIGURES:
        cells = [
            f"{versus(figure(results[s][variant]), figure(baselines[s][variant]), form)} "
            f"(target {aim(s)})"
            for s in sizes
        ]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="1024,4096,16384", help="comma-separated sizes")
    parser.add_argument(
        "--baseline-ranks", type=int, default=64, help="the small run each size is set against"
    )
    parser.add_argument("--idle-s", type=float, default=5.0)
    parser.add_argument("--live-s", type=float, default=15.0)
    parser.add_argument("--presses", type=int, default=40)
    parser.add_argument("--active", type=float, default=0.1, help="share of ranks writing")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--child", choices=("finished", "live"), help=argparse.SUPPRESS)
    parser.add_argument("--writer", help=argparse.SUPPRESS)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.writer:
        writer(Path(args.writer), int(args.ranks), args.active, args.live_s)
        return 0
    if args.child:
        print(json.dumps(asyncio.run(measure(args))))
        return 0
    print_rerun("scale_bench.py", args)
    sizes, small = [int(s) for s in args.ranks.split(",")], args.baseline_ranks
    results: dict[int, dict[str, dict]] = {}
    baselines: dict[int, dict[str, dict]] = {}
    with scratch("scale-bench-", args.keep) as root:
        for size in sizes:
            results[size], baselines[size] = {}, {}
            pairs = []  # the baseline first: it runs just before the size, in each variant
            for ranks, into, folder in (
                (small, baselines[size], f"{size}-baseline"),
                (size, results[size], str(size)),
            ):
                (root / folder / "config").mkdir(parents=True)
                run = root / folder / f"20261126-120000-000-tp1pp1cp1-{ranks}"
                began = time.monotonic()
                generate(run, ranks, time.time() - 600)
                print(f"{ranks} ranks: generated in {time.monotonic() - began:.1f} s", flush=True)
                pairs.append((ranks, into, run))
            if size == sizes[0]:  # unmeasured: the first process pays for cold caches
                child("finished", pairs[0][2], small, args)
            for variant in ("finished", "live"):
                for ranks, into, run in pairs:
                    if variant == "live":
                        make_live(run, ranks, time.time() - 60)
                    into[variant] = child(variant, run, ranks, args)
                    print(f"  {ranks} {variant}: {json.dumps(into[variant])}", flush=True)
    tracer = results[sizes[0]]["finished"]["tracer"]
    print(f"\nmetadata calls counted by {tracer} (stat family, open, getdents64)")
    print(f"each size beside a run of {small:,} ranks measured just before it (size/baseline)")
    print(table(results, baselines, small))
    return 0


if __name__ == "__main__":
    sys.exit(main())
