"""How long comparing a sweep's runs takes, in-process and as ``ezpz-tui compare --json``.

The runs: ``--runs`` run directories (20) of ``--steps`` steps (1,000) on ``--ranks`` ranks (2)
each, written as a sweep writes them (the record, the state, one metrics JSONL file
per rank with ``loss``, ``lr``, ``grad_norm``, ``dt``, ``tokens_per_s`` and ``samples_per_s``
per step, and a sweep record naming them all).

- core: :func:`ezpz_tui.core.comparing.compare.compare` over the run directories, against the
  floor of reading the same metric files whole (``read_bytes``, nothing parsed). Target: well
  under 200 ms.
- cli: ``ezpz-tui compare --json`` with no RUN (the newest run's sweep: all the runs) as a
  subprocess, against ``ezpz-tui runs --json`` on the same outputs (the CLI's start-up and run
  listing) and ``python -c pass`` (the interpreter's start-up). Target: at most 1 s.
- tab: the TUI (headless, 120x40) opens the newest run (its sweep's runs are its relatives),
  a person looks at its Run tab for a second, then presses the key for the Compare tab: from the
  key (t twice: Run, Metrics, Compare) until the table shows every run and the app has nothing
  left to do (painted), against the
  same keys to the Launch tab (T: a tab switch that reads nothing), alternating. Also printed:
  the Compare tab asked for at once after the run opened (its read not done yet). Target: at
  most 200 ms.

Subject and baselines alternate and medians are quoted, with ratios (the machines are shared and
noisy). Files are written first, so the page cache is warm. :func:`make_runs` and
:func:`time_calls` are for other benches (the TUI's Compare tab) to reuse.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import tomli_w
from _common import PY, bench_parser, print_rerun, run_in_repo, scratch

from ezpz_tui.core.comparing.compare import compare
from ezpz_tui.core.comparing.sweep_record import SweepRecord, new_sweep, write_sweep
from runtime import records
from runtime.metric_files import metric_files
from runtime.rundir import RunDir, RunState, State, write_state

CORE_TARGET_MS = 200.0
CLI_TARGET_MS = 1000.0
TAB_TARGET_MS = 200.0
T0 = 1_763_800_000.0
LAYOUTS = [(tp, pp, cp) for tp in (1, 2) for pp in (1, 2) for cp in (1, 2)]


def _write_metrics(run: RunDir, rank: int, steps: int, speed: float, rng: random.Random) -> None:
    lines = []
    for step in range(steps):
        dt = (0.2 if step < 3 else 0.05) / speed * (1 + 0.05 * rng.random())
        metrics = {
            "loss": 4.9 * math.exp(-3 * step / steps) + 0.35 + 0.02 * rng.random(),
            "lr": 3e-3 * min(1.0, (step + 1) / 50),
            "grad_norm": 1.0 + rng.random(),
            "dt": dt,
            "tokens_per_s": 8 * 64 * 2 / dt,
            "samples_per_s": 8 * 2 / dt,
        }
        lines.append(records.encode(rank, step, metrics, T0 + 10 + step * 0.06))
    run.metrics(rank).write_bytes(b"".join(lines))


def make_runs(outputs: Path, runs: int = 20, steps: int = 1000, ranks: int = 2) -> list[Path]:
    """``runs`` finished run directories of a sweep in ``outputs`` (see the module docstring)."""
    rng = random.Random(0)
    blank = SweepRecord("", 0.0, "running", (), (), (), steps, ())
    sweep = new_sweep(outputs, blank)
    made = []
    for i in range(runs):
        tp, pp, cp = LAYOUTS[i % len(LAYOUTS)]
        run_id = f"20261126-1{i:05d}-000-tp{tp}pp{pp}cp{cp}"
        run = RunDir(outputs / run_id)
        run.make_folders(ranks)
        sizes = {"tp": tp, "pp": pp, "cp": cp, "world_size": ranks}
        record = {
            "run_id": run_id,
            "created_epoch": T0 + i,
            "parent": sweep.sweep_id,
            "hosts": ["localhost"],
            "ranks_per_node": ranks,
            "sizes": sizes,
            "plan": {"tp": tp, "pp": pp, "cp": cp, "launcher": "auto", "ppn": ranks},
            "launch": {"argv": ["mpiexec", "-n", str(ranks), "-genv", "EZPZ_TP", str(tp)]},
        }
        run.run_toml.write_text(tomli_w.dumps(record))
        write_state(run.path, RunState(State.SUCCEEDED, start=T0 + i, end=T0 + i + 70))
        speed = 1 + rng.random()
        for rank in range(ranks):
            _write_metrics(run, rank, steps, speed, rng)
        made.append(run.path)
        sweep = sweep.with_run(run_id)
    write_sweep(outputs, sweep)
    return made


def time_calls(calls: Sequence[tuple[str, Callable[[], object]]], reps: int) -> dict[str, list]:
    """Seconds of each named call, ``reps`` rounds with the calls alternating in each round."""
    took: dict[str, list[float]] = {name: [] for name, _ in calls}
    for _ in range(reps):
        for name, call in calls:
            t0 = time.perf_counter()
            call()
            took[name].append(time.perf_counter() - t0)
    return took


def _ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3


def _report(took: dict[str, list[float]], subject: str, target_ms: float) -> None:
    mine = _ms(took[subject])
    for name, values in took.items():
        ratio = "" if name == subject else f"   {subject}/this {mine / _ms(values):5.2f}x"
        print(f"  {name:<28} median {_ms(values):8.1f} ms  best {min(values) * 1e3:8.1f} ms{ratio}")
    verdict = "ok" if mine <= target_ms else "OVER"
    print(f"  target: {subject} <= {target_ms:.0f} ms: {verdict} ({mine:.1f} ms)")


def bench_core(run_dirs: list[Path], reps: int) -> None:
    files = [path for run in run_dirs for path, _ in metric_files(run)]
    size = sum(p.stat().st_size for p in files) / 1e6
    print(f"core: compare() of {len(run_dirs)} runs, {len(files)} metric files, {size:.1f} MB")
    calls = [
        ("compare()", lambda: compare(run_dirs)),
        ("read_bytes (floor)", lambda: [p.read_bytes() for p in files]),
    ]
    _report(time_calls(calls, reps), "compare()", CORE_TARGET_MS)


def bench_cli(outputs: Path, reps: int) -> None:
    env = {**os.environ, "EZPZ_OUTPUTS": str(outputs)}
    out = run_in_repo([PY, "-m", "ezpz_tui", "compare", "--json"], env, 60, capture_output=True)
    runs = len(json.loads(out.stdout)["runs"])
    print(f"cli: ezpz-tui compare --json (no RUN: the newest run's sweep, {runs} runs)")

    def command(*argv: str) -> Callable[[], object]:
        return lambda: run_in_repo([PY, *argv], env, 60, capture_output=True)

    calls = [
        ("ezpz-tui compare --json", command("-m", "ezpz_tui", "compare", "--json")),
        ("ezpz-tui runs --json", command("-m", "ezpz_tui", "runs", "--json")),
        ("python -c pass", command("-c", "pass")),
    ]
    _report(time_calls(calls, reps), "ezpz-tui compare --json", CLI_TARGET_MS)


def bench_tab(outputs: Path, run_dirs: list[Path], reps: int) -> None:
    import asyncio
    import socket

    from textual.widgets import TabbedContent

    from ezpz_tui.core.checking.check import Check
    from ezpz_tui.core.launching.allocation import Allocation
    from ezpz_tui.ui.app import EzpzApp
    from ezpz_tui.ui.widgets.compare import CompareView

    host = socket.gethostname()
    alloc = Allocation("none", None, host, (host,), 2, "cpu", "bench", None, 0.0, None, 2)
    newest = max(run_dirs, key=lambda p: p.name)
    print(f"tab: the Compare tab of the TUI with {newest.name} open ({len(run_dirs)} runs)")
    took: dict[str, list[float]] = {"Compare tab": [], "Launch tab (floor)": [], "at once": []}

    painted: dict[str, float] = {}  # when each watched widget first painted, once ready
    ready: dict[str, Callable[[], bool]] = {}

    def watch_paint(widget: object, name: str) -> None:
        """Record when ``widget`` renders a line (the compositor paints it) while the view it
        belongs to is ready."""
        render_lines = widget.render_lines  # type: ignore[attr-defined]

        def timed(*args: object, **kwargs: object) -> object:
            if name in ready and ready[name]():
                painted.setdefault(name, time.perf_counter())
            return render_lines(*args, **kwargs)

        widget.render_lines = timed  # type: ignore[attr-defined]

    async def switch(main: object, tab: str, name: str, done: Callable[[], bool]) -> float:
        """From the tab key (t towards Compare, T towards Launch) until the widget named
        ``name`` paints with ``done()`` true."""
        tabs = main.app.query_one(TabbedContent)  # type: ignore[attr-defined]
        painted.pop(name, None)
        ready[name] = done
        t0 = time.perf_counter()
        step = main.action_next_tab if tab == "tab-compare" else main.action_previous_tab  # type: ignore[attr-defined]
        while tabs.active != tab:
            await step()
        while name not in painted:
            await asyncio.sleep(0.002)
            if time.perf_counter() - t0 > 30:
                raise SystemExit(f"{tab}: not shown after 30 s")
        del ready[name]
        return painted[name] - t0

    async def run() -> None:
        app = EzpzApp(outputs, alloc, checks=[Check("python", "ok", "bench")])
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(600):
                if app.main.started:
                    break
                await pilot.pause(0.05)
            else:
                raise SystemExit("the TUI did not start in 30 s")
            app.main.action_focus_right()
            await app.main.open_run(newest)  # mounts the run views
            await pilot.pause()
            watch_paint(app.query_one(CompareView).table, "compare")
            watch_paint(app.query_one("#command"), "launch")

            def compared() -> bool:
                shown = app.query_one(CompareView).comparison
                return shown is not None and len(shown.runs) == len(run_dirs)

            for rep in range(reps + 1):  # the first round warms Textual's caches: not counted
                for name, looks_s in (("Compare tab", 1.0), ("at once", 0.0)):
                    app.main.comparison.compared_for = None  # as if it had never been compared
                    app.main.action_focus_right()  # L, then Enter on the run: it opens
                    await app.main.open_run(newest)
                    await asyncio.sleep(looks_s)  # a person reads the Run tab first
                    took[name].append(await switch(app.main, "tab-compare", "compare", compared))
                app.main.action_focus_right()
                await app.main.open_run(newest)
                await asyncio.sleep(1.0)
                floor = await switch(app.main, "tab-launch", "launch", lambda: True)
                took["Launch tab (floor)"].append(floor)
                if rep == 0:
                    for values in took.values():
                        values.clear()

    asyncio.run(run())
    _report(took, "Compare tab", TAB_TARGET_MS)


def main() -> None:
    parser = bench_parser(__doc__, ("core", "cli", "tab"))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    print_rerun("compare_bench.py", args)
    with scratch("ezpz-compare-bench-", args.keep) as root:
        outputs = root / "outputs"
        t0 = time.perf_counter()
        run_dirs = make_runs(outputs, args.runs, args.steps, args.ranks)
        print(
            f"wrote {args.runs} runs x {args.steps} steps x {args.ranks} ranks "
            f"in {time.perf_counter() - t0:.1f}s"
        )
        if args.only in (None, "core"):
            bench_core(run_dirs, args.reps)
        if args.only in (None, "cli"):
            bench_cli(outputs, args.reps)
        if args.only in (None, "tab"):
            bench_tab(outputs, run_dirs, args.reps)


if __name__ == "__main__":
    main()
