"""Whether ``ezpz-tui attach`` keeps up with a large, busy run, in a real terminal.

``python bench/monitor_bench.py [--seconds 120 | --minutes 10] [--ranks 256] [--size 120x40]``

The issue's targets: 256 ranks each writing 1,000 log lines/s and 10 metric records/s; the UI keeps
up, key press to repaint p95 <= 100 ms, RSS <= 400 MB after 10 minutes.

Method:

- A writer (this file with ``--writer``, one process for all ranks) makes a run directory in the
  layout of docs/run-directory.md through ``runtime.rundir`` (the sizes, a running state, and per
  rank a running status, a log and a metrics file written with ``runtime.records.encode``) and
  appends to every file once per ``--flush-ms`` (buffered appends,
  one ``os.write`` per file and flush), paced to the target rates from its start: a flush writes
  what the rates owe by then, so a writer that falls behind catches up in bigger blocks, and its
  achieved rates (from its own counts, written to a progress file ten times a second) are printed.
  Log lines are 92-139 bytes, ezpz-like, with ANSI colour, and start with the wall-clock time the
  writer made them (``HH:MM:SS.mmm``); every rank gets the same lines.
- Two ``ezpz-tui attach`` sessions run side by side in a private tmux server (panes of
  ``--size``, read with ``capture-pane -p``): the subject follows the live run; the baseline is
  the same app attached to an idle run of the same shape (256 ranks, written by the same writer
  for ``--idle-seconds`` beforehand, then left alone), so both hold full per-rank buffers and
  only the live load differs.
- Key press to repaint: ``j`` / ``k`` in the rank list (focused at start in attach mode) move the
  cursor between rank 0 and rank 1, which rewrites the log status line ("rank N · ..."). Each
  press is timed from ``tmux send-keys`` until that line names the new rank. First
  ``--quiet-presses`` on the idle app alone, before the writer starts (the box is quiet); then
  presses alternate between the subject and the baseline over the run, with pauses so the poller
  (a capture every ``POLL_S``) does not starve the apps; none in the last ``--hold-s`` seconds,
  so the live log view follows one rank undisturbed and its own buffer fills (each press reloads
  it from the rank's 2,000-line buffer), which the RSS must include.
- Every ``--sample-s`` seconds: VmRSS of both app processes from ``/proc/PID/status``; CPU use
  over the interval of both apps, the writer, the tmux server, this script with its tmux clients,
  the whole box and what else ran on it ("other": a shared box makes every figure pessimistic);
  the writer's rates; and whether the UI keeps up: the lag, at the moment of capture, behind the
  timestamps of the lines the screen shows (the newest line anywhere, and the last line of every
  rank visible in the rank list), and the summary bar's step against the writer's (10 steps a
  second). A lag that grows over the run means the app falls behind; a flat one of a few tenths
  of a second is the follower interval (0.1 s), the writer's flush interval and the paint.

Why: the targets are about what a person sees while a big job runs, so they are measured through a
terminal, against the same app with no load (the ratio isolates the cost of following) and with
the figures the issue names. On a 2-core box the writer, the app and tmux share the cores, so the
writer's achieved rate and the CPU use are printed next to every figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from _tmux import EZPZ_TUI, PY, Tmux, clean_env, ms, percentile, versions

POLL_S = 0.01  # between captures while a press is timed: the resolution, plus one capture
TARGET_P95_S = 0.100
TARGET_RSS_MB = 400.0

# The log status line: which rank is shown. Its line count is not live: it is redrawn when the
# view is replaced or paused, not when followed lines are appended.
STATUS_LINE = re.compile(r"rank (\d+) · (\d+) lines")
STAMP = re.compile(r"(?<![\d:.])(\d\d:\d\d:\d\d\.\d{3})(?!\d)")
RANK_ROW = re.compile(r"(\d+) (?:running|stalled|waiting)\s+\S*\s+nid\d+\s+(\d\d:\d\d:\d\d\.\d{3})")
SUMMARY_STEP = re.compile(r"step (\d+)")

# --- the writer ----------------------------------------------------------------------------------

BODIES = [
    "[\x1b[32mI\x1b[0m][ezpz/examples/train:212] step={step} loss={loss:.4f} dt={dt:.4f} "
    "dtf={dtf:.4f} dtb={dtb:.4f} lr=0.000300 tps={tps:.1f} #{n}",
    "[\x1b[32mI\x1b[0m][ezpz/examples/train:231] step={step} grad_norm={gn:.4f} "
    "mem_alloc=12.34GiB mem_reserved=14.02GiB #{n}",
    "[\x1b[32mI\x1b[0m][ezpz/data:88] prefetch queue=4 batch_wait_ms={dtf:.3f} shard=17 #{n}",
    "[\x1b[33mW\x1b[0m][torch/distributed:417] slow collective allreduce bucket=3 "
    "took {dtb:.4f}s (threshold 0.0300s) #{n}",
    "[\x1b[32mI\x1b[0m][ezpz/examples/train:240] step={step} throughput {tps:.1f} tokens/s "
    "mfu=0.412 #{n}",
    "[\x1b[32mI\x1b[0m][ezpz/dist:530] rank heartbeat ok, pending collectives 0 #{n}",
]


def stamp(now: float) -> str:
    """``HH:MM:SS.mmm`` of local time, dimmed, as the lines start (short: the rank list shows a
    row's last line cut to what is left of the main column, 13 cells at 120 columns)."""
    return (
        time.strftime("\x1b[2m%H:%M:%S", time.localtime(now))
        + f".{int(now * 1000) % 1000:03d}\x1b[0m "
    )


def parse_stamp(text: str, at: float) -> float:
    """The time ``HH:MM:SS.mmm`` of local time names, on the day that puts it nearest ``at``."""
    clock = datetime.strptime(text, "%H:%M:%S.%f").time()
    day = datetime.fromtimestamp(at).date()
    moment = datetime.combine(day, clock).timestamp()
    return min((moment - 86400, moment, moment + 86400), key=lambda m: abs(m - at))


def make_run(run: Path, ranks: int, started: float) -> None:
    from runtime.rundir import RankStatus, RunDir, RunState, State

    rundir = RunDir(run)
    rundir.make_folders(ranks)
    rundir.run_toml.write_text(
        f'run_id = "{run.name}"\ncreated_epoch = {started}\n\n'
        f"[sizes]\nworld_size = {ranks}\ntp = 1\npp = 1\ncp = 1\ndp = {ranks}\n"
    )
    rundir.state_json.write_text(json.dumps(RunState(State.RUNNING, start=started).to_json()))
    for rank in range(ranks):
        info = RankStatus(rank, host=f"nid{rank // 4:03d}", pid=100000 + rank, start=started)
        rundir.status(rank).write_text(json.dumps(info.to_json()))


def writer(args: argparse.Namespace) -> int:
    """Append log lines and metric records to every rank's files at the target rates."""
    from runtime import records
    from runtime.rundir import RunDir

    run = Path(args.writer)
    ranks = args.ranks
    started = time.time()
    make_run(run, ranks, started)
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    rundir = RunDir(run)
    logs = [os.open(rundir.log(r), flags, 0o644) for r in range(ranks)]
    mets = [os.open(rundir.metrics(r), flags, 0o644) for r in range(ranks)]
    progress = Path(args.progress)
    stop = False

    def stopped(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGINT, stopped)
    rng = random.Random(0)
    lines = records_done = 0
    step = 0  # steps written to every rank's JSONL
    size = 0
    flush_s = args.flush_ms / 1000
    t0 = time.monotonic()
    next_report = 0.0
    cpu0 = time.process_time()

    def report(final: bool = False) -> None:
        elapsed = time.monotonic() - t0
        owed = int(elapsed * args.lines_per_s) * ranks
        info = {
            "t": time.time(),
            "elapsed": elapsed,
            "lines": lines,
            "records": records_done,
            "step": step,
            "bytes": size,
            "behind_lines": max(0, owed - lines),
            "cpu_s": time.process_time() - cpu0,
            "final": final,
        }
        tmp = progress.with_suffix(".tmp")
        tmp.write_text(json.dumps(info))
        tmp.replace(progress)

    per_rank = 0  # lines written to each rank's log
    while not stop:
        elapsed = time.monotonic() - t0
        if elapsed >= args.seconds:
            break
        want = int(elapsed * args.lines_per_s)
        want_step = int(elapsed * args.records_per_s)
        now = time.time()
        head = stamp(now)
        n_new = want - per_rank
        if n_new > 0:
            # The formatting is shared by all ranks of a flush: bodies differ by line, not rank.
            values = {
                "step": want_step,
                "loss": 2.5 * (0.999 ** (want_step / 10)) + rng.random() * 0.01,
                "dt": 0.1 + rng.random() * 0.01,
                "dtf": 0.02 + rng.random() * 0.005,
                "dtb": 0.05 + rng.random() * 0.01,
                "tps": 120000 + rng.random() * 5000,
                "gn": 1.0 + rng.random(),
            }
            block = "".join(
                f"{head}{BODIES[(per_rank + i) % len(BODIES)].format(n=per_rank + i, **values)}\n"
                for i in range(n_new)
            ).encode()
            for fd in logs:
                os.write(fd, block)
            per_rank = want
            lines += n_new * ranks
            size += len(block) * ranks
        while step < want_step:
            step += 1
            metrics = {
                "loss": 2.5 * (0.999 ** (step / 10)) + rng.random() * 0.01,
                "lr": 3e-4,
                "dt": 0.1 + rng.random() * 0.01,
                "grad_norm": 1.0 + rng.random(),
                "tokens_per_s": 120000 + rng.random() * 5000,
            }
            for rank, fd in enumerate(mets):
                os.write(fd, records.encode(rank, step, metrics, now))
            records_done += ranks
        if elapsed >= next_report:
            report()
            next_report = elapsed + 0.1
        time.sleep(max(0.0, t0 + elapsed + flush_s - time.monotonic()))
    report(final=True)
    for fd in logs + mets:
        os.close(fd)
    return 0


# --- measuring -----------------------------------------------------------------------------------


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def box_busy() -> tuple[float, float]:
    """(busy, total) jiffies of the whole machine, all CPUs."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def read_progress(path: Path) -> dict:
    for _ in range(20):
        with contextlib.suppress(OSError, ValueError):
            return json.loads(path.read_text())
        time.sleep(0.05)
    raise RuntimeError(f"the writer wrote no progress to {path}")


def shown_rank(screen: str) -> int | None:
    match = STATUS_LINE.search(screen)
    return int(match.group(1)) if match else None


class Subject:
    """One attached app: ``j`` selects rank 1, ``k`` rank 0; the log status line says which."""

    def __init__(self, tmux: Tmux, name: str, pid: int) -> None:
        self.tmux, self.name, self.pid = tmux, name, pid
        self.times: list[float] = []
        self.timeouts = 0
        self.turn = 0  # 0: press j (rank 0 -> 1), 1: press k (rank 1 -> 0)

    def press(self, timeout: float = 30.0) -> None:
        key, before, want = ("j", 0, 1) if self.turn == 0 else ("k", 1, 0)
        self.tmux.wait(
            self.name, lambda s: shown_rank(s) == before, f"rank {before}", timeout, 0.05
        )
        start = time.perf_counter()
        self.tmux.key(self.name, key)
        try:
            self.tmux.wait(
                self.name, lambda s: shown_rank(s) == want, f"rank {want}", timeout, POLL_S
            )
            self.times.append(time.perf_counter() - start)
        except RuntimeError:
            self.timeouts += 1
            self.times.append(timeout)
        self.turn = 1 - self.turn


def lags(screen: str, at: float) -> tuple[float | None, list[float]]:
    """How old, at ``at``, the newest line on screen is, and the last line of every rank row."""
    stamps = [parse_stamp(s, at) for s in STAMP.findall(screen)]
    newest = at - max(stamps) if stamps else None
    rows = [at - parse_stamp(m.group(2), at) for m in RANK_ROW.finditer(screen)]
    return newest, rows


def step_shown(screen: str) -> int | None:
    first = screen.split("\n", 1)[0]
    match = SUMMARY_STEP.search(first)
    return int(match.group(1)) if match else None


# --- the run -------------------------------------------------------------------------------------


def writer_argv(run: Path, progress: Path, seconds: float, args: argparse.Namespace) -> list[str]:
    return [
        PY,
        str(Path(__file__).resolve()),
        "--writer",
        str(run),
        "--progress",
        str(progress),
        "--seconds",
        str(seconds),
        "--ranks",
        str(args.ranks),
        "--lines-per-s",
        str(args.lines_per_s),
        "--records-per-s",
        str(args.records_per_s),
        "--flush-ms",
        str(args.flush_ms),
    ]


def attach(tmux: Tmux, name: str, run: Path, timeout: float = 120) -> tuple[Subject, float]:
    """Start ``ezpz-tui attach run``; the subject and the seconds until rank 0's log shows."""
    start = time.perf_counter()
    tmux.new(name, [str(EZPZ_TUI), "attach", str(run)])
    pid = tmux.pane_pid(name)

    def ready(screen: str) -> bool:  # the status line's count is not a test: see STATUS_LINE
        return shown_rank(screen) == 0 and STAMP.search(screen) is not None

    tmux.wait(name, ready, "rank 0's log", timeout, 0.02)
    return Subject(tmux, name, pid), time.perf_counter() - start


class Sampler:
    """RSS and CPU of the apps, the writer, tmux and this script; the box's load; the lag."""

    def __init__(
        self, tmux: Tmux, live: Subject, idle: Subject, writer: subprocess.Popen, progress: Path
    ) -> None:
        self.tmux, self.live, self.idle, self.writer, self.progress = (
            tmux,
            live,
            idle,
            writer,
            progress,
        )
        self.tmux_pid = int(tmux.tmux("display-message", "-p", "#{pid}").stdout)
        self.t0 = time.perf_counter()
        self.rows: list[dict] = []
        self._last = self._counters()

    def _counters(self) -> dict:
        me = os.times()
        return {
            "t": time.perf_counter(),
            "live": cpu_s(self.live.pid),
            "idle": cpu_s(self.idle.pid),
            "writer": cpu_s(self.writer.pid) if self.writer.poll() is None else None,
            "tmux": cpu_s(self.tmux_pid),
            "bench": me.user + me.system + me.children_user + me.children_system,
            "box": box_busy(),
            "progress": read_progress(self.progress),
        }

    def sample(self) -> dict:
        now = self._counters()
        last, self._last = self._last, now
        dt = now["t"] - last["t"]
        before = time.time()
        screen = self.tmux.screen(self.live.name)
        at = (before + time.time()) / 2
        # The writer reports every 0.1 s: its step at the capture is this one or the next.
        writer_step = read_progress(self.progress)["step"]
        newest, rows = lags(screen, at)
        shown = step_shown(screen)
        prog, prev = now["progress"], last["progress"]
        wdt = prog["elapsed"] - prev["elapsed"]

        def share(key: str) -> float | None:
            if dt <= 0 or now[key] is None or last[key] is None:
                return None
            return (now[key] - last[key]) / dt

        busy, total = (now["box"][i] - last["box"][i] for i in (0, 1))
        row = {
            "t": now["t"] - self.t0,
            "live_rss": rss_mb(self.live.pid),
            "idle_rss": rss_mb(self.idle.pid),
            **{f"{key}_cpu": share(key) for key in ("live", "idle", "writer", "tmux", "bench")},
            "box": busy / total * (os.cpu_count() or 1) if total > 0 else None,
            "lines_s": (prog["lines"] - prev["lines"]) / wdt if wdt > 0 else None,
            "records_s": (prog["records"] - prev["records"]) / wdt if wdt > 0 else None,
            "newest": newest,
            "rows": rows,
            "step_lag": writer_step - shown if shown is not None else None,
            "presses": len(self.live.times),
        }
        known = [row[f"{key}_cpu"] for key in ("live", "idle", "writer", "tmux", "bench")]
        row["other"] = (
            max(0.0, row["box"] - sum(k for k in known if k is not None))
            if row["box"] is not None
            else None
        )
        self.rows.append(row)
        return row


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


COLUMNS = (
    # header, width, row -> text
    ("t", 5, lambda r: f"{r['t']:.0f}s"),
    ("RSS live", 8, lambda r: f"{r['live_rss']:.0f} MB"),
    ("RSS idle", 8, lambda r: f"{r['idle_rss']:.0f} MB"),
    ("CPU live", 8, lambda r: fmt(r["live_cpu"], ".0%")),
    ("idle", 5, lambda r: fmt(r["idle_cpu"], ".0%")),
    ("writer", 6, lambda r: fmt(r["writer_cpu"], ".0%")),
    ("tmux", 5, lambda r: fmt(r["tmux_cpu"], ".0%")),
    ("bench", 5, lambda r: fmt(r["bench_cpu"], ".0%")),
    ("box", 5, lambda r: fmt(r["box"], ".0%")),
    ("other", 5, lambda r: fmt(r["other"], ".0%")),
    ("lines/s", 9, lambda r: fmt(r["lines_s"], ",.0f")),
    ("rec/s", 6, lambda r: fmt(r["records_s"], ",.0f")),
    ("newest", 7, lambda r: fmt(r["newest"], ".2f") + "s"),
    (
        "rows med/max (n)",
        17,
        lambda r: (
            f"{statistics.median(r['rows']):.2f}/{max(r['rows']):.2f} ({len(r['rows'])})"
            if r["rows"]
            else "none"
        ),
    ),
    ("step lag", 8, lambda r: fmt(r["step_lag"], ".0f")),
    ("presses", 7, lambda r: str(r["presses"])),
)


def print_header() -> None:
    print("  " + " ".join(f"{name:>{width}}" for name, width, _ in COLUMNS))


def print_row(row: dict) -> None:
    print("  " + " ".join(f"{cell(row):>{width}}" for _, width, cell in COLUMNS), flush=True)


def press_stats(label: str, subject: Subject) -> tuple[float, float]:
    t = subject.times
    p50, p95 = percentile(t, 0.5), percentile(t, 0.95)
    late = f"  ({subject.timeouts} timed out)" if subject.timeouts else ""
    cells = f"p50 {ms(p50, 6)}  p95 {ms(p95, 6)}  max {ms(max(t), 6)}"
    print(f"    {label:<34} {cells}  n={len(t)}{late}")
    return p50, p95


def bench(tmux: Tmux, root: Path, args: argparse.Namespace, seconds: float, hold: float) -> int:
    idle_run = root / "idle" / "bench-idle"
    live_run = root / "live" / "bench-live"
    idle_run.parent.mkdir()
    live_run.parent.mkdir()
    print(f"  writing the idle run ({args.idle_seconds:g} s at the target rates) ...")
    idle_progress = root / "idle-progress.json"
    subprocess.run(
        writer_argv(idle_run, idle_progress, args.idle_seconds, args), check=True, timeout=600
    )
    done = read_progress(idle_progress)
    print(
        f"  idle run: {done['lines']:,} lines, {done['records']:,} records, "
        f"{done['bytes'] / 1e6:.0f} MB"
    )
    idle, idle_start = attach(tmux, "idle", idle_run)
    time.sleep(3.0)  # the idle run's history is read and drawn
    quiet = Subject(tmux, "idle", idle.pid)
    for _ in range(args.quiet_presses):
        quiet.press()
        time.sleep(random.uniform(args.pause_s / 2, args.pause_s * 1.5))
    idle.turn = quiet.turn
    progress = root / "live-progress.json"
    # The writer outlives the measurement; it is stopped after the last sample.
    writer = subprocess.Popen(writer_argv(live_run, progress, seconds + 600, args))
    try:
        read_progress(progress)
        time.sleep(1.0)
        live, live_start = attach(tmux, "live", live_run)
        print(
            f"  attach until rank 0's log shows: idle run {idle_start:.2f} s, live run "
            f"{live_start:.2f} s (the writer then {read_progress(progress)['elapsed']:.1f} s in)"
        )
        print(
            f"  every {args.sample_s:g} s: RSS and CPU of both apps, the writer, the tmux server "
            "and this script (with its tmux clients), the box's load and what else used it (100% = "
            "one core); the "
            "writer's rates; lag (s) behind the newest line on the live screen and behind the "
            "last line of each visible rank row; summary-bar step behind the writer's; presses "
            f"timed so far (none in the last {hold:.0f} s: the log view then follows one rank "
            "undisturbed and fills its buffer)"
        )
        print_header()
        sampler = Sampler(tmux, live, idle, writer, progress)
        print_row(sampler.sample())
        subjects = [live, idle]
        end = time.perf_counter() + seconds
        stop_pressing = end - hold
        next_sample = time.perf_counter() + args.sample_s
        rep = 0
        while time.perf_counter() < end:
            if time.perf_counter() >= next_sample:
                print_row(sampler.sample())
                next_sample += args.sample_s
            elif time.perf_counter() < stop_pressing:
                for subject in subjects if rep % 2 == 0 else subjects[::-1]:
                    subject.press()
                    time.sleep(random.uniform(args.pause_s / 2, args.pause_s * 1.5))
                rep += 1
            else:
                time.sleep(max(0.0, min(next_sample, end) - time.perf_counter()))
        print_row(sampler.sample())
        final = read_progress(progress)
        report(args, sampler, live, idle, quiet, final)
        poll = statistics.median(tmux.poll_s) * 1000
        print(
            f"  resolution: one capture-pane takes {poll:.1f} ms, one every "
            f"{POLL_S * 1000:.0f} ms while a press is timed"
        )
        for subject in (live, idle):
            tmux.close(subject.name, timeout=20, pause=0)
    finally:
        writer.send_signal(signal.SIGTERM)
        try:
            writer.wait(10)
        except subprocess.TimeoutExpired:
            writer.kill()
            writer.wait()
    return 0


def report(
    args: argparse.Namespace,
    sampler: Sampler,
    live: Subject,
    idle: Subject,
    quiet: Subject,
    final: dict,
) -> None:
    rows = sampler.rows
    first, last = rows[0], rows[-1]
    target_lines = args.ranks * args.lines_per_s
    target_records = args.ranks * args.records_per_s
    # Rates over the whole writer run (its own counts); the per-interval rates are in the table.
    lines_s = final["lines"] / final["elapsed"]
    records_s = final["records"] / final["elapsed"]
    verdict = {True: "meets", False: "MISSES"}
    print("summary (targets from the issue):")
    print(
        f"  writer achieved {lines_s:,.0f} lines/s ({lines_s / target_lines:.1%} of "
        f"{target_lines:,}) and {records_s:,.0f} records/s ({records_s / target_records:.1%} of "
        f"{target_records:,}) over {final['elapsed']:.0f} s, "
        f"{final['bytes'] / final['elapsed'] / 1e6:.1f} MB/s, using "
        f"{final['cpu_s'] / final['elapsed']:.0%} of a core"
    )
    print("  key press to repaint (j/k in the rank list until the log status line names the rank):")
    lp50, lp95 = press_stats("live run (subject)", live)
    ip50, ip95 = press_stats("idle run, same time (baseline)", idle)
    press_stats("idle run, before the writer started", quiet)
    print(
        f"    ratio live / idle: p50 x{lp50 / ip50:.2f}, p95 x{lp95 / ip95:.2f}; "
        f"target p95 <= {TARGET_P95_S * 1000:.0f} ms: {verdict[lp95 <= TARGET_P95_S]}"
    )
    span = last["t"] - first["t"]
    max_rss = max(r["live_rss"] for r in rows)
    print(
        f"  RSS of the live app after {span:.0f} s: {last['live_rss']:.0f} MB (max "
        f"{max_rss:.0f} MB; the idle app {last['idle_rss']:.0f} MB); target <= "
        f"{TARGET_RSS_MB:.0f} MB after 600 s: {verdict[max_rss <= TARGET_RSS_MB]}"
        + ("" if span >= 590 else " so far (--minutes 10 for the full figure)")
    )
    newest = [r["newest"] for r in rows if r["newest"] is not None]
    late = [r["newest"] for r in rows[len(rows) // 2 :] if r["newest"] is not None]
    oldest_row = [max(r["rows"]) for r in rows if r["rows"]]
    steps = [r["step_lag"] for r in rows if r["step_lag"] is not None]
    cpu = [r["live_cpu"] for r in rows if r["live_cpu"] is not None]
    box = [r["box"] for r in rows if r["box"] is not None]

    def med(values: list[float]) -> float:
        return statistics.median(values) if values else float("nan")

    print(
        f"  keeps up: the newest line on screen is {med(newest):.2f} s old (median; second half "
        f"{med(late):.2f} s, max {max(newest, default=float('nan')):.2f} s); the stalest visible "
        f"rank row {med(oldest_row):.2f} s (median); the summary bar's step trails the writer's "
        f"by {med(steps):.0f} steps ({med(steps) / args.records_per_s:.1f} s, median)"
    )
    other = [r["other"] for r in rows if r["other"] is not None]
    print(
        f"  load: the live app used {med(cpu):.0%} of a core (median), the box {med(box):.0%} "
        f"of {os.cpu_count()} cores, other processes {med(other):.0%}"
        + (" (the box was shared: figures are pessimistic)" if med(other) > 0.2 else "")
    )


# --- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=120, help="measured time (default 120)")
    parser.add_argument("--minutes", type=float, help="measured time in minutes (overrides)")
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--lines-per-s", type=int, default=1000, help="per rank")
    parser.add_argument("--records-per-s", type=int, default=10, help="per rank")
    parser.add_argument("--flush-ms", type=float, default=50, help="writer's flush interval")
    parser.add_argument("--size", default="120x40", help="tmux pane size, e.g. 200x60")
    parser.add_argument("--sample-s", type=float, default=10, help="RSS/lag sample interval")
    parser.add_argument("--idle-seconds", type=float, default=5, help="history of the idle run")
    parser.add_argument("--pause-s", type=float, default=0.5, help="mean pause between presses")
    parser.add_argument(
        "--hold-s",
        type=float,
        help="no presses in the last HOLD_S seconds, so one rank's log view fills "
        "(default: a quarter of the run, at most 120 s)",
    )
    parser.add_argument(
        "--quiet-presses", type=int, default=20, help="presses on the idle app before the writer"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--writer", help=argparse.SUPPRESS)  # run only the writer into this dir
    parser.add_argument("--progress", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.writer:
        return writer(args)

    seconds = args.minutes * 60 if args.minutes is not None else args.seconds
    hold = args.hold_s if args.hold_s is not None else min(120.0, seconds / 4)
    width, _, height = args.size.partition("x")
    rerun = ["python", "bench/monitor_bench.py"]
    rerun += ["--minutes", f"{args.minutes:g}"] if args.minutes else ["--seconds", f"{seconds:g}"]
    for flag, value, default in (
        ("--ranks", args.ranks, 256),
        ("--lines-per-s", args.lines_per_s, 1000),
        ("--records-per-s", args.records_per_s, 10),
        ("--flush-ms", args.flush_ms, 50),
        ("--size", args.size, "120x40"),
        ("--sample-s", args.sample_s, 10),
        ("--idle-seconds", args.idle_seconds, 5),
        ("--pause-s", args.pause_s, 0.5),
        ("--hold-s", args.hold_s, None),
        ("--quiet-presses", args.quiet_presses, 20),
    ):
        if value != default:
            rerun += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    print("rerun: " + shlex.join(rerun))
    header = versions()
    if header is None:
        return 2
    print(
        f"{header}, panes {width}x{height}; {args.ranks} ranks x "
        f"{args.lines_per_s} lines/s + {args.records_per_s} records/s, flushed every "
        f"{args.flush_ms:g} ms, for {seconds:.0f} s"
    )
    busy0, total0 = box_busy()
    time.sleep(1.0)
    busy1, total1 = box_busy()
    load = (busy1 - busy0) / max(1, total1 - total0) * (os.cpu_count() or 1)
    print(f"box load before starting: {load:.0%} (100% = one core)")
    root = Path(tempfile.mkdtemp(prefix="ezpz-monitor-bench-"))
    tmux = Tmux(root, clean_env(root), int(width), int(height), prefix="ezpz-monitor")
    try:
        return bench(tmux, root, args, seconds, hold)
    finally:
        tmux.kill_server()
        if args.keep:
            print(f"scratch kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
        print("rerun: " + shlex.join(rerun))


if __name__ == "__main__":
    sys.exit(main())
