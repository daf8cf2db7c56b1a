"""Rank-aware logging: on a shared console rank 0 speaks; in per-rank log files every rank does.

Where the ranks' outputs interleave on one console (a bare mpiexec or torchrun), the default of
"rank 0 only" keeps it readable and ``all_ranks=True`` (or EZPZ_LOG_ALL_RANKS=1) is there for the
hunt for the one rank that misbehaves. Under ``runtime.capture`` (EZPZ_RUN_DIR set) each rank
writes its own ``logs/rank-N.log``, and the TUI's per-rank and all-ranks views are only as good
as what every rank says, so all ranks log there (EZPZ_LOG_ALL_RANKS=0 turns it off). Rich
formatting is used only when stderr is a terminal: in a log file the escape codes would be noise.
"""

from __future__ import annotations

import logging
import os
import sys

from runtime.env import RUN_DIR_VAR, rank_info_or_single

_FORMAT = "%(asctime)s [%(levelname)s][rank %(rank)d] %(name)s: %(message)s"


class _RankFilter(logging.Filter):
    def __init__(self, rank: int, all_ranks: bool) -> None:
        super().__init__()
        self.rank = rank
        self.all_ranks = all_ranks

    def filter(self, record: logging.LogRecord) -> bool:
        record.rank = self.rank
        return self.all_ranks or self.rank == 0


def get_logger(
    name: str = "ezpz", level: int | str = "INFO", all_ranks: bool | None = None
) -> logging.Logger:
    """A logger that prefixes the rank and drops non-zero ranks unless asked not to."""
    if all_ranks is None:
        default = "1" if os.environ.get(RUN_DIR_VAR) else ""
        all_ranks = os.environ.get("EZPZ_LOG_ALL_RANKS", default) not in ("", "0")
    rank = rank_info_or_single().rank
    logger = logging.getLogger(name)
    logger.setLevel(level)
    logger.propagate = False
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler: logging.Handler
    if sys.stderr.isatty():
        from rich.logging import RichHandler

        handler = RichHandler(show_path=False, markup=False, rich_tracebacks=True)
        handler.setFormatter(logging.Formatter("[rank %(rank)d] %(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
    handler.addFilter(_RankFilter(rank, all_ranks))
    logger.addHandler(handler)
    return logger
