"""The commands about a run's end products: ``finalize`` (summary.json, digest.json, metrics.nc,
report.md, as written when a run ends) and ``export`` (the rank x step dataset as nc, csv or
parquet)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ezpz_tui.cli.common import fail, run_named, say


def cmd_finalize(args: argparse.Namespace) -> int:
    from ezpz_tui.config import load_config
    from ezpz_tui.core.launching.finalize import FinishSettings, finalize
    from ezpz_tui.core.watching.efficiency import PeakSettings

    run_dir = run_named(args)
    if isinstance(run_dir, str):
        return fail(run_dir)
    config, problems = load_config()
    for problem in problems:
        say(f"ezpz-tui: {problem}")
    peaks = PeakSettings(config.peak_tflops, config.peak_dtype)
    try:
        written = finalize(run_dir, FinishSettings(peaks, config.slow_factor))
    except Exception as exc:  # a foreign or damaged run: one line, never a traceback
        return fail(f"cannot finalize {run_dir.name}: {type(exc).__name__}: {exc}")
    for path in written:
        print(path)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launching.finalize import export

    run_dir = run_named(args)
    if isinstance(run_dir, str):
        return fail(run_dir)
    out = Path(args.output) if args.output else None
    try:
        print(export(run_dir, args.format, out))
    except ValueError as exc:  # parquet without pyarrow
        return fail(str(exc))
    except Exception as exc:  # a foreign or damaged run, a path that cannot be written
        return fail(f"cannot export {run_dir.name}: {type(exc).__name__}: {exc}")
    return 0
