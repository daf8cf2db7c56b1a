"""Key press to repaint while ``ezpz-tui attach`` reads a 4,096-rank run for the first time.

``python bench/keys_while_reading.py [--ranks 4096] [--baseline-ranks 64] [--reps 2]
[--window-s 8] [--from RUN] [--before CHECKOUT] [--live] [--keep]``

Issue 34: the first read runs off the UI's interpreter lock, so a key pressed during it repaints
within 100 ms p95. A finished real 300-step 2-rank demo (or ``--from`` a run) is grown by
``grow_run.py`` to ``--ranks`` on nodes of 12, without ``digest.json`` (every rank's files are
read), and to ``--baseline-ranks``. Each is attached in a fresh tmux session (120x40, a private
server, read with ``capture-pane``); from the first frame that names the shown rank ("rank 0 ·"),
``j`` and ``k`` are pressed in turn (the rank list moves between ranks 0 and 1), each timed from
``send-keys`` until the log's status line names the new rank, 50 ms after the previous one
repainted, for ``--window-s`` seconds. The repaint is timed by tmux's own word: a control-mode
client (``_tmux.PaneOutput``) hears of each write to the pane when it is made, and the screen is
read after each (polling ``capture-pane`` every 10 ms added up to 15 ms a press and forked a
tmux client each time, on the app's 2 cores); the same presses are timed inside the app too,
from the key's arrival to the frame that shows the new rank (``_key_probe.py``), so the app's
own share is printed beside what a person sees. On the big run that is its first read, on the
baseline an idle app (its read of 64 ranks is over before the first press). With ``--before
CHECKOUT`` the big run is also attached with another checkout's code (e.g. a worktree of the
commit before), interleaved, for before and after in one run. With ``--live`` a copy of the big
run is made live too (``live_run.py``: its state and every status say running, nothing ended, a
node digest for each node kept fresh) while a writer
process appends a line to a tenth of its ranks' logs every 100 ms, and is attached the same way.
Prints p50/p95 of each and their ratios to the baseline's.

Then, less exposed to a loaded machine's noise (tmux, the terminal): the app headless
(``run_test``, a fresh process per subject, the same code choices) attached to each run, with the
event loop's lag sampled every 10 ms over the window from the app's start: each sample's
overshoot (what a key pressed then waits before the app reads it), p50/p95/max, and the stalls
over 100 ms.
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

import live_run
from _common import PY, REPO, print_rerun, scratch, with_repo_path
from _tmux import PaneOutput, Tmux, clean_env, ms, percentile, versions
from attach_bench import demo, grown

PAUSE_S = 0.05  # between a repaint and the next press
PROBE = Path(__file__).with_name("_key_probe.py")
STATUS_LINE = re.compile(r"rank (\d+) · ")


WRITER = """
import sys, time
from pathlib import Path
from runtime.rundir import RunDir
run, n = RunDir(Path(sys.argv[1]), fresh=True), int(sys.argv[2])
files = [open(run.log(r), "a") for r in range(0, n, 10)]  # in their blocks of ranks
while True:
    stamp = time.strftime("%H:%M:%S")
    for f in files:
        f.write(f"{stamp} [INFO] ezpz.train: live line\\n")
        f.flush()
    time.sleep(0.1)
"""


def made_live(run: Path) -> tuple[Path, list[Path]]:
    """A copy of the finished ``run`` made live (``live_run.py``: its state and statuses say
    it runs, a node digest for each of its nodes); its node digests, to keep fresh."""
    live = run.parent / f"{run.name}-live"
    shutil.copytree(run, live, ignore=shutil.ignore_patterns("*.fifo"))
    return live, live_run.made_live(live)


def shown_rank(screen: str) -> int | None:
    match = STATUS_LINE.search(screen)
    return int(match.group(1)) if match else None


def presses(
    term: Tmux, run: Path, name: str, args: argparse.Namespace, code: str | None
) -> tuple[list[float], list[float]]:
    """Attach to ``run`` (with ``code`` first on PYTHONPATH, when given) and time presses for
    ``--window-s`` from its first frame (the baseline waits ``--settle-s`` first): from
    outside, each from ``send-keys`` until tmux has the write after which the pane shows the
    new rank; inside, from the key's arrival at the app to that frame (``_key_probe.py``)."""
    env = {"EZPZ_OUTPUTS": str(run.parent)}
    if code is not None:
        env["PYTHONPATH"] = code
    inside = term.cwd / f"{name}.probe"
    term.new(name, [PY, str(PROBE), str(inside), "attach", str(run)], env)
    term.wait(name, lambda s: shown_rank(s) == 0, "the first frame", timeout=120, interval=0.02)
    if code is None and "baseline" in name:
        time.sleep(args.settle_s)
    pane = PaneOutput(term, name)
    times: list[float] = []
    began, turn = time.monotonic(), 0
    try:
        while time.monotonic() - began < args.window_s:
            key, want = ("j", 1) if turn == 0 else ("k", 0)
            start = time.perf_counter()
            term.key(name, key)
            try:
                shown = pane.wait(lambda s, w=want: shown_rank(s) == w, start, 30)
                times.append(shown - start)
            except RuntimeError:
                times.append(30.0)
            turn = 1 - turn
            time.sleep(PAUSE_S)
    finally:
        pane.close()
    term.close(name)
    return times, [float(ms) / 1000 for ms in inside.read_text().split()]


def loop_lag(run: Path, seconds: float) -> None:
    """(In a child) attach headless to ``run`` and print the event loop's lags as JSON."""
    from ezpz_tui.ui.app import EzpzApp
    from tests.pilots import LOCAL, started

    async def attach() -> list[float]:
        app = EzpzApp(outputs=run.parent, alloc=LOCAL, checks=[], attach=run)
        lags = []
        async with app.run_test(size=(120, 40)) as pilot:
            await started(pilot)
            began = last = time.monotonic()
            while last - began < seconds:
                await asyncio.sleep(0.01)
                now = time.monotonic()
                lags.append(now - last - 0.01)
                last = now
        return lags

    print(json.dumps(asyncio.run(attach())))


def lags_of(run: Path, seconds: float, code: str | None) -> list[float]:
    env = {**os.environ, "PYTHONPATH": code or str(REPO)}  # that checkout alone
    argv = [PY, __file__, "--lag-child", str(run), "--window-s", str(seconds)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"the headless attach failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def lag_line(label: str, lags: list[float]) -> str:
    stalls = sum(1 for lag in lags if lag > 0.1)
    p50, p95 = statistics.median(lags), percentile(lags, 0.95)
    return (
        f"  {label:<28} p50 {ms(p50)}  p95 {ms(p95)}  max {ms(max(lags))}  "
        f"stalls > 100 ms: {stalls}"
    )


def line(label: str, times: list[float], base: list[float] | None) -> str:
    p50, p95 = statistics.median(times), percentile(times, 0.95)
    out = f"  {label:<28} n={len(times):3d}  p50 {ms(p50)}  p95 {ms(p95)}"
    if base:
        b50, b95 = statistics.median(base), percentile(base, 0.95)
        out += f"   x{p50 / b50:.2f} / x{p95 / b95:.2f} of the baseline"
    return out + ("   (target p95 <= 100 ms)" if base else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4096)
    parser.add_argument("--baseline-ranks", type=int, default=64)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--window-s", type=float, default=8.0, help="presses from the first frame")
    parser.add_argument("--settle-s", type=float, default=3.0, help="the baseline's wait first")
    parser.add_argument("--source", "--from", help="a finished run to grow (default: a new demo)")
    parser.add_argument("--before", help="another checkout whose code reads the big run too")
    parser.add_argument("--live", action="store_true", help="a live copy of the big run too")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument("--lag-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.lag_child:
        loop_lag(Path(args.lag_child), args.window_s)
        return 0
    header = versions()
    if header is None:
        return 1
    print_rerun("keys_while_reading.py", args)
    print(header, flush=True)
    labels = ("baseline", "this", "before", "live", "live-before")
    found: dict[str, list[float]] = {label: [] for label in labels}
    inside: dict[str, list[float]] = {label: [] for label in labels}
    lags: dict[str, list[float]] = {label: [] for label in labels}
    writer = heartbeat = None
    with scratch("keys-reading-", args.keep) as root:
        term = Tmux(root, clean_env(root))
        try:
            source = Path(args.source) if args.source else demo(root / "demo")
            base_run = grown(source, root, args.baseline_ranks, digest=False)
            run = grown(source, root, args.ranks, digest=False)
            before = str(Path(args.before).resolve()) if args.before else None
            live, digests = made_live(run) if args.live else (None, [])
            if live is not None:
                argv = [PY, "-c", WRITER, str(live), str(args.ranks)]
                writer = subprocess.Popen(argv, env=with_repo_path(dict(os.environ)))
                heartbeat = subprocess.Popen(live_run.heartbeat_argv(PY, digests))
            for rep in range(args.reps):
                subjects = [("baseline", base_run, None), ("this", run, None)]
                if before:
                    subjects.append(("before", run, before))
                if live is not None:
                    subjects.append(("live", live, None))
                    if before:
                        subjects.append(("live-before", live, before))
                for label, which, code in subjects if rep % 2 == 0 else subjects[::-1]:
                    times, app = presses(term, which, f"{label}-{rep}", args, code)
                    found[label].extend(times)
                    inside[label].extend(app)
                    p95, in_app = ms(percentile(times, 0.95)), ms(percentile(app or [0], 0.95))
                    said = f"  rep {rep} {label}: {len(times)} presses, p95 {p95}"
                    print(f"{said} (in the app {in_app})", flush=True)
                for label, which, code in subjects if rep % 2 == 0 else subjects[::-1]:
                    lags[label].extend(lags_of(which, args.window_s, code))
        finally:
            for process in (writer, heartbeat):
                if process is not None:
                    process.kill()
                    process.wait()
            term.kill_server()
    window = f"{args.window_s:.0f} s from the first frame"
    print(f"\nkey press to repaint (j/k in the rank list), {window}:")
    print(line(f"idle {args.baseline_ranks:,} ranks (baseline)", found["baseline"], None))
    print(line(f"{args.ranks:,} ranks, first read", found["this"], found["baseline"]))
    if found["live"]:
        print(line(f"{args.ranks:,} ranks live, first read", found["live"], found["baseline"]))
    if found["live-before"]:
        label = f"{args.ranks:,} live, before ({Path(args.before).name})"
        print(line(label, found["live-before"], found["baseline"]))
    if found["before"]:
        print(
            line(
                f"{args.ranks:,}, before ({Path(args.before).name})",
                found["before"],
                found["baseline"],
            )
        )
    print(f"\nthe same presses timed inside the app (the key's arrival to its frame), {window}:")
    for label in labels:
        if inside[label]:
            print(line(label, inside[label], None))
    print(f"\nthe event loop's lag, headless, {window} of the app's:")
    for label in labels:
        if lags[label]:
            print(lag_line(label, lags[label]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
