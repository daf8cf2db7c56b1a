"""``ezpz-tui``: the TUI with no arguments, headless commands on the same core otherwise.

Every command answers bad input with one readable line and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys

from ezpz_tui.cli.comparing import cmd_compare
from ezpz_tui.cli.finishing import cmd_export, cmd_finalize
from ezpz_tui.cli.launching import cmd_launch
from ezpz_tui.cli.parser import build_parser
from ezpz_tui.cli.reading import (
    cmd_attach,
    cmd_doctor,
    cmd_info,
    cmd_plot,
    cmd_runs,
    cmd_stacks,
    cmd_stop,
    cmd_tui,
    cmd_why,
)
from ezpz_tui.cli.submitting import cmd_submit
from ezpz_tui.cli.sweeping import cmd_sweep
from ezpz_tui.cli.telemetry import cmd_top

__all__ = ["build_parser", "main"]

COMMANDS = {
    "info": cmd_info,
    "doctor": cmd_doctor,
    "launch": cmd_launch,
    "runs": cmd_runs,
    "plot": cmd_plot,
    "attach": cmd_attach,
    "why": cmd_why,
    "stacks": cmd_stacks,
    "stop": cmd_stop,
    "sweep": cmd_sweep,
    "compare": cmd_compare,
    "top": cmd_top,
    "finalize": cmd_finalize,
    "export": cmd_export,
    "submit": cmd_submit,
    None: cmd_tui,
}


def main(argv: list[str] | None = None) -> int:
    if not (sys.argv[1:] if argv is None else argv):
        # The bare TUI skips building the parser (and importing the plan module for its
        # launcher list): it is the first frame's start-up cost.
        return cmd_tui(argparse.Namespace(cmd=None, outputs=None))
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.cmd](args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # ezpz-tui runs | head
        return 0


if __name__ == "__main__":
    sys.exit(main())
