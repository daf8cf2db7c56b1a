"""A run's progress as the summary bar shows it: the latest step and loss, and the step rate."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from runtime.record_columns import RecordColumns, is_missing
from runtime.records import Record


@dataclass
class Progress:
    """The latest step and loss of a run, with a rate measured from the records' timestamps."""

    step: int | None = None
    loss: float | None = None
    steps_per_s: float | None = None
    _first: tuple[int, float] | None = None

    def update(self, new: RecordColumns | Sequence[Record]) -> None:
        """Take in the next records of one rank, in file order: the latest step, the loss of the
        latest record with a step that has one, and the rate from the first record with a step
        and a timestamp to the latest later one. Records without a step are passed over.

        Columns are read from the end and the scan stops once everything is found, so a batch
        of 100k records costs a few lookups, not a loop over them all."""
        if not isinstance(new, RecordColumns):
            new = RecordColumns.from_records(new)
        steps, stamps = new.steps, new.timestamps
        begin = 0  # records from here on may give the rate
        if self._first is None:
            for i, (step, stamp) in enumerate(zip(steps, stamps, strict=True)):
                if step is not None and stamp is not None:
                    self._first, begin = (step, stamp), i + 1
                    break
        losses = new.metrics.get("loss", [])
        step0, time0 = self._first or (0, math.inf)
        want_step, want_loss, want_rate = True, bool(losses), self._first is not None
        for i in range(len(steps) - 1, -1, -1):
            step = steps[i]
            if step is None:
                continue
            if want_step:
                self.step, want_step = step, False
            if want_loss and not is_missing(losses[i]):
                self.loss, want_loss = losses[i], False
            if want_rate:
                stamp = stamps[i]
                if i < begin:
                    want_rate = False
                elif stamp is not None and stamp > time0:
                    self.steps_per_s = (step - step0) / (stamp - time0)
                    want_rate = False
            if not (want_loss or want_rate):
                break
