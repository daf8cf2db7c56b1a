"""Run directories: create them, record their launch, list them and read them back.

What the files hold is :mod:`runtime.rundir`'s business; what is decided here:

* Run ids are ``YYYYmmdd-HHMMSS-mmm-tp<T>pp<P>cp<C>`` in local time to the millisecond, so a
  plain ``ls`` sorts them and a person can read when and what. A collision (same millisecond,
  same sizes, another thread, process or node on a shared filesystem) is settled by the
  exclusive ``mkdir`` itself and a ``-2``, ``-3``... suffix: mkdir is atomic on local
  filesystems, NFS, Lustre and GPFS, so no lock file is needed. Runs are listed by the creation
  epoch they record, not by id, so a DST change cannot reorder them.
* :meth:`RunStore.create` makes the directory with the plan, the allocation facts and a
  ``pending`` state; :func:`record_launch` adds the launcher command built for that directory
  (and writes the hostfile it names) just before it starts.
* Runs are listed in the state a reader should believe
  (:func:`ezpz_tui.core.runs.liveness.run_state`), ``lost`` included.
* Every filesystem error while a run is made (outputs a file, under a file, read-only, full)
  is an :class:`~ezpz_tui.core.launching.outputs.OutputsError` naming the outputs directory and
  the cause; a run directory left half made by one is removed. A made run holds a small reserve
  (:mod:`ezpz_tui.core.launching.reserve`) so its end can be recorded on a disk that fills up.
* Any direct subdirectory that looks like a run (:meth:`runtime.rundir.RunDir.looks_like_run`)
  is listed, and ezpz's own runs one level further down (``<module>/<timestamp>``, listed by
  that relative id) with the state their files show
  (:mod:`ezpz_tui.core.runs.ezpz_layout`); listing never raises.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import tomli_w

from ezpz_tui import __version__
from ezpz_tui.core.launching.launcher import Launch
from ezpz_tui.core.launching.outputs import OutputsError, cause, creating, listing
from ezpz_tui.core.launching.processes import supervised_here
from ezpz_tui.core.launching.reserve import make_reserve
from ezpz_tui.core.runs.ezpz_layout import ezpz_runs_below
from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.record import RunStoreError, positive_int, read_record, read_run_toml
from runtime.atomic import write_atomic
from runtime.rundir import (
    FINAL,
    RUN_TOML,
    RunDir,
    RunState,
    State,
    write_state,
)

_RESERVED = frozenset({"run_id", "created", "created_epoch", "parent", "version", "sizes", "plan"})
_MAX_COLLISIONS = 10_000

__all__ = ["OutputsError", "RunStore", "RunSummary"]


@dataclass(frozen=True)
class RunSummary:
    """One line of a runs table; every field but ``run_id``/``path``/``state`` may be unknown."""

    run_id: str
    path: Path
    state: State
    exit_code: int | None
    signal: str | None
    reason: str | None
    created: float  # epoch; the directory's mtime for runs that do not record it
    tp: int | None
    pp: int | None
    cp: int | None
    dp: int | None
    world_size: int | None
    parent: str | None
    command: list[str] | None
    job_id: str | None = None  # the scheduler's job the run ran in
    submission: str | None = None  # the ``ezpz-tui submit`` that queued it
    queued: bool = False  # a submitted job whose run directory is not made yet
    cause: str | None = None  # a failed run's first cause, as its supervisor recorded it
    problem: str | None = None  # why its run.toml cannot be read, when it cannot


# --- the run's record -------------------------------------------------------------------------


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
    raise ValueError(f"cannot record {where} = {value!r} in {RUN_TOML}")


def _dump_toml(data: Mapping[str, Any]) -> bytes:
    return tomli_w.dumps(_tomlable(data, "run")).encode("utf-8")


def _check_meta(meta: Mapping[str, Any]) -> None:
    clash = sorted(_RESERVED & set(meta))
    if clash:
        raise ValueError(f"{RUN_TOML} entries {', '.join(clash)} are set by the run store")


def update_run_meta(run_dir: Path, meta: Mapping[str, Any]) -> None:
    """Add top-level entries to what a run records; identity fields (id, creation time, plan,
    sizes) cannot be changed."""
    _check_meta(meta)
    path = RunDir(run_dir).run_toml
    data = read_run_toml(run_dir) if path.exists() else {}
    data.update(meta)
    write_atomic(path, _dump_toml(data))


def record_launch(launch: Launch) -> None:
    """Record what is about to run in ``launch.run_dir``, and write the hostfile it names.

    The launcher argv names the run directory, so it can only be built once
    :meth:`RunStore.create` has made one; it is recorded before it starts, so a run that cannot
    start still says what was tried. :class:`RunStoreError` when the disk refuses.
    """
    run = RunDir(launch.run_dir)
    try:
        if launch.hostfile_hosts and launch.hostfile is not None:
            write_atomic(launch.hostfile, "".join(f"{h}\n" for h in launch.hostfile_hosts).encode())
        from ezpz_tui.core.launching.provenance import provenance

        where = launch.cwd or Path.cwd()
        cwd = str(where)
        update_run_meta(
            run.path,
            {
                "launch": {"argv": launch.argv, "env": launch.env, "cwd": cwd},
                "provenance": _tomlable(provenance(launch.argv, where), "provenance"),
            },
        )
    except OSError as exc:
        raise RunStoreError(f"cannot record the launch in {run.path}: {cause(exc)}") from None


# --- sizes ------------------------------------------------------------------------------------


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
            value = positive_int(source.get(key))
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


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _str_list(value: Any) -> list[str] | None:
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def state_signature(path: Path) -> tuple[int, int, int] | None:
    """The identity of a run's ``state.json`` (inode, mtime, size), None without one: equal
    signatures mean the supervisor has not written it since."""
    try:
        st = os.stat(RunDir(path).state_json)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class RunStore:
    """The run directories under one outputs directory."""

    def __init__(self, outputs: Path) -> None:
        self.outputs = Path(outputs).expanduser().absolute()
        # Runs whose written state is final, by the identity of that state.json: a screen
        # lists the outputs every 2 s, and an ended run's summary cannot change unless its
        # state.json is rewritten (which gives it a new inode or mtime).
        self._ended: dict[Path, tuple[tuple[int, int, int], RunSummary]] = {}

    def create(
        self,
        plan: Mapping[str, Any],
        sizes: Mapping[str, int] | None = None,
        *,
        parent: str | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Path:
        """Make a fresh run directory recording ``plan``, with a ``pending`` state.

        ``sizes`` (tp, pp, cp, optionally world_size or dp) override sizes found in ``plan``
        and name the run. ``meta`` adds top-level entries to the record (scheduler, job id,
        hosts...). Raises :class:`OutputsError` when the directory cannot be made or filled
        (nothing is left behind then), and
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
        run = RunDir(run_dir)
        try:
            run.make_folders()
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
            write_atomic(run.run_toml, _dump_toml(record))
            pending = RunState(State.PENDING, run_id=run_dir.name, created=created.timestamp())
            write_state(run_dir, supervised_here(pending))
            make_reserve(run_dir)
        except OSError as exc:
            with contextlib.suppress(OSError):
                shutil.rmtree(run_dir)
            raise creating(self.outputs, exc) from None
        return run_dir

    def _mkdir_unique(self, base: str) -> Path:
        try:
            self.outputs.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # FileExistsError too: the outputs path is a file
            raise creating(self.outputs, exc) from None
        for n in range(1, _MAX_COLLISIONS):
            path = self.outputs / (base if n == 1 else f"{base}-{n}")
            try:
                os.mkdir(path)
            except FileExistsError:
                continue
            except OSError as exc:
                raise creating(self.outputs, exc) from None
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
        except FileNotFoundError:
            matches = []
        except OSError as exc:  # the outputs path is a file, under one, or unreadable
            raise listing(self.outputs, exc) from None
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
                if not entry.is_dir():
                    continue
                if RunDir(Path(entry.path)).looks_like_run():
                    runs.append(self._summary(Path(entry.path)))
                else:  # ezpz's outputs/<module>/<timestamp>
                    runs.extend(map(self._summary, ezpz_runs_below(entry.path)))
            except OSError:
                continue
        runs.sort(key=lambda r: (r.created, _natural(r.run_id)), reverse=True)
        return runs

    def _summary(self, path: Path) -> RunSummary:
        """The run's summary, from memory when its written state is final and unchanged."""
        sig = state_signature(path)
        kept = self._ended.get(path)
        if sig is not None and kept is not None and kept[0] == sig:
            return kept[1]
        summary = self._read_summary(path)
        if sig is not None and summary.state in FINAL:
            self._ended[path] = (sig, summary)
        return summary

    def _read_summary(self, path: Path) -> RunSummary:
        record, problem = read_record(path)
        state = run_state(path)
        sizes = record.get("sizes") if isinstance(record.get("sizes"), dict) else {}
        plan = record.get("plan") if isinstance(record.get("plan"), dict) else {}
        created = record.get("created_epoch")
        if not isinstance(created, (int, float)):
            created = path.stat().st_mtime
        launch = record.get("launch") if isinstance(record.get("launch"), dict) else {}
        return RunSummary(
            run_id=path.relative_to(self.outputs).as_posix(),
            path=path,
            state=state.state,
            exit_code=state.exit_code,
            signal=state.signal_name,
            reason=state.reason,
            created=float(created),
            tp=positive_int(sizes.get("tp")),
            pp=positive_int(sizes.get("pp")),
            cp=positive_int(sizes.get("cp")),
            dp=positive_int(sizes.get("dp")),
            world_size=positive_int(sizes.get("world_size")),
            parent=record.get("parent") if isinstance(record.get("parent"), str) else None,
            command=_str_list(record.get("command"))
            or _str_list(plan.get("command"))
            or _str_list(launch.get("argv")),
            job_id=_str(record.get("job_id")),
            submission=_str(record.get("submission")),
            cause=state.cause,
            problem=problem,
        )
