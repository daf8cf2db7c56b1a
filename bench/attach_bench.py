"""Opening a finished run of 4,096 to 131,072 ranks, timed from outside as a person sees it.

``python bench/attach_bench.py [--ranks 4096,16384] [--baseline-ranks 64] [--reps 3]
[--idle-s 5] [--idle-cap-s 60] [--from RUN] [--grown DIR ...] [--keep] [--without-digest] [--live]
[--before CHECKOUT]``

The run is a real 300-step 2-rank demo (``ezpz-tui launch --quiet --ppn 2 -- python -m
runtime.examples.train --steps 300``, or ``--from`` a finished run) grown by ``grow_run.py`` to
each size on nodes of 12 ranks (Aurora's): every file it wrote, for every rank, with ranks, hosts
and sizes rewritten, and its ``digest.json`` the grown run's (built by the finalizer's builder
when the grown copy is not of its size), as a finished run of that size has it; with
``--without-digest`` none, as a run finalized before digests (its files are read). For each
size, alternating with the same run grown to ``--baseline-ranks``
(64) so that both meet the same load:

- ``ezpz-tui attach RUN`` in a fresh tmux session (120x40, a private server, read with
  ``capture-pane``): the seconds until the screen shows the summary bar at the run's last step
  and rank 0's row with its end state (rows on screen); then back to idle: the first time
  after the rows from which the app's process tree (read from /proc every 0.25 s, with the
  children it reaped) used no more than 2% of a core in every 3-s window, and kept to that
  for 5 s more (``--idle-cap-s`` at most: "not within the cap" otherwise); its RSS (the
  tree's), and over ``--idle-s`` more its CPU and its metadata calls a second (stat family,
  open, getdents; ``strace -c -f`` attached, where strace exists);
- ``ezpz-tui why RUN --json``, ``top RUN --json`` and ``runs --json`` (the run's outputs): the
  wall seconds of each command.

With ``--live`` every grown run (the baseline too) is made live (``live_run.py``: its state and
statuses say running, no ``digest.json``, a node digest for each of its nodes kept fresh by a
heartbeat process, the narrowest fake of a live run of that size), and its rows are on screen when
the summary bar is at the last step and rank 0's row says ``running``. With ``--before`` the same
attach and commands run a second time each rep with ``CHECKOUT`` first on ``PYTHONPATH`` (an
older tree: ``git worktree add --detach /tmp/before COMMIT``), interleaved, in rows of their own.

Each figure is the median of ``--reps``, printed beside the baseline's median and their ratio,
and beside issue 34's targets for the size; then back to idle at every size side by side.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import PY, REPO, print_rerun, scratch, versus, with_repo_path
from _tmux import Tmux, clean_env, versions
from grow_run import grow
from live_run import heartbeat_argv, made_live

from ezpz_tui.core.runs.digest import read_digest, write_digest
from ezpz_tui.core.watching.digesting import build_digest
from runtime.rundir import RunDir

STEPS = 300
PER_NODE = 12
TICK = os.sysconf("SC_CLK_TCK")
METADATA = re.compile(
    r"^(stat|lstat|fstat|newfstatat|statx|access|faccessat2?|open|openat|getdents64|readlink)$"
)
# Back to idle: from then on every IDLE_WINDOW_S window of the tree's CPU, sampled every
# SAMPLE_S, is at most IDLE_PCT of a core, for IDLE_HOLD_S at least (a window longer than the
# app's 1-s tick and 2-s look at the outputs, so that one wake-up is not taken for work).
IDLE_PCT, IDLE_WINDOW_S, IDLE_HOLD_S, SAMPLE_S = 2.0, 3.0, 5.0, 0.25
# issue 34: rows s, back to idle within s, RSS MB, why/top/runs s
TARGETS = {4096: (1.5, 5, 300, 2), 16384: (3, 10, 500, 4), 131072: (10, 30, 1500, 15)}
CLI = Path(PY).parent / "ezpz-tui"


def target(size: int) -> tuple[float, float, float, float]:
    """The targets of the issue's nearest size at or above ``size`` (the largest beyond)."""
    return next((TARGETS[s] for s in sorted(TARGETS) if size <= s), TARGETS[max(TARGETS)])


# --- a process tree from outside ----------------------------------------------------------------


def tree(root: int) -> list[int]:
    """``root`` and every process below it."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rpartition(")")[2].split()[1])
    found, frontier = [root], [root]
    while frontier:
        below = [pid for pid, parent in parents.items() if parent in frontier]
        found += below
        frontier = below
    return found


def cpu_s(pids: list[int]) -> float:
    """The CPU seconds of ``pids`` and of the children they reaped: a child that ran and
    ended between two samples (a probe, the digest's reader) is counted, not lost."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += sum(map(int, fields[11:15]))  # utime, stime, cutime, cstime
    return total / TICK


def back_to_idle(samples: list[tuple[float, float]]) -> float | None:
    """The first sample time from which every window of ``IDLE_WINDOW_S`` (started at a
    sample, ended within the samples) used at most ``IDLE_PCT`` of a core; None when the last
    such window did not. ``samples``: (monotonic s, the tree's CPU s)."""
    found = None
    for start in range(len(samples) - 1, -1, -1):
        t0, c0 = samples[start]
        end = next((s for s in samples[start + 1 :] if s[0] >= t0 + IDLE_WINDOW_S), None)
        if end is None:
            continue  # no whole window from here yet
        if 100 * (end[1] - c0) / (end[0] - t0) > IDLE_PCT:
            break
        found = t0
    return found


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/status").read_text().splitlines()
        except OSError:
            continue
        total += sum(int(line.split()[1]) for line in lines if line.startswith("VmRSS:"))
    return total / 1024


def metadata_per_s(pid: int, seconds: float, out: Path) -> float | None:
    """Metadata calls a second of ``pid`` and its threads; None where strace is missing."""
    if shutil.which("strace") is None:
        return None
    argv = ["strace", "-c", "-f", "-qq", "-p", str(pid), "-o", str(out)]
    tracer = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
    time.sleep(0.5)  # attached to every thread
    began = time.monotonic()
    time.sleep(seconds)
    tracer.send_signal(signal.SIGINT)
    tracer.wait(30)
    calls = 0
    for line in out.read_text().splitlines():
        words = line.split()
        if len(words) >= 5 and METADATA.match(words[-1]) and words[3].isdigit():
            calls += int(words[3])
    return calls / (time.monotonic() - began)


# --- one attach ---------------------------------------------------------------------------------


def rows_shown(screen: str) -> bool:
    """The summary bar at the last step and rank 0's row with its end state (or running)."""
    first = screen.splitlines()[0] if screen else ""
    return f"step {STEPS - 1}" in first and bool(
        re.search(r"(?m)^ +0 (exited|killed|failed|stopped|succeeded|running)", screen)
    )


def attach(
    term: Tmux, run: Path, args: argparse.Namespace, name: str, code: str | None = None
) -> dict[str, float]:
    """One attach of ``run``, timed; ``code`` first on ``PYTHONPATH`` when given."""
    began = time.monotonic()
    env = {"EZPZ_OUTPUTS": str(run.parent)}
    if code is not None:
        env["PYTHONPATH"] = code
    term.new(name, [str(CLI), "attach", str(run)], env)
    term.wait(name, rows_shown, "the rank rows", timeout=600, interval=0.02)
    shown = time.monotonic()
    out = {"rows_s": shown - began}
    app = term.pane_pid(name)
    samples = [(shown, cpu_s(tree(app)))]
    idle_at = None
    while time.monotonic() - shown < args.idle_cap_s:
        time.sleep(SAMPLE_S)
        samples.append((time.monotonic(), cpu_s(tree(app))))
        idle_at = back_to_idle(samples)
        if idle_at is not None and samples[-1][0] - idle_at >= IDLE_HOLD_S + IDLE_WINDOW_S:
            break  # and stayed idle since, for IDLE_HOLD_S more
    else:
        idle_at = None  # not idle for long enough within the cap
    out["idle_within_s"] = math.inf if idle_at is None else idle_at - shown
    pids = tree(app)
    cpu0, wall0 = cpu_s(pids), time.monotonic()
    calls = metadata_per_s(app, args.idle_s, run.parent / f"strace-{name}.txt")
    out["idle_cpu_pct"] = 100 * (cpu_s(tree(app)) - cpu0) / (time.monotonic() - wall0)
    out["rss_mb"] = rss_mb(tree(app))
    if calls is not None:
        out["metadata_per_s"] = calls
    term.close(name)
    return out


def command(argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one CLI command."""
    began = time.monotonic()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr.decode()[-2000:]}")
    return time.monotonic() - began


def commands(run: Path, env: dict[str, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for verb, argv in (
        ("why", ["why", str(run), "--json"]),
        ("top", ["top", str(run), "--json"]),
        ("runs", ["runs", "--outputs", str(run.parent), "--json"]),
    ):
        out[f"{verb}_s"] = command([str(CLI), *argv], env)
    return out


# --- the runs -----------------------------------------------------------------------------------


def demo(outputs: Path) -> Path:
    """A real finished 2-rank demo run of ``STEPS`` steps, launched as a person would."""
    train = [PY, "-m", "runtime.examples.train", "--steps", str(STEPS)]
    argv = [str(CLI), "launch", "--quiet", "--ppn", "2", "--outputs", str(outputs), "--", *train]
    env = with_repo_path({k: v for k, v in os.environ.items() if not k.startswith("PMI")})
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"the demo run failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    (run,) = [p for p in outputs.iterdir() if (p / "run.toml").is_file()]
    deadline = time.monotonic() + 120
    while not (run / "summary.json").is_file() and time.monotonic() < deadline:
        time.sleep(0.2)  # the finalizer writes the summary a moment after the launch returns
    return run


def given(paths: list[str]) -> dict[int, Path]:
    """The grown runs given, by their ranks (their ``run.toml``'s world size)."""
    import tomllib

    out = {}
    for text in paths:
        path = Path(text).resolve()
        try:
            plan = tomllib.loads((path / "run.toml").read_text())
            out[int(plan["sizes"]["world_size"])] = path
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise SystemExit(f"--grown {text}: not a grown run directory ({e})") from None
        if read_digest(path) is None:
            raise SystemExit(f"--grown {text}: no readable digest.json (grow it with its digest)")
    return out


def grown(source: Path, root: Path, ranks: int, digest: bool, live: bool = False) -> Path:
    """``source`` grown to ``ranks``; with ``digest`` its ``digest.json`` is the grown run's
    (built by the finalizer's builder where the grown one is not of this size), else it has
    none: a run finalized before digests, read from its files."""
    run = root / f"x{ranks}" / f"{source.name}-x{ranks}"
    run.parent.mkdir(parents=True)
    done = grow(source, run, ranks, PER_NODE)
    said = f"{ranks:,} ranks: grown in {done.seconds:.1f} s ({done.files:,} files, "
    said += f"{done.bytes / 1e9:.2f} GB)"
    if live:  # its digest is the finalizer's: a live run has none
        made_live(run)
        print(said + ", made live", flush=True)
        return run
    found = read_digest(run)
    if not digest:
        RunDir(run).digest_json.unlink(missing_ok=True)
    elif found is None or found.world != ranks:
        began = time.monotonic()
        write_digest(run, build_digest(run))
        said += f", its digest built in {time.monotonic() - began:.1f} s"
    print(said, flush=True)
    return run


def cell(key: str, found: list[dict], base: list[dict], form: str, goal: float | None) -> str:
    if key not in found[0] or key not in base[0]:
        return "n/a"
    value = statistics.median(f[key] for f in found)
    low = statistics.median(f[key] for f in base)
    if math.isinf(value) or math.isinf(low):  # back to idle: not within the cap
        said = f"{idle_words(value)} vs {idle_words(low)}"
    else:
        said = versus(value, low, form)
    return said if goal is None else f"{said} (≤ {goal:g})"


def idle_words(seconds: float) -> str:
    return "not within the cap" if math.isinf(seconds) else f"{seconds:.1f} s"


def idle_line(sizes: list[tuple[int, list[dict]]], base_ranks: int, base: list[dict]) -> str:
    """Back to idle at each size side by side, the baseline's first."""
    cells = [(base_ranks, base), *sizes]
    words = [
        f"{ranks:,} ranks {idle_words(statistics.median(f['idle_within_s'] for f in found))}"
        for ranks, found in cells
    ]
    return "back to idle within (medians): " + " | ".join(words)


def row(size: int, found: list[dict], base: list[dict]) -> str:
    rows, idle, mb, cli = target(size)
    cells = [
        f"{size:,}",
        cell("rows_s", found, base, "{:.2f} s", rows),
        cell("idle_within_s", found, base, "{:.1f} s", idle),
        cell("rss_mb", found, base, "{:.0f} MB", mb),
        cell("why_s", found, base, "{:.2f} s", cli),
        cell("top_s", found, base, "{:.2f} s", cli),
        cell("runs_s", found, base, "{:.2f} s", cli),
        cell("idle_cpu_pct", found, base, "{:.1f}%", IDLE_PCT),
        cell("metadata_per_s", found, base, "{:.0f}/s", 20),
    ]
    return "| " + " | ".join(cells) + " |"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--ranks", default="4096,16384", help="comma-separated sizes")
    parser.add_argument("--baseline-ranks", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3, help="attaches and commands per size")
    parser.add_argument("--idle-s", type=float, default=5.0, help="the idle window measured")
    parser.add_argument("--idle-cap-s", type=float, default=60.0, help="longest wait for idle")
    parser.add_argument("--source", "--from", help="a finished run to grow (default: a new demo)")
    parser.add_argument(
        "--grown",
        action="append",
        default=[],
        metavar="DIR",
        help="a grown run (alone in its outputs directory) measured for its size, kept",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument(
        "--without-digest",
        action="store_true",
        help="grown runs without digest.json (a run finalized before digests: its files read)",
    )
    parser.add_argument("--live", action="store_true", help="grown runs made live (see above)")
    parser.add_argument("--before", help="a checkout measured beside this one (PYTHONPATH)")
    args = parser.parse_args()
    ready = given(args.grown)
    header = versions()
    if header is None:
        return 1
    print_rerun("attach_bench.py", args)
    print(header, flush=True)
    table: list[str] = []
    beats: list[subprocess.Popen[bytes]] = []
    measured: list[tuple[int, list[dict]]] = []
    bases: list[dict] = []
    with scratch("attach-bench-", args.keep) as root:
        env = clean_env(root)
        term = Tmux(root, env)
        before_env = {**env, "PYTHONPATH": args.before} if args.before else None
        try:
            source = Path(args.source) if args.source else demo(root / "demo")
            digest, live = not args.without_digest, args.live
            base_run = grown(source, root, args.baseline_ranks, digest, live)
            if live:
                beats.append(subprocess.Popen(heartbeat_argv(PY, RunDir(base_run).node_digests())))
            attach(term, base_run, args, "warm")  # unmeasured: cold caches
            for size in (int(s) for s in args.ranks.split(",")):
                run = ready.get(size) or grown(source, root, size, digest, live)
                if live:
                    beats.append(subprocess.Popen(heartbeat_argv(PY, RunDir(run).node_digests())))
                found: list[dict] = []
                base: list[dict] = []
                older: list[dict] = []
                subjects = [(base, base_run, 0, None), (found, run, size, None)]
                if args.before:
                    subjects.append((older, run, size, args.before))
                for rep in range(args.reps):
                    for figures, which, ranks, code in subjects:
                        tag = "before" if code else "this"
                        one = attach(term, which, args, f"a{size}-{rep}-{ranks}-{tag}", code)
                        one.update(commands(which, before_env if code else env))
                        figures.append(one)
                        label = f"{ranks or args.baseline_ranks:,}" + (" before" if code else "")
                        print(f"  {label}: " + ", ".join(f"{k} {v:.2f}" for k, v in one.items()))
                table.append(row(size, found, base))
                if older:
                    said = row(size, older, base)
                    table.append(said.replace(f"| {size:,} |", f"| {size:,} before |", 1))
                if live:
                    beats.pop().terminate()
                measured.append((size, found))
                bases += base
                if size not in ready:
                    shutil.rmtree(run.parent, ignore_errors=True)
        finally:
            for beat in beats:
                beat.terminate()
            term.kill_server()
    print(
        f"\n{'live (made live, node digests)' if args.live else 'finished'} {STEPS}-step demo "
        f"grown to each size ({PER_NODE} ranks a node), "
        f"{'without' if args.without_digest else 'with'} its digest, medians of "
        f"{args.reps}, each beside the same run grown to {args.baseline_ranks:,} ranks "
        "(size vs baseline, ratio) and issue 34's target"
    )
    print(
        "| ranks | rows on screen | back to idle within | RSS | why --json | top --json "
        "| runs --json | idle CPU | idle metadata calls |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    print("\n".join(table))
    if bases:
        print("\n" + idle_line(measured, args.baseline_ranks, bases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
