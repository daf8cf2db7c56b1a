"""Which line of a rank's log was printed around a step, for Enter on the plot's cursor.

A rank's log has no timestamps of its own in general (it is the rank's stdout and stderr, as
written), and the follower does not note when each line arrived, so the step's JSONL record
time cannot be matched to a line directly. Training scripts do print their step, though: the
demo writes ``step 12/1000 loss=...``, and most loops write ``step 12``, ``Step: 12`` or
``step=12``. So :func:`line_of_step` takes, in turn:

1. the first line that mentions ``step N`` itself;
2. else the last line that mentions an earlier step (the step's own line was not printed: a
   ``--log-every`` above 1), or the first line when every step mentioned is later (the step
   is older than the lines held; scrolling up reads older ones);
3. else, in a log that never names a step, the line as far into the log as the step is into
   the run's steps: rough, but near where that part of the run printed, and said so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

STEP_MENTION = re.compile(r"\bstep\b\s*[:=#]?\s*(\d+)", re.IGNORECASE)
"""``step 12``, ``Step: 12``, ``step=12``, ``step #12`` (and ``step 12/1000``)."""

How = Literal["exact", "before", "after", "proportion", "none"]


def line_of_step(
    texts: Sequence[str], step: int, span: tuple[int, int] | None = None
) -> tuple[int, How]:
    """The index of the line of ``texts`` printed around ``step`` and how it was found (see
    the module's docstring); ``span``: the run's first and last step, for the proportion.
    ``(0, "none")`` for an empty log."""
    if not texts:
        return 0, "none"
    before: int | None = None
    first_after: int | None = None
    for i, text in enumerate(texts):
        if "tep" not in text and "TEP" not in text:  # most lines: no regex at all
            continue
        for found in STEP_MENTION.finditer(text):
            mentioned = int(found.group(1))
            if mentioned == step:
                return i, "exact"
            if mentioned < step:
                before = i
            elif first_after is None:
                first_after = i
    if before is not None:
        return before, "before"
    if first_after is not None:
        return first_after, "after"
    if span is None or span[1] <= span[0]:
        return len(texts) - 1, "proportion"
    share = min(1.0, max(0.0, (step - span[0]) / (span[1] - span[0])))
    return round(share * (len(texts) - 1)), "proportion"
