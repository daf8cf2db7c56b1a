"""The rank's accelerator figures from the first source that answers: NVML, nvidia-smi, xpu-smi,
rocm-smi, in that order.

A source that cannot answer in this run (not installed, no device for this rank) is dropped at
once, one that fails :data:`FAILURES_TO_DROP` times in a row (a hung or broken tool) is dropped
too, so after a few samples a CPU-only node asks nothing at all. When every source is gone on a
node that should have had figures, the rank's log gets one line naming what was tried and why
it did not answer: an empty accelerator column must not look like an idle GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from runtime.telemetry.amd import RocmSmi
from runtime.telemetry.devices import pick
from runtime.telemetry.intel import XpuSmi
from runtime.telemetry.nvidia import NvidiaSmi, Nvml
from runtime.telemetry.tools import FAILURES_TO_DROP, Failed, Figures, ToolRunner, Unavailable


class Source(Protocol):
    name: str

    def read(self) -> Figures:
        """The rank's device's figures; raises :class:`Unavailable` or :class:`Failed`."""
        ...


def sources_for(
    local_rank: int, env: Mapping[str, str], runner: ToolRunner, timeout_s: float
) -> list[Source]:
    """Every source, in the order they are tried, each aimed at this rank's device."""
    nvidia = pick("nvidia", local_rank, env)
    return [
        Nvml(nvidia),
        NvidiaSmi(nvidia, runner, timeout_s),
        XpuSmi(pick("intel", local_rank, env), runner, timeout_s),
        RocmSmi(pick("amd", local_rank, env), runner, timeout_s),
    ]


class Accelerator:
    """Asks the sources still in play, in order, for one sample's figures."""

    def __init__(
        self, sources: Sequence[Source], expected: bool, note: Callable[[str], None]
    ) -> None:
        self._live = list(sources)
        self._order = [source.name for source in sources]
        self._expected = expected
        self._note = note
        self._failures: dict[str, int] = {}
        self._why: dict[str, str] = {}  # the last reason each source gave
        self._noted = False

    def read(self) -> Figures:
        """The first answer this sample; empty when no source answered."""
        for source in list(self._live):
            try:
                figures = source.read()
            except Unavailable as exc:
                self._drop(source, str(exc))
            except Failed as exc:
                self._failed(source, str(exc))
            except Exception as exc:  # a library's own error type must not end the sampling
                self._failed(source, f"{type(exc).__name__}: {exc}")
            else:
                self._failures[source.name] = 0
                return figures
        if not self._live and self._expected and not self._noted:
            self._noted = True
            self._note(self.describe())
        return {}

    @property
    def dropped(self) -> dict[str, str]:
        """Sources no longer asked, with why, in the order they are tried."""
        live = {source.name for source in self._live}
        return {name: self._why[name] for name in self._order if name not in live}

    def describe(self) -> str:
        """The log line for a node that should have accelerator figures and has none."""
        tried = "; ".join(f"{name}: {self._why.get(name, '?')}" for name in self._order)
        return f"ezpz telemetry: no accelerator figures ({tried}): host figures only"

    def _failed(self, source: Source, why: str) -> None:
        count = self._failures.get(source.name, 0) + 1
        self._failures[source.name] = count
        self._why[source.name] = why
        if count >= FAILURES_TO_DROP:
            self._drop(source, f"{why}, {count} times in a row")

    def _drop(self, source: Source, why: str) -> None:
        self._why[source.name] = why
        self._live.remove(source)
