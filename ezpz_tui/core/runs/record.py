"""Reading what a run records about itself (``run.toml``), as every reader of a run does.

The run maker in :mod:`ezpz_tui.core.launching.making` writes the record; the watcher, the
failure explanation and the comparison only read it, so reading lives here, below them all,
and a reader never needs the code that makes runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from runtime.rundir import RUN_TOML, RunDir


def _loads(text: str) -> dict[str, Any]:
    """``text`` parsed as TOML, the parser imported by the first reader: a launch, which only
    writes ``run.toml``, does not load it before its launcher starts."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    return tomllib.loads(text)


class RunStoreError(Exception):
    """A run cannot be made, found or read; the message is meant for the user as is."""


def read_run_toml(run_dir: Path) -> dict[str, Any]:
    """All a run records about itself; :class:`RunStoreError` with a readable message when
    unusable."""
    path = RunDir(run_dir).run_toml
    try:
        return _loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunStoreError(f"{run_dir} has no {RUN_TOML}") from None
    except OSError as exc:
        raise RunStoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # TOMLDecodeError and UnicodeDecodeError both are
        raise RunStoreError(f"{path} is not valid TOML: {exc}") from None


def read_record(run_dir: Path) -> tuple[dict[str, Any], str | None]:
    """What ``run.toml`` records, for a reader that goes on without it: ``({}, why)`` when it
    is there but cannot be read (``why`` names the file and the cause, for the screen), and
    ``({}, None)`` when the run has none (one ezpz itself wrote)."""
    path = RunDir(run_dir).run_toml
    try:
        return _loads(path.read_text(encoding="utf-8")), None
    except FileNotFoundError:
        return {}, None
    except OSError as exc:
        return {}, f"{RUN_TOML} cannot be read: {exc.strerror or exc}"
    except ValueError as exc:  # TOMLDecodeError and UnicodeDecodeError both are
        return {}, f"{RUN_TOML} cannot be read: not valid TOML ({exc})"


def ranks_on_disk(run_dir: Path) -> int:
    """How many ranks the run's files show (the highest rank with a status file or a log, plus
    one; 0 for none), for a run whose record cannot say: two folder listings."""
    run = RunDir(run_dir)
    ranks = [rank for _, rank in (*run.statuses(), *run.logs())]
    return max(ranks) + 1 if ranks else 0


def positive_int(value: Any) -> int | None:
    """A whole number above zero, or None for anything else a record may hold (bools too)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if value > 0 else None
