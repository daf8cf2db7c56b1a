"""``ezpz-tui sweep``: every valid TP/PP/CP combination run in turn, then the compare table.

Each run is supervised as ``ezpz-tui launch --quiet`` supervises one (its log is not followed;
a line says when each run starts and how it ended, with its failed ranks). Ctrl-C, SIGTERM or
SIGHUP stop the current run cleanly and start no more; the table then shows what ran. Exit
status: 0 when every run succeeded, 1 when one did not, 128+N when signal N stopped the sweep,
2 when nothing could run.
"""

from __future__ import annotations

import argparse
import signal
import time
from typing import Any

from ezpz_tui.cli.common import fail, say
from ezpz_tui.cli.launching import plan_from_args, report_end, session_for, stop_reason


class _Progress:
    """What the sweep says on stderr as it goes: each run's start, stop and end."""

    def __init__(self) -> None:
        self.started = 0.0

    def __call__(self, event: Any) -> None:
        from ezpz_tui.core.comparing.sweep import layout_label

        where = f"{event.index + 1}/{event.total} {layout_label(event.plan)}"
        if event.kind == "refused":
            say(f"ezpz-tui: sweep {where}: refused: {event.message}")
        elif event.kind == "started":
            self.started = time.monotonic()
            say(f"ezpz-tui: sweep {where}: run {event.handle.run_dir.name}")
        elif event.kind == "stopping":
            say(f"ezpz-tui: sweep {where}: stopping the run and the sweep ...")
        elif event.kind == "ended":
            report_end(event.handle)
            say(f"ezpz-tui: sweep {where}: {time.monotonic() - self.started:.1f}s")


def cmd_sweep(args: argparse.Namespace) -> int:
    from ezpz_tui.cli.comparing import peak_settings, table_lines
    from ezpz_tui.core.comparing.compare import compare
    from ezpz_tui.core.comparing.sweep import layout_label, plan_sweep, run_sweep, with_steps
    from ezpz_tui.core.launching.processes import deferred_signals

    try:
        base = plan_from_args(args)
        command = with_steps(base.command, args.steps, args.global_batch)
        base = base.with_changes(command=command)
    except ValueError as exc:
        return fail(str(exc))
    session = session_for(args)
    sweep = plan_sweep(base, session.alloc, args.tp, args.pp, args.cp)
    for plan, why in sweep.skipped:
        say(f"ezpz-tui: skipping {layout_label(plan)}: {why}")
    if not sweep.runs:
        return fail("no valid layout to sweep (see above)")
    say(f"ezpz-tui: sweeping {', '.join(layout_label(p) for p in sweep.runs)}")
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    with deferred_signals(stops) as stop_requested:
        outcome = run_sweep(
            session,
            sweep,
            args.steps,
            _Progress(),
            lambda: bool(stop_requested),
            stop_reason=lambda: stop_reason(stop_requested[0]) if stop_requested else None,
        )
    if outcome.halted is not None:
        return fail(" ".join(outcome.halted.reasons))
    say(f"ezpz-tui: sweep {outcome.record.sweep_id} {outcome.record.state}")
    if outcome.run_dirs:  # a stdout that refuses it loses the table, not the runs
        print("\n".join(table_lines(compare(outcome.run_dirs, peak_settings()))))
    if outcome.stopped:
        return 128 + stop_requested[0] if stop_requested else 130
    return 0 if outcome.all_succeeded else 1
