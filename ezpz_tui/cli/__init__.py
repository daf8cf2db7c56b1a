"""``ezpz-tui``: the TUI with no arguments, headless commands on the same core otherwise.

Every command answers bad input with one readable line and exit status 2, never a traceback,
and does its work whatever its stdout does (closed, full, a pipe whose reader left:
:mod:`ezpz_tui.cli.stdout`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable

from ezpz_tui.cli.parser import build_parser
from ezpz_tui.cli.stdout import exit_status, guard_stdout

__all__ = ["COMMANDS", "build_parser", "handler", "main"]

# Each command's module in this package, imported when that command runs: a launch does not
# load the comparison, the sweeps and the readers of the seventeen others (a third of its CLI's
# imports before the launcher started). Its function is ``cmd_<command>``.
COMMANDS = {
    "info": "reading",
    "doctor": "reading",
    "launch": "launching",
    "relaunch": "relaunching",
    "runs": "reading",
    "plot": "reading",
    "attach": "reading",
    "why": "reading",
    "stacks": "reading",
    "profile": "reading",
    "stop": "reading",
    "sweep": "sweeping",
    "tune": "tuning",
    "compare": "comparing",
    "top": "telemetry",
    "goodput": "goodput",
    "finalize": "finishing",
    "export": "finishing",
    "submit": "submitting",
    None: "reading",
}


def handler(cmd: str | None) -> Callable[[argparse.Namespace], int]:
    """The function that runs ``cmd`` (None: the TUI), its module imported now."""
    module = importlib.import_module(f"{__name__}.{COMMANDS[cmd]}")
    return getattr(module, f"cmd_{cmd or 'tui'}")


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
        return handler(None)(argparse.Namespace(cmd=None, outputs=None))
    try:
        # Only the options of the command given first: a launch does not build the other
        # eighteen commands' (a tenth of its CLI's start).
        args = build_parser(only=given[0]).parse_args(argv)
    except SystemExit as done:  # --help, --version (0) or a usage error (2), already printed
        return exit_status(done.code if isinstance(done.code, int) else 0, keeps_status=False)
    try:
        code = handler(args.cmd)(args)
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # ezpz-tui runs | head
        return 0
    following = ("launch", "tune")  # unless --dry-run
    runs = args.cmd in ("sweep", "relaunch") or (args.cmd in following and not args.dry_run)
    return exit_status(code, keeps_status=runs)


if __name__ == "__main__":
    sys.exit(main())
