"""``ezpz-tui``: the TUI with no arguments, headless commands on the same core otherwise.

Every command answers bad input with one readable line and exit status 2, never a traceback,
and does its work whatever its stdout does (closed, full, a pipe whose reader left:
:mod:`ezpz_tui.cli.stdout`).
"""

from __future__ import annotations

import argparse
import sys

from ezpz_tui.cli.comparing import cmd_compare
from ezpz_tui.cli.finishing import cmd_export, cmd_finalize
from ezpz_tui.cli.goodput import cmd_goodput
from ezpz_tui.cli.launching import cmd_launch
from ezpz_tui.cli.parser import build_parser
from ezpz_tui.cli.reading import (
    cmd_attach,
    cmd_doctor,
    cmd_info,
    cmd_plot,
    cmd_profile,
    cmd_runs,
    cmd_stacks,
    cmd_stop,
    cmd_tui,
    cmd_why,
)
from ezpz_tui.cli.relaunching import cmd_relaunch
from ezpz_tui.cli.stdout import exit_status, guard_stdout
from ezpz_tui.cli.submitting import cmd_submit
from ezpz_tui.cli.sweeping import cmd_sweep
from ezpz_tui.cli.telemetry import cmd_top
from ezpz_tui.cli.tuning import cmd_tune

__all__ = ["build_parser", "main"]

COMMANDS = {
    "info": cmd_info,
    "doctor": cmd_doctor,
    "launch": cmd_launch,
    "relaunch": cmd_relaunch,
    "runs": cmd_runs,
    "plot": cmd_plot,
    "attach": cmd_attach,
    "why": cmd_why,
    "stacks": cmd_stacks,
    "profile": cmd_profile,
    "stop": cmd_stop,
    "sweep": cmd_sweep,
    "tune": cmd_tune,
    "compare": cmd_compare,
    "top": cmd_top,
    "goodput": cmd_goodput,
    "finalize": cmd_finalize,
    "export": cmd_export,
    "submit": cmd_submit,
    None: cmd_tui,
}


def main(argv: list[str] | None = None) -> int:
    before = sys.stdout
    guard_stdout()
    try:
        return _run(argv)
    finally:
        sys.stdout = before  # for callers in this process (tests); a command has flushed


def _run(argv: list[str] | None) -> int:
    given = sys.argv[1:] if argv is None else argv
    if not given:
        # The bare TUI skips building the parser (and importing the plan module for its
        # launcher list): it is the first frame's start-up cost.
        return cmd_tui(argparse.Namespace(cmd=None, outputs=None))
    try:
        # Only the options of the command given first: a launch does not build the other
        # eighteen commands' (a tenth of its CLI's start).
        args = build_parser(only=given[0]).parse_args(argv)
    except SystemExit as done:  # --help, --version (0) or a usage error (2), already printed
        return exit_status(done.code if isinstance(done.code, int) else 0, keeps_status=False)
    try:
        code = COMMANDS[args.cmd](args)
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # ezpz-tui runs | head
        return 0
    following = ("launch", "tune")  # unless --dry-run
    runs = args.cmd in ("sweep", "relaunch") or (args.cmd in following and not args.dry_run)
    return exit_status(code, keeps_status=runs)


if __name__ == "__main__":
    sys.exit(main())
