"""Command line entry point (filled in by the launch-core work)."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    raise SystemExit("ezpz-tui: not built yet")
