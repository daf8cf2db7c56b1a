"""How much of its hardware a run uses: TFLOPS per device and MFU, against a named peak.

MFU = FLOPs per token x global tokens/s / (world size x one device's peak), as torchtitan,
Megatron and nanoGPT define it. The FLOPs per token are the model's, recorded once by the
training script (``History(flops_per_token=)``; the demo does), so MFU does not depend on the
layout: the same model at the same tokens/s has the same MFU under any TP, PP, CP or DP.

The peak is, first that answers: ``[efficiency] peak_tflops`` from the config; the sourced
table's (:mod:`runtime.efficiency.peaks`) for the device rank 0's telemetry names, in the
config's dtype; for a run with no accelerator (none in its telemetry, none on this host), one
rank's share of the run's host, measured by the CPU probe with the run's interpreter
(:mod:`ezpz_tui.core.watching.probe`). The ranks on a host split its cores (the launcher gives
each ``OMP_NUM_THREADS`` = cores / ranks per host, and run.toml records it), so the probe runs
at a rank's threads; for a run that does not record them, the whole host's peak divided by its
ranks per host. Either way a run's MFU does not fall with the ranks it puts on a host. A device
the table does not hold gives no MFU and says so (``n/a``), never a guess; every MFU shown
names its peak and whether it was measured, and one above 100% or below :data:`SUSPECT_BELOW`
is marked suspect, with why. Readers never raise.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.record import positive_int
from ezpz_tui.core.watching.peak_settings import PeakSettings
from ezpz_tui.core.watching.probe import cached_peak, measure, this_host
from ezpz_tui.core.words import percent_of
from runtime.efficiency.peaks import Peak, resolve
from runtime.rundir import RunDir, read_status, read_statuses
from runtime.telemetry.devices import expected

TELEMETRY_BYTES = 1 << 16  # the device name is in the first samples: read no further
SUSPECT_BELOW = 0.005
"""An MFU under this (0.5%) is more likely a wrong figure than a run that slow: shown suspect."""


def suspect(mfu: float | None, peak: Peak | None) -> str | None:
    """Why an MFU of ``mfu`` against ``peak`` (named beside it wherever it is shown) is not to
    be believed as it stands, in words that start ``suspect``: one above 100% or below
    :data:`SUSPECT_BELOW` is more likely a wrong figure than a true one. None for one between,
    or none."""
    if mfu is None or peak is None:
        return None
    if mfu > 1.0:
        return (
            "suspect: above 100% of the peak: the peak is too low for this hardware, "
            "or the run's flops_per_token too high"
        )
    if mfu < SUSPECT_BELOW:
        return (
            f"suspect: below {percent_of(SUSPECT_BELOW)} of the peak: the run's flops_per_token "
            "too low, a peak that is not this hardware's, or steps that mostly wait"
        )
    return None


@dataclass(frozen=True)
class Efficiency:
    """A run's FLOPs per token, world size and peak; ``why_not``: why it has no MFU."""

    flops_per_token: float | None
    world_size: int | None
    peak: Peak | None
    why_not: str | None = None
    hardware_flops_per_token: float | None = None  # for HFU, where the script counted them

    def tflops(self, tokens_per_s: float | None) -> float | None:
        """Achieved model TFLOPS per device at ``tokens_per_s`` (global tokens a second)."""
        if tokens_per_s is None or not self.flops_per_token or not self.world_size:
            return None
        return self.flops_per_token * tokens_per_s / self.world_size / 1e12

    def mfu(self, tokens_per_s: float | None) -> float | None:
        """Model FLOPs utilisation (a fraction) at ``tokens_per_s``; None without a peak."""
        achieved = self.tflops(tokens_per_s)
        if achieved is None or self.peak is None:
            return None
        return achieved / self.peak.tflops

    def suspect(self, tokens_per_s: float | None) -> str | None:
        """Why the MFU at ``tokens_per_s`` is not to be believed as it stands (see
        :func:`suspect`); None for a believable one or none."""
        return suspect(self.mfu(tokens_per_s), self.peak)

    def hfu(self, tokens_per_s: float | None) -> float | None:
        """Hardware FLOPs utilisation at ``tokens_per_s``; None where the run did not count
        its hardware FLOPs, or has no peak."""
        mfu, hardware = self.mfu(tokens_per_s), self.hardware_flops_per_token
        if mfu is None or not hardware or not self.flops_per_token:
            return None
        return mfu * hardware / self.flops_per_token

    def as_dict(self, tokens_per_s: float | None) -> dict[str, Any]:
        return {
            "flops_per_token": self.flops_per_token,
            "hardware_flops_per_token": self.hardware_flops_per_token,
            "hfu": self.hfu(tokens_per_s),
            "world_size": self.world_size,
            "tflops_per_device": self.tflops(tokens_per_s),
            "mfu": self.mfu(tokens_per_s),
            "suspect": self.suspect(tokens_per_s),
            "peak": None if self.peak is None else self.peak.as_dict(),
            "why_not": self.why_not,
        }


def device_name(run_dir: str | Path, rank: int = 0) -> tuple[str | None, bool]:
    """The accelerator model rank ``rank``'s telemetry names, from its first samples, and
    whether they show an accelerator at all (a source that gave figures but no name)."""
    try:
        with open(RunDir(Path(run_dir)).telemetry(rank), "rb") as f:
            head = f.read(TELEMETRY_BYTES)
    except OSError:
        return None, False
    seen = False
    for line in head.splitlines():
        try:
            data = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(data, dict):
            continue
        seen = seen or isinstance(data.get("device"), str)
        name = data.get("device_name")
        if isinstance(name, str) and name.strip():
            return name.strip(), True
    return None, seen


def _interpreter(record: Mapping[str, Any]) -> str | None:
    """The Python the ranks ran: the command's first word, where it is a Python."""
    plan = record.get("plan")
    command = plan.get("command") if isinstance(plan, Mapping) else None
    if not isinstance(command, list) or not command or not isinstance(command[0], str):
        return None
    first = command[0]
    if not Path(first).name.startswith("python"):
        return None
    return first if "/" in first else shutil.which(first)


def _host(run_dir: Path, record: Mapping[str, Any]) -> str | None:
    status = read_status(RunDir(run_dir).status(0), 0)
    if status is not None and status.host:
        return status.host
    hosts = record.get("hosts")
    return hosts[0] if isinstance(hosts, list) and hosts and isinstance(hosts[0], str) else None


def ranks_on_host(run_dir: Path, record: Mapping[str, Any], host: str) -> int | None:
    """How many of the run's ranks shared ``host``: the plan's ranks per node, else the rank
    statuses that name the host; None when neither says."""
    planned = positive_int(record.get("ranks_per_node"))
    if planned is not None:
        return planned
    seen = sum(1 for status in read_statuses(run_dir) if status.host == host)
    return seen or None


def rank_share(peak: Peak, ranks: int) -> Peak:
    """One rank's part of a host's measured peak, when ``ranks`` ranks split the host's cores."""
    if ranks == 1:
        return peak
    return replace(
        peak,
        tflops=peak.tflops / ranks,
        device=f"1/{ranks} of the {peak.device}",
        source=f"{peak.source}; divided among the {ranks} ranks on the host",
    )


def rank_threads(record: Mapping[str, Any]) -> int | None:
    """The threads each rank was given: ``OMP_NUM_THREADS`` in the launch's environment, which
    the launcher sets (cores over ranks per host) unless the user did."""
    launch = record.get("launch")
    env = launch.get("env") if isinstance(launch, Mapping) else None
    said = env.get("OMP_NUM_THREADS") if isinstance(env, Mapping) else None
    return positive_int(int(said)) if isinstance(said, str) and said.isdigit() else None


def _cpu_peak(
    host: str, interpreter: str, here: bool, settings: PeakSettings, threads: int | None
) -> Peak | str:
    """The host's measured peak at ``threads`` (None: every core), cached or measured now
    where allowed, or why not."""
    cached = cached_peak(host, interpreter, threads)
    if cached is not None:
        return cached
    if not here:
        return f"n/a: the CPU of {host} has not been probed (run ezpz-tui there once)"
    if not settings.probe:
        return "n/a: the CPU probe has not run yet (ezpz-tui compare or top runs it once)"
    found = measure(interpreter, threads=threads)
    return found if isinstance(found, Peak) else f"n/a: {found}"


def run_peak(run_dir: str | Path, record: Mapping[str, Any], settings: PeakSettings) -> Peak | str:
    """The peak one device of the run reaches (see the module docstring), or why there is
    none, in words that start ``n/a``."""
    if settings.peak_tflops is not None:
        return Peak(settings.peak_tflops, settings.dtype, "every device", "config")
    name, accelerated = device_name(run_dir)
    if name is not None:
        found = resolve(name, settings.dtype)
        return found or f"n/a: no {settings.dtype} peak for {name!r} in the peak table"
    interpreter, host = _interpreter(record), _host(Path(run_dir), record)
    here = host == this_host()
    if accelerated or (here and expected()):  # a GPU run must never get the CPU's peak
        return (
            "n/a: the run's telemetry does not name its accelerator (set [efficiency] peak_tflops)"
        )
    if interpreter is None or host is None:
        return "n/a: no accelerator named and no Python command to probe the CPU with"
    threads = rank_threads(record)
    if threads is not None:
        return _cpu_peak(host, interpreter, here, settings, threads)
    ranks = ranks_on_host(Path(run_dir), record, host)
    if ranks is None:
        return f"n/a: the run does not say how many of its ranks shared {host}"
    found = _cpu_peak(host, interpreter, here, settings, None)
    return found if isinstance(found, str) else rank_share(found, ranks)


def run_efficiency(
    run_dir: str | Path,
    record: Mapping[str, Any],
    flops_per_token: float | None,
    world_size: int | None,
    settings: PeakSettings,
    hardware_flops_per_token: float | None = None,
) -> Efficiency:
    """The run's efficiency figures; the peak is looked up only for a run that says its
    FLOPs per token (nothing to divide otherwise)."""
    if not flops_per_token:
        return Efficiency(None, world_size, None, "n/a: the run recorded no flops_per_token")
    peak = run_peak(run_dir, record, settings)
    hardware = hardware_flops_per_token
    if isinstance(peak, str):
        return Efficiency(flops_per_token, world_size, None, peak, hardware)
    return Efficiency(flops_per_token, world_size, peak, None, hardware)


RETRY_S = 10.0  # a run without a peak yet is looked at again this often (the probe may run)


class LiveEfficiency:
    """A followed run's efficiency, for the screens that redraw every second: the run's record
    and peak are read once, and again every :data:`RETRY_S` while there is no peak (the
    Compare tab's worker may be measuring the CPU meanwhile). Never probes itself unless
    ``settings`` says so: it is asked from the UI thread."""

    def __init__(self, run_dir: Path, settings: PeakSettings) -> None:
        self.run_dir = Path(run_dir)
        self.settings = settings
        self._known: Efficiency | None = None
        self._looked = -RETRY_S

    def get(self, flops_per_token: float | None, now: float) -> Efficiency | None:
        """The run's figures once it has said its FLOPs per token; None before."""
        if not flops_per_token:
            return None
        known = self._known
        if known is not None and (known.peak is not None or now - self._looked < RETRY_S):
            return known
        from ezpz_tui.core.runs.record import read_record

        record, _ = read_record(self.run_dir)
        sizes = record.get("sizes")
        world = positive_int(sizes.get("world_size")) if isinstance(sizes, Mapping) else None
        self._known = run_efficiency(self.run_dir, record, flops_per_token, world, self.settings)
        self._looked = now
        return self._known
