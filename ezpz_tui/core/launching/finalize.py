"""What a run leaves when it ends: ``summary.json``, ``digest.json``, ``metrics.nc`` and
``report.md``.

Whoever records a run's end (the supervisor, or the tether that took it over) calls
:func:`start_finalize` once the final state is written. It starts ``python -m`` this module in a
session of its own and returns at once: reading every rank's metrics and importing xarray takes
seconds on a large run, and neither the end's record nor this process's exit may wait on it or
fail with it. The same work runs on demand as ``ezpz-tui finalize RUN``, and ``ezpz-tui export``
writes the dataset in other formats.

``summary.json`` holds, per metric, rank 0's first, last, min, max and mean over the last 10%
of its records, and the spread of the ranks' last values; the step time and throughput medians
past warm-up (:mod:`ezpz_tui.core.watching.numbers`); the model TFLOPS per device and MFU at
those medians, with the peak they divide by (:mod:`ezpz_tui.core.watching.efficiency`); the
state, exit and cause; the plan; with ``--stage``, the staging's seconds and bytes; and every
verdict the run had, judged as of its end (stragglers, a hang's missing rank, a mismatch:
:mod:`ezpz_tui.core.watching.verdicts`), which ``top``, ``why`` and the TUI show once it ended.

The peak's settings (the user's ``[efficiency]``) come from whoever starts the work, which read
``config.toml`` where a person sees its problems: the supervisor (and through it the tether),
``ezpz-tui finalize``. This module reads no configuration of its own, so the same run gives the
same summary whoever finalizes it with the same settings.
Non-finite numbers are written as the JSONL spells them (``"NaN"``), so strict readers parse it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ezpz_tui.core.launching.finish_settings import FinishSettings
from runtime.atomic import write_atomic
from runtime.env import RUN_DIR_VAR
from runtime.metric_files import metric_files
from runtime.rundir import (
    METRICS_CSV,
    METRICS_NC,
    METRICS_PARQUET,
    RunDir,
    read_state,
)

if TYPE_CHECKING:
    from ezpz_tui.core.watching.efficiency import PeakSettings

__all__ = ["FinishSettings", "finalize", "start_finalize"]  # FinishSettings: its own module's

NICENESS = 10  # how far the finalizer started at a run's end yields to other work
EXPORTS = {"nc": METRICS_NC, "csv": METRICS_CSV, "parquet": METRICS_PARQUET}
"""What ``ezpz-tui export`` writes, by format, in the run directory unless told otherwise."""


def add_settings_args(parser: argparse.ArgumentParser) -> None:
    """The options :meth:`FinishSettings.args` writes, for a process that finalizes later."""
    parser.add_argument("--peak-tflops", type=float, default=None)
    parser.add_argument("--peak-dtype", default="bf16")
    parser.add_argument("--slow-factor", type=float, default=FinishSettings.slow_factor)


def settings_from(args: argparse.Namespace) -> FinishSettings:
    from ezpz_tui.core.watching.peak_settings import PeakSettings

    return FinishSettings(PeakSettings(args.peak_tflops, args.peak_dtype), args.slow_factor)


def start_finalize(run_dir: Path, settings: FinishSettings) -> None:
    """Write the run's end products in a process of its own; never raises, never waits."""
    env = {k: v for k, v in os.environ.items() if k != RUN_DIR_VAR}  # not one of the run's
    with contextlib.suppress(OSError, ValueError):
        subprocess.Popen(
            [sys.executable, "-m", __name__, str(run_dir), *settings.args()],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )


def _plain(x: float) -> float | str:
    """A number for strict JSON: non-finite ones as the JSONL's strings."""
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def metric_summary(ds: Any) -> dict[str, dict[str, Any]]:
    """Per metric: rank 0's (the lowest rank's) first, last, min, max and mean over its last
    10% of records, and the ranks' last values' min, max and spread."""
    import numpy as np

    out: dict[str, dict[str, Any]] = {}
    if ds.sizes.get("rank", 0) == 0:
        return out
    for name, var in ds.data_vars.items():
        if name == "timestamp":
            continue
        values = var.values
        first_rank = values[0][~np.isnan(values[0])]
        if first_rank.size == 0:
            continue
        tail = first_rank[-max(1, first_rank.size // 10) :]
        finite = first_rank[np.isfinite(first_rank)]
        lasts = [row[~np.isnan(row)][-1] for row in values if (~np.isnan(row)).any()]
        entry = {
            "first": first_rank[0],
            "last": first_rank[-1],
            "min": finite.min() if finite.size else math.nan,
            "max": finite.max() if finite.size else math.nan,
            "mean_last_10pct": tail.mean(),
            "records": first_rank.size,
            "last_min": min(lasts),
            "last_max": max(lasts),
            "last_spread": max(lasts) - min(lasts),
        }
        key = var.attrs.get("written_as", name)
        out[key] = {k: v if k == "records" else _plain(float(v)) for k, v in entry.items()}
        out[key]["records"] = int(entry["records"])
    return out


def speed_summary(
    run_dir: Path, meta: Mapping[str, Any], peaks: PeakSettings | None = None
) -> dict[str, Any]:
    """Step time and throughput medians past warm-up, and the efficiency at them, as
    ``ezpz-tui compare`` reports them; ``peaks`` None: the device table's peak."""
    from ezpz_tui.core.runs.record import positive_int
    from ezpz_tui.core.watching.efficiency import PeakSettings, run_efficiency
    from ezpz_tui.core.watching.numbers import read_numbers

    n = read_numbers(run_dir)
    sizes = meta.get("sizes")
    world = positive_int(sizes.get("world_size")) if isinstance(sizes, Mapping) else None
    peaks = peaks or PeakSettings()
    efficiency = run_efficiency(
        run_dir, meta, n.flops_per_token, world, peaks, n.hardware_flops_per_token
    )
    return {
        "step_time_s_median": n.step_time_s,
        "step_time_from": n.step_time_from,
        "samples_per_s_median": n.samples_per_s,
        "tokens_per_s_median": n.tokens_per_s,
        "steady_records": n.steady,
        "last_step": n.last_step,
        "peak_mem_gb_max": n.peak_mem_max_gb,
        "efficiency": efficiency.as_dict(n.tokens_per_s),
    }


def build_summary(
    run_dir: Path, ds: Any | None, settings: FinishSettings | None = None
) -> dict[str, Any]:
    """The whole ``summary.json`` object; ``ds`` None: the run recorded no metrics."""
    settings = settings or FinishSettings()
    from ezpz_tui.core.runs.record import RunStoreError, read_run_toml

    state = read_state(run_dir)
    try:
        meta = read_run_toml(run_dir)
    except RunStoreError:
        meta = {}
    duration = state.end - state.start if state.end and state.start else None
    return {
        "run_id": state.run_id or run_dir.name,
        "state": str(state.state),
        "exit_code": state.exit_code,
        "signal": state.signal_name or state.signal,
        "cause": state.cause,
        "start": state.start,
        "end": state.end,
        "duration_s": duration,
        "ranks": 0 if ds is None else int(ds.sizes.get("rank", 0)),
        "steps": 0 if ds is None else int(ds.sizes.get("step", 0)),
        "garbage_lines": 0 if ds is None else int(ds.attrs.get("garbage_lines", 0)),
        "speed": speed_summary(run_dir, meta, settings.peaks),
        "metrics": {} if ds is None else metric_summary(ds),
        "plan": meta.get("plan", {}),
        "launch": {k: v for k, v in meta.items() if k != "plan"},
        "stage": _stage_summary(run_dir),
        "verdicts": _verdicts(run_dir, settings.slow_factor),
        "goodput": _goodput(run_dir),
    }


def _goodput(run_dir: Path) -> Mapping[str, Any]:
    """Where the run's wall time went (:mod:`ezpz_tui.core.watching.goodput`)."""
    from ezpz_tui.core.watching.goodput import as_summary, run_ledger

    return as_summary(run_ledger(run_dir))


def _verdicts(run_dir: Path, slow_factor: float) -> dict[str, Any]:
    from ezpz_tui.core.watching.verdicts import ended_verdicts

    return ended_verdicts(run_dir, slow_factor)


def _stage_summary(run_dir: Path) -> dict[str, Any] | None:
    """The staging's figures (``stage.json`` without each node's answer); None: not staged."""
    from ezpz_tui.core.runs.staged import read_stage

    record = read_stage(run_dir)
    return None if record is None else {k: v for k, v in record.items() if k != "nodes"}


def netcdf_ready(ds: Any) -> Any:
    """The dataset with names netCDF takes: a ``/`` (a group separator there) becomes ``.``,
    the name written kept in the variable's ``written_as``."""
    renames = {name: name.replace("/", ".") for name in ds.data_vars if "/" in name}
    out = ds.rename(renames)
    for old, new in renames.items():
        out[new].attrs.setdefault("written_as", ds[old].attrs.get("written_as", old))
    return out


def write_dataset(ds: Any, path: Path, fmt: str) -> None:
    """The rank x step dataset as netCDF, CSV (long: rank, step, then one column per metric)
    or parquet, through a temporary file so a reader never sees half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if fmt == "nc":
            netcdf_ready(ds).to_netcdf(tmp)
        else:
            frame = ds.to_dataframe().dropna(how="all").reset_index()
            if fmt == "csv":
                frame.to_csv(tmp, index=False)
            else:
                frame.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def report(summary: Mapping[str, Any]) -> str:
    """``report.md``: the summary for a person, one table."""
    speed = summary["speed"]
    lines = [
        f"# {summary['run_id']}",
        "",
        f"{summary['state']}, exit {summary['exit_code']}"
        + (f" ({summary['cause']})" if summary["cause"] else "")
        + f"; {summary['ranks']} ranks, {summary['steps']} steps",
        "",
        f"step time median {speed['step_time_s_median']} s, "
        f"tokens/s {speed['tokens_per_s_median']}, samples/s {speed['samples_per_s_median']}",
        "",
        *_goodput_lines(summary.get("goodput")),
        *_verdict_lines(summary.get("verdicts")),
        "| metric | first | last | min | max | mean last 10% | rank spread |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, m in summary["metrics"].items():
        cells = (m["first"], m["last"], m["min"], m["max"], m["mean_last_10pct"], m["last_spread"])
        lines.append(f"| {name} | " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def _verdict_lines(verdicts: Any) -> list[str]:
    """The stragglers and the collective's verdict, an item each, then a blank line."""
    if not isinstance(verdicts, Mapping):
        return []
    lines = [f"slow: rank {s['rank']} {s['why']}" for s in verdicts.get("stragglers") or ()]
    said = verdicts.get("collective")
    lines += list(said.get("lines") or ()) if isinstance(said, Mapping) else []
    return [f"- {line.strip()}" for line in lines] + ([""] if lines else [])


def _goodput_lines(goodput: Any) -> list[str]:
    """The goodput of the wall time and the seconds of each segment that took any, then a
    blank line."""
    if not isinstance(goodput, Mapping) or not isinstance(goodput.get("segments"), Mapping):
        return []
    fraction, wall = goodput.get("goodput"), goodput.get("wall_s")
    said = f"{fraction * 100:.1f}%" if isinstance(fraction, float) else "n/a"
    parts = [
        f"{name[:-2]} {seconds:.1f} s"
        for name, seconds in sorted(goodput["segments"].items(), key=lambda kv: -kv[1])
        if isinstance(seconds, int | float) and seconds > 0
    ]
    return [f"goodput {said} of {wall} s wall: " + ", ".join(parts), ""]


def _cell(value: float | str) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def finalize(run_dir: Path, settings: FinishSettings | None = None) -> list[Path]:
    """Write ``summary.json``, ``digest.json`` (what opening the run reads:
    :mod:`ezpz_tui.core.runs.digest`), ``metrics.nc`` when the run recorded metrics, and
    ``report.md``; returns their paths. Raises what reading or writing raises (the command says
    it in one line)."""
    from ezpz_tui.core.runs.digest import write_digest
    from ezpz_tui.core.watching.digesting import build_digest

    run = RunDir(run_dir)
    ds = _dataset(run_dir)
    summary = build_summary(run_dir, ds, settings)
    write_atomic(run.summary_json, (json.dumps(summary, indent=1) + "\n").encode())
    write_digest(run_dir, build_digest(run_dir, summary["verdicts"]))  # what opening it reads
    written = [run.summary_json, run.digest_json]
    if ds is not None:
        write_dataset(ds, run.metrics_nc, "nc")
        written.append(run.metrics_nc)
    write_atomic(run.report_md, report(summary).encode())
    return [*written, run.report_md]


def _dataset(run_dir: Path) -> Any | None:
    """The run's rank x step dataset; None when no rank wrote a metrics line (a smoke test, a
    program without History), which then costs no xarray: its import is most of the CPU a
    small run's finalizer takes from the next launch of a sweep."""
    from runtime.history import load_run_metrics

    sizes = []
    for path, _rank in metric_files(run_dir):
        with contextlib.suppress(OSError):
            sizes.append(path.stat().st_size)
    return load_run_metrics(run_dir) if any(sizes) else None


def export(run_dir: Path, fmt: str, out: Path | None = None) -> Path:
    """The run's dataset in ``fmt`` at ``out``, default :data:`EXPORTS` in the run directory
    (for csv that replaces the csv tracker's rank-0 file with every rank and metric)."""
    from runtime.history import load_run_metrics

    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ValueError("parquet needs pyarrow, which is not installed here") from None
    path = out or run_dir / EXPORTS[fmt]
    write_dataset(load_run_metrics(run_dir), path, fmt)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("run_dir", type=Path)
    add_settings_args(parser)
    args = parser.parse_args(argv)
    # Nobody waits on this process, and its seconds of CPU (xarray's import alone) would
    # otherwise be taken from whatever runs next on the node: the next launch of a sweep, its
    # ranks' start. It yields to them; an idle node finishes it as fast as ever.
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    try:
        finalize(args.run_dir, settings_from(args))
    except Exception as exc:  # nobody waits on this process: say it where the run's story is
        with (
            contextlib.suppress(OSError),
            open(RunDir(args.run_dir).launcher_log, "ab") as fh,
        ):
            fh.write(f"ezpz-tui: finalize: {type(exc).__name__}: {exc}\n".encode())
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
