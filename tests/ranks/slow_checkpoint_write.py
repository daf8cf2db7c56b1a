"""The demo (``runtime.examples.train``, its arguments after this script's name) on storage whose
first checkpoint write is held up until the test releases it.

Storage that is slow in a way a test can time: each rank's first checkpoint data file
(``__<rank>_0.distcp``, written through torch.distributed.checkpoint's ``FileSystem``) waits
before it is opened until ``release`` exists in the folder ``WRITE_GATE`` names, for at most
``HOLD_S``. Each rank writes there ``started-<rank>`` when its write is held and
``written-<rank>`` once its file is written and closed, each holding ``time.time()``: the test
compares them with the steps' record times, on the same clock, without asking the Checkpointer.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch.distributed.checkpoint import filesystem

from runtime.env import rank_info_or_single
from runtime.examples.train import main

HOLD_S = 60.0  # past this a write goes on unreleased, so a broken test ends rather than hangs

gate = Path(os.environ["WRITE_GATE"])
rank = rank_info_or_single().rank
real_stream = filesystem.FileSystem.create_stream
held: list[str] = []


def mark(name: str) -> None:
    partial = gate / f".{name}"
    partial.write_text(repr(time.time()))
    partial.rename(gate / name)


@contextlib.contextmanager
def slow_stream(self: Any, path: str | os.PathLike[str], mode: str) -> Iterator[Any]:
    first = mode == "wb" and str(path).endswith(".distcp") and not held
    if first:
        held.append(str(path))
        mark(f"started-{rank}")
        deadline = time.monotonic() + HOLD_S
        while not (gate / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
    with real_stream(self, path, mode) as stream:
        yield stream
    if first:
        mark(f"written-{rank}")


filesystem.FileSystem.create_stream = slow_stream  # type: ignore[method-assign]
sys.exit(main(sys.argv[1:]))
