"""Experiment trackers a :class:`runtime.History` feeds besides its JSONL: W&B, TensorBoard,
MLflow and one CSV file.

Which ones come from ``History(trackers=[...])``, else ``EZPZ_TRACKERS=wandb,tensorboard`` in the
environment (so a relaunch switches them with no code change). Only rank 0 feeds them unless
``all_ranks``: every rank keeps writing its own JSONL either way. Each tracker writes under the
run directory (the names are :mod:`runtime.rundir`'s) unless its own settings say otherwise
(``MLFLOW_TRACKING_URI``, ``WANDB_MODE``).

A tracker is imported only when asked for, by the rank that opens it: this module needs only
the standard library. One that cannot be opened (not installed, no network, bad credentials) or
that raises while logging writes one line on the rank's stderr (its log, under the capture
wrapper) and is dropped; the run goes on, because losing a dashboard must not lose the training.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from runtime.rundir import RunDir

TRACKERS_VAR = "EZPZ_TRACKERS"
KNOWN = ("wandb", "tensorboard", "mlflow", "csv")
NETWORK_PROBE_S = 2.0  # how long W&B's server gets to answer before the run goes offline
MLFLOW_EXPERIMENT = "ezpz"


class Tracker(Protocol):
    """What History asks of a tracker: numbers per step, a flush, an end."""

    name: str
    where: str  # its output, for the rank's log and the TUI: a directory or a URI

    def log(self, step: int, metrics: Mapping[str, float], timestamp: float) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


def say(message: str) -> None:
    """One line on the rank's stderr (its log under the capture wrapper); never raises."""
    with contextlib.suppress(OSError, ValueError):
        print(f"ezpz: {message}", file=sys.stderr, flush=True)


def requested(names: Iterable[str] | str | None = None) -> list[str]:
    """The tracker names asked for: ``names``, else ``EZPZ_TRACKERS``; lower-cased, each once."""
    if names is None:
        names = os.environ.get(TRACKERS_VAR, "")
    if isinstance(names, str):
        names = names.replace(" ", ",").split(",")
    out: list[str] = []
    for name in names:
        word = name.strip().lower()
        if word and word not in out:
            out.append(word)
    return out


def open_trackers(names: Sequence[str], run_dir: Path, rank: int, all_ranks: bool) -> list[Tracker]:
    """Open each named tracker; one that fails is named in one line and left out."""
    opened: list[Tracker] = []
    for name in names:
        opener = OPENERS.get(name)
        if opener is None:
            say(f"tracker {name!r} is unknown (known: {', '.join(KNOWN)}); not used")
            continue
        try:
            tracker = opener(run_dir, rank, all_ranks)
        except Exception as exc:  # any failure of a tracker must leave the run going
            say(f"tracker {name} is off: {_why(exc)}")
            continue
        opened.append(tracker)
        say(f"tracker {name} -> {tracker.where}")
    return opened


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def failed(tracker: Tracker, exc: BaseException) -> None:
    """The line for a tracker dropped because it raised while logging or closing."""
    say(f"tracker {tracker.name} stopped: {_why(exc)} (the run goes on; the JSONL has it all)")


def read_plan(run_dir: Path) -> dict[str, Any]:
    """``run.toml`` as a dict (the plan trackers record as config); empty when unreadable."""
    try:
        import tomllib as toml
    except ImportError:  # Python 3.10: tomli is a dependency there
        try:
            import tomli as toml
        except ImportError:
            return {}
    try:
        with open(RunDir(run_dir).run_toml, "rb") as fh:
            data = toml.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def flat_params(plan: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """The plan as ``key.sub = text`` pairs: what MLflow params (strings) can hold."""
    out: dict[str, str] = {}
    for key, value in plan.items():
        if isinstance(value, Mapping):
            out.update(flat_params(value, f"{prefix}{key}."))
        else:
            text = " ".join(map(str, value)) if isinstance(value, list) else str(value)
            out[f"{prefix}{key}"] = text[:500]  # MLflow's limit on a param's value
    return out


def _run_name(run_dir: Path, rank: int, all_ranks: bool) -> str:
    return f"{run_dir.name}-rank{rank}" if all_ranks else run_dir.name


# --- CSV ------------------------------------------------------------------------------------


class CsvTracker:
    """``metrics.csv``: a header of the first record's metrics, one row per record.

    With ``all_ranks`` every rank appends to the same file with a ``rank`` column; the header is
    put in place by a hard link of a file that already holds it, so no rank's row can land
    above it. A metric first seen after the header is named once in the log and kept only in
    the JSONL (``ezpz-tui export RUN --format csv`` writes every metric).
    """

    name = "csv"

    def __init__(self, run_dir: Path, rank: int, all_ranks: bool) -> None:
        import csv  # here: the TUI imports this module for the names, and csv costs its start

        self._csv_writer = csv.writer
        self.path = RunDir(run_dir).metrics_csv
        self.where = str(self.path)
        self.rank, self.all_ranks = rank, all_ranks
        self._columns: list[str] | None = None
        self._rows = io.StringIO()
        self._writer = csv.writer(self._rows, lineterminator="\n")
        self._fd: int | None = None
        self._unknown: set[str] = set()

    def _start(self, metrics: Mapping[str, float]) -> None:
        self._columns = list(metrics)
        lead = ["rank", "step", "timestamp"] if self.all_ranks else ["step", "timestamp"]
        header = io.StringIO()
        self._csv_writer(header, lineterminator="\n").writerow(lead + self._columns)
        tmp = self.path.with_name(f".{self.path.name}.{self.rank}.{os.getpid()}")
        tmp.write_text(header.getvalue())
        try:
            os.link(tmp, self.path)  # atomic: whoever is first, the file has its header
        except FileExistsError:
            if not self.all_ranks:  # a rerun into the same directory: start the file afresh
                os.replace(tmp, self.path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)

    def log(self, step: int, metrics: Mapping[str, float], timestamp: float) -> None:
        if self._columns is None:
            self._start(metrics)
        assert self._columns is not None
        new = set(metrics).difference(self._columns, self._unknown)
        if new:
            self._unknown |= new
            say(f"csv: {', '.join(sorted(new))} came after the header; only in the JSONL")
        lead = [self.rank, step, timestamp] if self.all_ranks else [step, timestamp]
        self._writer.writerow(lead + [metrics.get(c, "") for c in self._columns])

    def flush(self) -> None:
        data = self._rows.getvalue()
        if data and self._fd is not None:
            self._rows.seek(0)
            self._rows.truncate()
            os.write(self._fd, data.encode())

    def close(self) -> None:
        self.flush()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


# --- TensorBoard -----------------------------------------------------------------------------


def _summary_writer() -> Any:
    """torch's SummaryWriter (needs the tensorboard package), else tensorboardX's."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        from tensorboardX import SummaryWriter
    return SummaryWriter


class TensorBoardTracker:
    """Event files under ``tensorboard/`` (``tensorboard/rank-N`` per rank with all_ranks)."""

    name = "tensorboard"

    def __init__(self, run_dir: Path, rank: int, all_ranks: bool) -> None:
        folder = RunDir(run_dir).tensorboard_dir
        self.where = str(folder / f"rank-{rank}" if all_ranks else folder)
        self._writer = _summary_writer()(log_dir=self.where)

    def log(self, step: int, metrics: Mapping[str, float], timestamp: float) -> None:
        for key, value in metrics.items():
            self._writer.add_scalar(key, value, global_step=step, walltime=timestamp)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


# --- MLflow ------------------------------------------------------------------------------------


class MlflowTracker:
    """An MLflow run in experiment ``ezpz``: the plan as params, metrics per step, logged in
    batches. The tracking URI is ``MLFLOW_TRACKING_URI``, else a file store at ``mlruns/``."""

    name = "mlflow"

    def __init__(self, run_dir: Path, rank: int, all_ranks: bool) -> None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI")
        if not uri:
            uri = RunDir(run_dir).mlruns_dir.as_uri()
            # MLflow 3 keeps the file store but refuses it unless told: a database would need
            # a server or SQLite locks, which shared filesystems do not give reliably.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.where = uri
        self._client = MlflowClient(tracking_uri=uri)
        found = self._client.get_experiment_by_name(MLFLOW_EXPERIMENT)
        experiment = (
            found.experiment_id if found else self._client.create_experiment(MLFLOW_EXPERIMENT)
        )
        tags = {"ezpz.run_dir": str(run_dir), "ezpz.rank": str(rank)}
        name = _run_name(run_dir, rank, all_ranks)
        self._run = self._client.create_run(experiment, run_name=name, tags=tags).info.run_id
        params = [Param(k, v) for k, v in flat_params(read_plan(run_dir)).items()]
        for start in range(0, len(params), 100):  # MLflow takes 100 params per batch
            self._client.log_batch(self._run, params=params[start : start + 100])
        self._pending: list[Any] = []

    def log(self, step: int, metrics: Mapping[str, float], timestamp: float) -> None:
        from mlflow.entities import Metric

        ms = int(timestamp * 1000)
        self._pending.extend(Metric(k, v, ms, step) for k, v in metrics.items())

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        for start in range(0, len(pending), 1000):  # MLflow takes 1000 metrics per batch
            self._client.log_batch(self._run, metrics=pending[start : start + 1000])

    def close(self) -> None:
        self.flush()
        self._client.set_terminated(self._run)


# --- W&B ---------------------------------------------------------------------------------------


def wandb_reachable(timeout: float = NETWORK_PROBE_S) -> bool:
    """Whether W&B's server (``WANDB_BASE_URL`` or api.wandb.ai) takes a TCP connection: compute
    nodes usually have no route out, and an online init there would retry for minutes."""
    import socket
    from urllib.parse import urlparse

    url = urlparse(os.environ.get("WANDB_BASE_URL") or "https://api.wandb.ai")
    port = url.port or (80 if url.scheme == "http" else 443)
    try:
        with socket.create_connection((url.hostname or "api.wandb.ai", port), timeout=timeout):
            return True
    except OSError:
        return False


class WandbTracker:
    """A W&B run with the run id, name and plan as config, under ``wandb/`` in the run
    directory. ``WANDB_MODE`` is obeyed; unset, the run goes offline when the server cannot be
    reached, and the rank's log names the offline run for a later ``wandb sync``."""

    name = "wandb"

    def __init__(self, run_dir: Path, rank: int, all_ranks: bool) -> None:
        import wandb

        mode = os.environ.get("WANDB_MODE") or ("online" if wandb_reachable() else "offline")
        plan = read_plan(run_dir)
        run_id = _run_name(run_dir, rank, all_ranks)
        self._run = wandb.init(
            id=run_id,
            name=run_id,
            group=run_dir.name if all_ranks else None,
            dir=str(run_dir),
            mode=mode,
            config={"ezpz": plan, "rank": rank},
            resume="allow",
            settings=wandb.Settings(console="off", silent=True),
        )
        folder = Path(self._run.dir).parent  # .../wandb/offline-run-<time>-<id>
        self.where = str(folder)
        if mode == "offline":
            say(f"wandb is offline; upload the run later with: wandb sync {folder}")

    def log(self, step: int, metrics: Mapping[str, float], timestamp: float) -> None:
        self._run.log(dict(metrics), step=step)

    def flush(self) -> None:
        """W&B sends from its own process; nothing to push here."""

    def close(self) -> None:
        self._run.finish()


OPENERS: dict[str, Callable[[Path, int, bool], Tracker]] = {
    "csv": CsvTracker,
    "tensorboard": TensorBoardTracker,
    "mlflow": MlflowTracker,
    "wandb": WandbTracker,
}
"""Each tracker's opener by name: the one place a tracker is looked up, and so where a test puts
one whose import fails."""
