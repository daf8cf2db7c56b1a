"""What the rank list, the heatmap and ``ezpz-tui top`` show of every rank's telemetry.

The samples come from ``telemetry/rank-NNNNN.jsonl`` (:mod:`runtime.telemetry.record`), written
by each rank's capture wrapper every couple of seconds. Only the last minute of each rank is
kept, for the sparklines: a week-long run costs the same memory as a short one. UI-free.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from runtime.telemetry.record import Sample, parse_line

SPARK_S = 60.0  # how far back the sparklines reach
KEEP_SAMPLES = 64  # per rank: a minute at the default 2 s interval, with room for faster ones
TAIL_BYTES = 16 << 10  # read from the end of a file opened late: its last minute and more
SPARKS = "▁▂▃▄▅▆▇█"

FIGURES = ("cpu_pct", "rss_bytes", "util_pct", "mem_used_bytes")
"""The figures the rank list shows as columns, in column order."""


@dataclass
class RankTelemetry:
    """One rank's recent samples, oldest first."""

    samples: deque[Sample] = field(default_factory=lambda: deque(maxlen=KEEP_SAMPLES))

    @property
    def latest(self) -> Sample | None:
        return self.samples[-1] if self.samples else None

    def add(self, new: Iterable[Sample]) -> None:
        for sample in new:
            if self.samples and sample.time < self.samples[-1].time:
                self.samples.clear()  # the file was replaced (a rerun): start over
            self.samples.append(sample)

    def series(self, name: str, span_s: float = SPARK_S) -> list[float]:
        """``name``'s values over the last ``span_s`` seconds of samples, oldest first; samples
        without it are skipped."""
        latest = self.latest
        if latest is None:
            return []
        since = latest.time - span_s
        values = (getattr(s, name) for s in self.samples if s.time >= since)
        return [v for v in values if v is not None]


def sparkline(values: Sequence[float], width: int, low: float | None = None) -> str:
    """``values`` as a line of block characters, the newest at the right end, ``width``
    characters at most. The scale runs from ``low`` (the smallest value when not given) to the
    largest, so a flat series reads as a flat line, not as noise."""
    values = list(values)[-width:]
    if not values:
        return ""
    bottom = min(values) if low is None else low
    top = max(values)
    if top <= bottom:
        return SPARKS[0] * len(values)
    step = (top - bottom) / (len(SPARKS) - 1)
    return "".join(SPARKS[min(len(SPARKS) - 1, round((v - bottom) / step))] for v in values)


def read_tail(path: str | os.PathLike[str], tail: int) -> bytes | None:
    """The whole lines in the last ``tail`` bytes of a file (a line cut at the start dropped);
    None when it cannot be read. A growing file is read from its end, never whole."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - tail))
            data = fh.read(tail)
    except OSError:
        return None
    return data[data.find(b"\n") + 1 :] if size > tail else data


def read_latest(path: str | os.PathLike[str], tail: int = TAIL_BYTES) -> list[Sample]:
    """The samples in the last ``tail`` bytes of one telemetry file, oldest first; empty when it
    cannot be read. A torn last line is skipped."""
    data = read_tail(path, tail) or b""
    return [s for s in map(parse_line, data.split(b"\n")) if s is not None]


def read_last(path: str | os.PathLike[str], tail: int = 2048) -> Sample | None:
    """The newest sample of one telemetry file, parsing from its end: one line, not a minute."""
    for line in reversed((read_tail(path, tail) or b"").split(b"\n")):
        sample = parse_line(line) if line else None
        if sample is not None:
            return sample
    return None


def human_bytes(value: float | None) -> str:
    """``12.3G``, ``512M``, ``-``: four or five characters for a column."""
    if value is None:
        return "-"
    for unit, size in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= size:
            shown = value / size
            return f"{shown:.1f}{unit}" if shown < 10 else f"{shown:.0f}{unit}"
    return f"{value:.0f}B"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"
