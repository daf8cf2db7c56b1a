"""Run directories: create them, record their state, list and read them back.

Layout and meaning are fixed by DESIGN.md section 3. Decisions made here:

* Run ids are ``YYYYmmdd-HHMMSS-mmm-tp<T>pp<P>cp<C>`` in local time to the millisecond, so a
  plain ``ls`` sorts them and a person can read when and what. A collision (same millisecond,
  same sizes, another thread or process or node on a shared filesystem) is settled by the
  exclusive ``mkdir`` itself and a ``-2``, ``-3``... suffix: mkdir is atomic on local
  filesystems, NFS, Lustre and GPFS, so no lock file is needed. Listing order is by the creation
  epoch recorded in ``run.toml``, not by the id, so a DST change cannot reorder runs.
* ``state.json`` is rewritten whole through a temporary file and ``os.replace``, so a reader on
  any node sees the old or the new state, never half of one. Writes merge into what is there, so
  a transition keeps the facts recorded before it (pid, start time).
* Only ``pending``, ``running``, ``succeeded``, ``failed`` and ``stopped`` are ever written.
  Readers may also get two derived states that are never written back, because the reader may be
  wrong and the directory belongs to whoever started the run:

  - ``unknown``: no readable ``state.json`` (a run from ezpz itself, a crash between files, a
    corrupt file); ``reason`` says which.
  - ``lost``: the file says pending or running but nobody is left to record the end. On the
    machine that started the run this is exact: the launcher and the supervising process are
    both gone (pid plus kernel start time, so a reused pid does not count as alive). From
    another node of a shared filesystem processes cannot be seen, so the supervisor's heartbeat
    (``updated``, rewritten every :data:`HEARTBEAT_S`) decides: older than
    :data:`STALE_AFTER_S` means lost.
  A launcher still alive after its supervisor died stays ``running`` (it is), with a ``reason``
  saying that its end will not be recorded.
* Any direct subdirectory of the outputs directory that looks like a run (``run.toml``,
  ``state.json``, ``logs/``, ``status/``, ``metrics/`` or a ``*.jsonl`` file) is listed; runs made
  by ezpz itself show up as ``unknown`` so their metrics can still be opened. Anything else is
  skipped, and listing never raises.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import tomli_w

from ezpz_tui import __version__
from runtime.atomic import write_atomic

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

STATES = ("pending", "running", "succeeded", "failed", "stopped")
FINAL_STATES = frozenset({"succeeded", "failed", "stopped"})
UNKNOWN = "unknown"
LOST = "lost"

# The supervisor refreshes ``updated`` this often while a run is live; readers on other nodes
# call a live state lost once it is this old. Generous, because node clocks drift and a TUI can
# be suspended for a while (its runs are then reported lost until it resumes).
HEARTBEAT_S = 10.0
STALE_AFTER_S = 120.0

RUN_TOML = "run.toml"
STATE_JSON = "state.json"
SUBDIRS = ("logs", "status", "metrics")
_RESERVED = frozenset({"run_id", "created", "created_epoch", "parent", "version", "sizes", "plan"})
_MAX_STATE_BYTES = 1 << 20
_MAX_COLLISIONS = 10_000


class RunStoreError(Exception):
    """A run cannot be found or read; the message is meant for the user as is."""


@dataclass(frozen=True)
class RunSummary:
    """One line of a runs table; every field but ``run_id``/``path``/``state`` may be unknown."""

    run_id: str
    path: Path
    state: str
    exit_code: int | None
    signal: str | None
    reason: str | None
    created: float  # epoch; the directory's mtime for runs without a run.toml
    tp: int | None
    pp: int | None
    cp: int | None
    dp: int | None
    world_size: int | None
    parent: str | None
    command: list[str] | None


# --- identity of processes and machines -------------------------------------------------------


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/PID/stat`` that process bookkeeping needs."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int
    start_ticks: int


def proc_stat(pid: int) -> ProcStat | None:
    """Parse ``/proc/PID/stat``; ``None`` when the process is gone or there is no procfs."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except OSError:
        return None
    # The command name may hold spaces and parentheses; everything after the last ')' is fixed.
    rest = raw[raw.rfind(")") + 2 :].split()
    try:
        return ProcStat(pid, rest[0], int(rest[1]), int(rest[2]), int(rest[3]), int(rest[19]))
    except (IndexError, ValueError):
        return None


def process_alive(pid: int, start_ticks: int | None) -> bool:
    """Whether that very process still runs: a zombie or a reused pid does not count."""
    if pid <= 0:
        return False
    stat = proc_stat(pid)
    if stat is None:
        if os.path.isdir("/proc/self"):
            return False
        try:  # no procfs (macOS): existence is all one can learn
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    if stat.state in ("Z", "X"):
        return False
    return start_ticks is None or stat.start_ticks == start_ticks


def _read_small(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def _pid_namespace() -> int | None:
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return None


def machine_identity() -> dict[str, Any]:
    """Host, boot and pid namespace: pids can only be checked where all three match."""
    return {
        "host": socket.gethostname(),
        "boot_id": _read_small("/proc/sys/kernel/random/boot_id"),
        "pid_ns": _pid_namespace(),
    }


def owner_identity() -> dict[str, Any]:
    """Fields that let any later reader decide whether this process is still alive."""
    stat = proc_stat(os.getpid())
    return {
        **machine_identity(),
        "supervisor_pid": os.getpid(),
        "supervisor_start_ticks": stat.start_ticks if stat else None,
    }


# --- state.json -------------------------------------------------------------------------------


def read_recorded_state(run_dir: Path) -> dict[str, Any]:
    """The state as written, or ``unknown`` with a reason; no liveness check, never raises."""
    path = Path(run_dir) / STATE_JSON
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_STATE_BYTES + 1)
    except FileNotFoundError:
        return {"state": UNKNOWN, "reason": "no state.json (not started by ezpz-tui?)"}
    except OSError as exc:
        return {"state": UNKNOWN, "reason": f"cannot read state.json: {exc.strerror or exc}"}
    if len(raw) > _MAX_STATE_BYTES:
        return {"state": UNKNOWN, "reason": "state.json is implausibly large"}
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        return {"state": UNKNOWN, "reason": f"state.json is not valid JSON ({exc})"}
    if not isinstance(data, dict):
        return {"state": UNKNOWN, "reason": "state.json does not hold a JSON object"}
    if data.get("state") not in STATES:
        return {
            **data,
            "state": UNKNOWN,
            "reason": f"state.json has an unrecognised state {data.get('state')!r}",
        }
    return data


def write_state(run_dir: Path, state: str, **fields: Any) -> dict[str, Any]:
    """Merge ``fields`` into the run's state and set ``state``; returns what was written.

    Merging keeps what earlier transitions recorded (pid, start time) without every writer
    having to carry it along; it assumes one writer per run, the run's supervisor. ``updated``
    is always refreshed: it is the heartbeat other nodes judge liveness by.
    """
    if state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}, not {state!r}")
    current = read_recorded_state(run_dir)
    if current.get("state") == UNKNOWN:
        current = {k: v for k, v in current.items() if k not in ("state", "reason")}
    data = {**current, **fields, "state": state, "updated": time.time()}
    payload = json.dumps(data, indent=1, allow_nan=False).encode("utf-8") + b"\n"
    write_atomic(Path(run_dir) / STATE_JSON, payload)
    return data


def read_state(run_dir: Path, now: float | None = None) -> dict[str, Any]:
    """The run's state as a reader should see it; never raises.

    ``lost`` and ``unknown`` (see the module docstring) are derived here and never written,
    since the supervisor may still be alive somewhere this reader cannot see.
    """
    data = read_recorded_state(run_dir)
    if data["state"] in ("pending", "running"):
        lost, reason = _liveness(data, time.time() if now is None else now)
        if lost:
            return {**data, "state": LOST, "recorded_state": data["state"], "reason": reason}
        if reason:
            return {**data, "reason": reason}
    return data


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _differs(a: Any, b: Any) -> bool:
    return a is not None and b is not None and a != b


def _liveness(data: Mapping[str, Any], now: float) -> tuple[bool, str | None]:
    """Whether a pending/running record is lost, and a reason worth showing either way."""
    here = machine_identity()
    if data.get("host") != here["host"] or _differs(data.get("pid_ns"), here["pid_ns"]):
        # Another node (or container): its processes are invisible, only the heartbeat speaks.
        updated = data.get("updated")
        if not isinstance(updated, (int, float)) or now - updated <= STALE_AFTER_S:
            return False, None
        host = data.get("host") or "another host"
        return (
            True,
            f"no heartbeat from the supervisor on {host} for {(now - updated) / 60:.0f} min",
        )
    if _differs(data.get("boot_id"), here["boot_id"]):
        return True, f"{here['host']} has rebooted since the run was {data['state']}"
    owner = _int_or_none(data.get("supervisor_pid"))
    owner_alive = owner is None or process_alive(
        owner, _int_or_none(data.get("supervisor_start_ticks"))
    )
    launcher = _int_or_none(data.get("launcher_pid"))
    if launcher is not None and process_alive(
        launcher, _int_or_none(data.get("launcher_start_ticks"))
    ):
        if owner_alive:
            return False, None
        return (
            False,
            f"supervisor (pid {owner}) exited: the run goes on, its end will not be recorded",
        )
    if owner_alive:  # about to record the end, or not yet started the launcher
        return False, None
    if launcher is None:
        return True, f"process {owner} that created the run exited before starting it"
    return True, (
        f"launcher (pid {launcher}) and supervisor (pid {owner}) exited without recording "
        "how the run ended"
    )


# --- run.toml ---------------------------------------------------------------------------------


def _tomlable(value: Any, where: str) -> Any:
    """TOML has no null: drop ``None`` entries; paths become strings, tuples lists."""
    if isinstance(value, Mapping):
        return {str(k): _tomlable(v, f"{where}.{k}") for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_tomlable(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (str, int, float, bool, datetime)):
        return value
    raise ValueError(f"cannot record {where} = {value!r} in run.toml")


def _dump_toml(data: Mapping[str, Any]) -> bytes:
    return tomli_w.dumps(_tomlable(data, "run")).encode("utf-8")


def read_run_toml(run_dir: Path) -> dict[str, Any]:
    """All of ``run.toml``; :class:`RunStoreError` with a readable message when unusable."""
    path = Path(run_dir) / RUN_TOML
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunStoreError(f"{run_dir} has no {RUN_TOML}") from None
    except OSError as exc:
        raise RunStoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:  # TOMLDecodeError and UnicodeDecodeError both are
        raise RunStoreError(f"{path} is not valid TOML: {exc}") from None


def _check_meta(meta: Mapping[str, Any]) -> None:
    clash = sorted(_RESERVED & set(meta))
    if clash:
        raise ValueError(f"run.toml entries {', '.join(clash)} are set by the run store")


def update_run_meta(run_dir: Path, meta: Mapping[str, Any]) -> None:
    """Add top-level entries to ``run.toml``; used to record what was actually launched.

    The launcher argv can only be built once the run directory exists, so it arrives after
    :meth:`RunStore.create`. Identity fields (id, creation time, plan, sizes) cannot be changed.
    """
    _check_meta(meta)
    path = Path(run_dir) / RUN_TOML
    data = read_run_toml(run_dir) if path.exists() else {}
    data.update(meta)
    write_atomic(path, _dump_toml(data))


# --- sizes ------------------------------------------------------------------------------------


def _positive(value: Any) -> int | None:
    value = _int_or_none(value)
    return value if value is not None and value > 0 else None


def _sizes(plan: Mapping[str, Any], sizes: Mapping[str, Any] | None) -> dict[str, int]:
    """TP/PP/CP (1 when unknown) plus world size and DP when they can be known."""
    sources: list[Mapping[str, Any]] = [plan]
    if isinstance(plan.get("sizes"), Mapping):
        sources.append(plan["sizes"])
    if sizes is not None:
        sources.append(sizes)
    merged: dict[str, int] = {}
    for source in sources:
        for key in ("tp", "pp", "cp", "dp", "world_size"):
            value = _positive(source.get(key))
            if value is not None:
                merged[key] = value
    out = {key: merged.get(key, 1) for key in ("tp", "pp", "cp")}
    model = out["tp"] * out["pp"] * out["cp"]
    world = merged.get("world_size")
    if world is None and "dp" in merged:
        world = merged["dp"] * model
    if world is not None:
        out["world_size"] = world
        if world % model == 0:
            out["dp"] = world // model
    return out


def _size_tag(sizes: Mapping[str, int]) -> str:
    return f"tp{sizes['tp']}pp{sizes['pp']}cp{sizes['cp']}"


# --- the store --------------------------------------------------------------------------------

_NATURAL = re.compile(r"(\d+)")


def _natural(text: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in _NATURAL.split(text))


def _looks_like_run(path: Path) -> bool:
    if (path / RUN_TOML).is_file() or (path / STATE_JSON).is_file():
        return True
    if any((path / sub).is_dir() for sub in SUBDIRS):
        return True
    try:
        return any(p.suffix == ".jsonl" for p in path.iterdir())
    except OSError:
        return False


def _str_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


class RunStore:
    """The run directories under one outputs directory."""

    def __init__(self, outputs: Path) -> None:
        self.outputs = Path(outputs).expanduser().absolute()

    def create(
        self,
        plan: Mapping[str, Any],
        sizes: Mapping[str, int] | None = None,
        *,
        parent: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Path:
        """Make a fresh run directory holding ``run.toml`` and a ``pending`` state.

        ``sizes`` (tp, pp, cp, optionally world_size or dp) override sizes found in ``plan``
        and name the run. ``meta`` adds top-level ``run.toml`` entries (scheduler, job id, hosts,
        launcher...). Raises :class:`RunStoreError` when the directory cannot be made, and
        ``ValueError`` for a caller's mistake (a reserved ``meta`` key, a value TOML cannot hold).
        """
        meta = dict(meta or {})
        _check_meta(meta)
        # Fail on values TOML cannot hold before a directory exists that would stay half made.
        recorded_plan = _tomlable(plan, "plan")
        recorded_meta = _tomlable(meta, "run")
        resolved = _sizes(plan, sizes)
        created = datetime.now().astimezone()
        run_dir = self._mkdir_unique(
            f"{created:%Y%m%d-%H%M%S}-{created.microsecond // 1000:03d}-{_size_tag(resolved)}"
        )
        try:
            for sub in SUBDIRS:
                (run_dir / sub).mkdir()
            record = {
                "run_id": run_dir.name,
                "created": created.isoformat(timespec="milliseconds"),
                "created_epoch": created.timestamp(),
                "parent": parent,
                "version": __version__,
                **recorded_meta,
                "sizes": resolved,
                "plan": recorded_plan,
            }
            write_atomic(run_dir / RUN_TOML, _dump_toml(record))
            write_state(
                run_dir,
                "pending",
                run_id=run_dir.name,
                created=created.timestamp(),
                **owner_identity(),
            )
        except OSError as exc:
            raise RunStoreError(f"cannot set up run directory {run_dir}: {exc}") from None
        return run_dir

    def _mkdir_unique(self, base: str) -> Path:
        try:
            self.outputs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunStoreError(
                f"cannot create outputs directory {self.outputs}: {exc.strerror or exc}"
            ) from None
        for n in range(1, _MAX_COLLISIONS):
            path = self.outputs / (base if n == 1 else f"{base}-{n}")
            try:
                os.mkdir(path)
            except FileExistsError:
                continue
            except OSError as exc:
                raise RunStoreError(
                    f"cannot create run directory {path}: {exc.strerror or exc}"
                ) from None
            return path
        raise RunStoreError(f"too many runs named {base} in {self.outputs}")

    def resolve(self, run: str | Path) -> Path:
        """A run directory from a run id, a path, or a unique prefix of a run id."""
        text = os.fspath(run).strip()
        if not text:
            raise RunStoreError("no run given")
        if (self.outputs / text).is_dir():
            return self.outputs / text
        if Path(text).expanduser().is_dir():
            return Path(text).expanduser().absolute()
        try:
            matches = sorted(
                p for p in self.outputs.iterdir() if p.name.startswith(text) and p.is_dir()
            )
        except OSError:
            matches = []
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise RunStoreError(f"no run {text!r} in {self.outputs}")
        names = ", ".join(p.name for p in matches[:5])
        more = f" and {len(matches) - 5} more" if len(matches) > 5 else ""
        raise RunStoreError(f"{text!r} matches several runs: {names}{more}")

    def read_plan(self, run: str | Path) -> dict[str, Any]:
        """The launch plan a run was made from, to relaunch or compare it."""
        data = read_run_toml(self.resolve(run))
        plan = data.get("plan")
        if not isinstance(plan, dict):
            raise RunStoreError(f"{data.get('run_id', run)} has no [plan] in its {RUN_TOML}")
        return plan

    def list_runs(self) -> list[RunSummary]:
        """Every run under the outputs directory, newest first; never raises."""
        try:
            entries = list(os.scandir(self.outputs))
        except OSError:
            return []
        runs: list[RunSummary] = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if not entry.is_dir() or not _looks_like_run(Path(entry.path)):
                    continue
                runs.append(self._summary(Path(entry.path)))
            except OSError:
                continue
        runs.sort(key=lambda r: (r.created, _natural(r.run_id)), reverse=True)
        return runs

    def _summary(self, path: Path) -> RunSummary:
        try:
            record = read_run_toml(path)
        except RunStoreError:
            record = {}
        state = read_state(path)
        sizes = record.get("sizes") if isinstance(record.get("sizes"), dict) else {}
        plan = record.get("plan") if isinstance(record.get("plan"), dict) else {}
        created = record.get("created_epoch")
        if not isinstance(created, (int, float)):
            created = path.stat().st_mtime
        launch = record.get("launch") if isinstance(record.get("launch"), dict) else {}
        return RunSummary(
            run_id=path.name,
            path=path,
            state=state["state"],
            exit_code=_int_or_none(state.get("exit_code")),
            signal=state.get("signal_name") if isinstance(state.get("signal_name"), str) else None,
            reason=state.get("reason") if isinstance(state.get("reason"), str) else None,
            created=float(created),
            tp=_positive(sizes.get("tp")),
            pp=_positive(sizes.get("pp")),
            cp=_positive(sizes.get("cp")),
            dp=_positive(sizes.get("dp")),
            world_size=_positive(sizes.get("world_size")),
            parent=record.get("parent") if isinstance(record.get("parent"), str) else None,
            command=_str_list(record.get("command"))
            or _str_list(plan.get("command"))
            or _str_list(launch.get("argv")),
        )
