"""The demo's pipeline schedule sizes, without torch: the tuner's memory estimate needs them
where torch is not imported."""

from __future__ import annotations


def default_microbatches(stages: int, local_batch: int) -> int | None:
    """Up to two per stage (a smaller pipeline bubble), at least one per stage, dividing the
    replica's batch; None when no such number exists."""
    return next((m for m in range(2 * stages, stages - 1, -1) if local_batch % m == 0), None)
