"""The commands about what is there: the allocation, the doctor, the runs, a run's metric, its
failure, its ranks' stacks, the TUI on a run, and stopping a run supervised elsewhere."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ezpz_tui.cli.common import colour_wanted, fail, outputs_of, run_named


def cmd_info(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launching.allocation import detect_allocation, format_duration

    alloc = detect_allocation()
    data = asdict(alloc)
    data["walltime_left_s"] = alloc.walltime_left()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    more = " ..." if len(alloc.hosts) > 8 else ""
    kind = f"{alloc.accelerator_kind} per host ({alloc.accelerator_source})"
    rows = {
        "scheduler": alloc.scheduler,
        "job": alloc.job_id or "-",
        "machine": alloc.machine,
        "hosts": f"{len(alloc.hosts)}: {', '.join(alloc.hosts[:8])}{more}",
        "accelerators": f"{alloc.accelerators_per_host} {kind}",
        "cpus per host": alloc.cpus_per_host,
        "walltime left": format_duration(data["walltime_left_s"]),
    }
    for key, value in rows.items():
        print(f"{key:>14}  {value}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from ezpz_tui.core.checking.doctor import run_checks, worst_level
    from ezpz_tui.core.launching.allocation import detect_allocation

    alloc = detect_allocation()
    checks = run_checks(alloc, outputs=outputs_of(args))
    if args.json:
        print(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        marks = {"ok": "ok  ", "warning": "warn", "error": "FAIL"}
        for c in checks:
            print(f"[{marks.get(c.level, c.level)}] {c.name}: {c.reason}")
            if c.level != "ok" and c.remedy:
                print(f"       -> {c.remedy}")
    return 1 if worst_level(checks) == "error" else 0


def cmd_runs(args: argparse.Namespace) -> int:
    from ezpz_tui.core.runs.outputs import OutputsError, check_listable
    from ezpz_tui.core.runs.queued import listed_runs
    from ezpz_tui.core.runs.store import RunStore

    store = RunStore(outputs_of(args))
    try:
        check_listable(store.outputs)  # a missing directory has no runs; a file is an error
    except OutputsError as exc:
        return fail(str(exc))
    runs = listed_runs(store)
    if args.json:
        print(json.dumps([{**asdict(r), "path": str(r.path)} for r in runs], indent=2))
        return 0
    if not runs:
        print(f"no runs in {outputs_of(args)}")
        return 0
    # A queued job has no parent: its job id stands there. The last column says why a run
    # ended as it did (its recorded cause), or why a reader sees it so (lost, queued).
    parents = [f"job {r.job_id}" if r.queued else r.parent or "" for r in runs]
    width = max(len("PARENT"), *map(len, parents))
    print(_runs_row(name for name, _ in RUNS_COLUMNS) + f"  {'PARENT':<{width}}  CAUSE")
    for r, parent in zip(runs, parents, strict=True):
        exit_code = f"s{r.signal}" if r.signal else "" if r.exit_code is None else r.exit_code
        sizes = ("-" if x is None else x for x in (r.world_size, r.tp, r.pp, r.cp, r.dp))
        row = _runs_row([r.run_id, r.state, exit_code, *sizes])
        print(f"{row}  {parent:<{width}}  {r.cause or r.reason or ''}".rstrip())
    for r in runs:  # what the table could not say: its sizes are unknown, not missing
        if r.problem:
            print(f"ezpz-tui: warning: {r.run_id}: {r.problem}", file=sys.stderr)
    return 0


RUNS_COLUMNS = (("RUN", "<34"), ("STATE", "<10"), ("EXIT", ">4"), ("WORLD", ">5"))
RUNS_COLUMNS += tuple((size, ">3") for size in ("TP", "PP", "CP", "DP"))


def _runs_row(cells: Iterable[Any]) -> str:
    return " ".join(f"{cell:{width}}" for cell, (_, width) in zip(cells, RUNS_COLUMNS, strict=True))


def cmd_plot(args: argparse.Namespace) -> int:
    from ezpz_tui.core.watching.metrics.one_metric import read_metric
    from ezpz_tui.terminal_plot import chart, series_json

    run_dir = run_named(args)
    if isinstance(run_dir, str):
        return fail(run_dir)
    series = read_metric(run_dir, args.metric, args.rank)
    for note in series.notes():
        print(f"ezpz-tui: {note}", file=sys.stderr)
    if not series.values:
        ranked = f" for rank {args.rank}" if args.rank is not None else ""
        return fail(series.why_nothing(run_dir.name) + ranked)
    if args.json:
        print(json.dumps(series_json(series, run_dir.name)))
        return 0
    overlay = None
    if args.overlay:
        other = run_named(args, args.overlay)
        if isinstance(other, str):
            return fail(other)
        overlay = (other.name, read_metric(other, args.metric, args.rank))
    try:
        title = f"{args.metric} — {run_dir.name} ({len(series.ranks)} ranks)"
        drawn = chart(series, title, overlay)
    except Exception:  # plotext's own arithmetic: overflow on spans near the float range
        low, high = series.span()
        return fail(f"cannot draw {args.metric}: its values span {low:g} to {high:g}")
    if not colour_wanted(sys.stdout):
        from ezpz_tui.core.watching.tails import strip_ansi

        drawn = strip_ansi(drawn)
    print(drawn)
    return 0


def no_terminal() -> str | None:
    """Why the TUI cannot start here, if it cannot: it reads keys from stdin and draws on stderr
    (Textual's choice, so that stdout stays free), and without a terminal on both it would draw
    into a file, or wait for keys that never come."""
    missing = [name for fd, name in ((0, "stdin"), (2, "stderr")) if not os.isatty(fd)]
    if not missing:
        return None
    verb = "is not a terminal" if len(missing) == 1 else "are not terminals"
    return (
        f"the TUI needs a terminal on stdin and stderr, and {' and '.join(missing)} {verb} "
        "here; the headless commands are in `ezpz-tui --help`"
    )


def _run_tui(outputs: Path | None, attach: Path | None = None) -> int:
    """The TUI, with the cyclic garbage collector off from here until the main screen's
    start-up is over (the app freezes what start-up made and turns it back on): its passes
    over the objects that importing and composing make took a tenth of the time to the plan."""
    gc.disable()
    from ezpz_tui.ui.app import run_app

    return run_app(outputs=outputs, attach=attach)


def cmd_tui(args: argparse.Namespace) -> int:
    if why := no_terminal():
        return fail(why)
    return _run_tui(args.outputs)


def cmd_attach(args: argparse.Namespace) -> int:
    run_dir = run_named(args)
    if isinstance(run_dir, str):
        return fail(run_dir)
    if why := no_terminal():
        return fail(why)
    return _run_tui(args.outputs or run_dir.parent, run_dir)


def cmd_why(args: argparse.Namespace) -> int:
    from ezpz_tui.core.watching.why import why_report

    run_dir = run_named(args)
    if isinstance(run_dir, str):
        return fail(run_dir)
    print(why_report(run_dir, args.json))
    return 0


def cmd_stacks(args: argparse.Namespace) -> int:
    """The groups of every rank's stacks; 0 if any rank's stacks came back, else 2 with one
    line saying why."""
    from ezpz_tui.core.watching.stacks import format_report, report_json, request_stacks

    run_dir = run_named(args)
    if isinstance(run_dir, str):
        return fail(run_dir)
    report = request_stacks(run_dir)
    if args.json:
        print(json.dumps(report_json(report), indent=2))
    else:
        for line in format_report(report):
            print(line)
    if report.collected:
        return 0
    if not report.skipped:
        return fail(f"no stacks from {run_dir.name}: no rank status files in {run_dir}")
    why = "; ".join(f"rank {s.rank}: {s.reason}" for s in report.skipped[:3])
    more = f" (and {len(report.skipped) - 3} more)" if len(report.skipped) > 3 else ""
    return fail(f"no stacks from {run_dir.name}: {why}{more}")


def cmd_profile(args: argparse.Namespace) -> int:
    """Each rank's profile of its next steps; 0 if any rank answered, else 2 saying why."""
    from ezpz_tui.core.watching.profiles import format_profile, report_json, request_profile

    run_dir = run_named(args)
    if isinstance(run_dir, str):
        return fail(run_dir)
    report = request_profile(run_dir, args.steps, args.timeout)
    if args.json:
        print(json.dumps(report_json(report), indent=2))
    else:
        for line in format_profile(report):
            print(line)
    if report.summaries:
        return 0
    if not report.skipped:
        return fail(f"no profile from {run_dir.name}: no rank status files in {run_dir}")
    rank, why = min(report.skipped.items())
    return fail(f"no profile from {run_dir.name}: rank {rank}: {why.removeprefix('no profile: ')}")


def cmd_stop(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launching.elsewhere import Refused, stop_elsewhere

    run_dir = run_named(args)
    if isinstance(run_dir, str):
        return fail(run_dir)
    ended = stop_elsewhere(run_dir)
    if isinstance(ended, Refused):
        return fail(ended.reason)
    print(f"ezpz-tui: run {ended.state} ({run_dir.name})", file=sys.stderr)
    return 0
