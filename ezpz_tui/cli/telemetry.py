"""``ezpz-tui top RUN``: every rank's CPU, memory and accelerator figures, once or every N s."""

from __future__ import annotations

import argparse
import json
import sys
import time

from ezpz_tui.cli.common import fail, run_named
from ezpz_tui.cli.stdout import refused

CLEAR = "\x1b[H\x1b[2J"


def cmd_top(args: argparse.Namespace) -> int:
    from ezpz_tui.config import load_config
    from ezpz_tui.core.launching.allocation import detect_allocation
    from ezpz_tui.core.watching.efficiency import PeakSettings
    from ezpz_tui.core.watching.top import format_top, read_top

    run_dir = run_named(args)
    if isinstance(run_dir, str):
        return fail(run_dir)
    settings, warnings = load_config()
    for warning in warnings:
        print(f"ezpz-tui: warning: {warning}", file=sys.stderr)
    peaks = PeakSettings(settings.peak_tflops, settings.peak_dtype)
    clear = args.watch is not None and sys.stdout.isatty() and not args.json
    left = detect_allocation().walltime_left()  # this job's, read once: counted down after
    end = None if left is None else time.time() + left
    read_mb_s = None  # the storage's read rate, measured by the first look
    try:
        while True:
            now = time.time()
            top = read_top(
                run_dir, settings.slow_factor, peaks, settings.checkpoint_max_age_s, read_mb_s
            )
            read_mb_s = top.checkpoint.read_mb_s if top.checkpoint else None
            walltime = None if end is None else end - now
            if args.json:  # with --watch, one object a line (JSON Lines)
                indent = None if args.watch is not None else 2
                print(json.dumps(top.to_json(now, walltime), indent=indent), flush=True)
            else:
                lines = format_top(top, now, walltime)
                print((CLEAR if clear else "") + "\n".join(lines), flush=True)
            if args.watch is None or refused():  # nobody reads what a watch would print
                return 0
            if not args.json and not clear:
                print(flush=True)
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return 0
