"""Making run directories: a fresh one for each launch, and the launch recorded in it.

What the files hold is :mod:`runtime.rundir`'s business; reading them back (naming, listing,
summarising) is the run store's, :mod:`ezpz_tui.core.runs.store`. What is decided here:

* Run ids are ``YYYYmmdd-HHMMSS-mmm-tp<T>pp<P>cp<C>`` in local time to the millisecond, so a
  plain ``ls`` sorts them and a person can read when and what. A collision (same millisecond,
  same sizes, another thread, process or node on a shared filesystem) is settled by the
  exclusive ``mkdir`` itself and a ``-2``, ``-3``... suffix: mkdir is atomic on local
  filesystems, NFS, Lustre and GPFS, so no lock file is needed.
* :meth:`RunMaker.create` makes the directory with the plan, the allocation facts and a
  ``pending`` state; :func:`record_launch` adds the launcher command built for that directory
  (and writes the hostfile it names) just before it starts.
* Every filesystem error while a run is made (outputs a file, under a file, read-only, full)
  is an :class:`~ezpz_tui.core.runs.outputs.OutputsError` naming the outputs directory and
  the cause; a run directory left half made by one is removed. A made run holds a small reserve
  (:mod:`ezpz_tui.core.launching.reserve`) so its end can be recorded on a disk that fills up.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import tomli_w

from ezpz_tui import __version__
from ezpz_tui.core.launching.launcher import Launch
from ezpz_tui.core.launching.plan import CheckedPlan
from ezpz_tui.core.launching.processes import supervised_here
from ezpz_tui.core.launching.reserve import make_reserve
from ezpz_tui.core.runs.outputs import cause, creating
from ezpz_tui.core.runs.record import RunStoreError, positive_int, read_run_toml
from ezpz_tui.core.runs.store import RunStore
from runtime.atomic import write_atomic
from runtime.rundir import RUN_TOML, RunDir, RunState, State, write_state

_RESERVED = frozenset({"run_id", "created", "created_epoch", "parent", "version", "sizes", "plan"})
_MAX_COLLISIONS = 10_000


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
    sizes) cannot be changed.

    Tables the file does not hold yet are appended to its text, which TOML reads as the same
    record as the whole rewritten: the launch's own entry is written just before its launcher
    starts, and parsing what was just written would load a TOML reader for nothing."""
    _check_meta(meta)
    path = RunDir(run_dir).run_toml
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        text = b""
    if all(isinstance(v, Mapping) and not _holds(text, k) for k, v in meta.items()):
        write_atomic(path, text + (b"\n" if text else b"") + _dump_toml(meta))
        return
    data = read_run_toml(run_dir) if text else {}
    data.update(meta)
    write_atomic(path, _dump_toml(data))


def _holds(text: bytes, key: str) -> bool:
    """Whether the record's text names top-level ``key`` (a table, or a key of its top):
    ``tomli_w`` writes each table's header and each key at the start of a line, and every
    string on one line, so no other line starts so."""
    name = key.encode()
    return any(
        line.startswith((b"[" + name + b"]", b"[" + name + b".", name + b" =", name + b"="))
        for line in text.splitlines()
    )


def record_launch(launch: Launch) -> Provenance:
    """Record what is about to run in ``launch.run_dir``, and write the hostfile it names; the
    run's provenance is recorded by the :class:`Provenance` returned, once the launcher has
    started (the ranks need not wait for git and the launcher's version).

    The launcher argv names the run directory, so it can only be built once
    :meth:`RunMaker.create` has made one; it is recorded before it starts, so a run that cannot
    start still says what was tried. :class:`RunStoreError` when the disk refuses.
    """
    run = RunDir(launch.run_dir)
    where = launch.cwd or Path.cwd()
    try:
        if launch.hostfile_hosts and launch.hostfile is not None:
            write_atomic(launch.hostfile, "".join(f"{h}\n" for h in launch.hostfile_hosts).encode())
        launched = {"argv": launch.argv, "env": launch.env, "cwd": str(where)}
        update_run_meta(run.path, {"launch": launched})
    except OSError as exc:
        raise RunStoreError(f"cannot record the launch in {run.path}: {cause(exc)}") from None
    return Provenance(run.path, launch.argv, where)


class Provenance:
    """A launch's provenance (:mod:`~ezpz_tui.core.launching.provenance`), recorded in
    ``run.toml`` by :meth:`record` once the launcher has started: its three commands (git
    twice, the launcher's ``--version``) then run beside the ranks' start, not before it."""

    def __init__(self, run_dir: Path, argv: Sequence[str], cwd: Path) -> None:
        self._run_dir, self._argv, self._cwd = run_dir, argv, cwd

    def record(self) -> None:
        """Add the facts to ``run.toml``. A disk that refuses them now loses the facts, not
        the run that has started: they are what a later comparison reads, nothing more."""
        from ezpz_tui.core.launching.provenance import provenance

        facts = _tomlable(provenance(self._argv, self._cwd), "provenance")
        with contextlib.suppress(OSError, ValueError):
            update_run_meta(self._run_dir, {"provenance": facts})


def record_shrunk(run_dir: Path, checked: CheckedPlan, excluded: Mapping[str, str]) -> None:
    """Record that the run goes on with fewer nodes than it was made for (staging failed on
    some: :mod:`~ezpz_tui.core.launching.stage_shortfall`): its plan, sizes and hosts as they
    now are, and the nodes ``excluded`` with why. The run's id keeps its sizes (TP, PP and CP
    do not change). :class:`RunStoreError` when the disk refuses."""
    run = RunDir(run_dir)
    try:
        data = read_run_toml(run.path)
        data.update(_tomlable(checked.meta, "run"))
        data["sizes"] = _sizes(checked.plan.to_dict(), checked.sizes)
        data["plan"] = _tomlable(checked.plan.to_dict(), "plan")
        data["stage_excluded"] = dict(excluded)
        write_atomic(run.run_toml, _dump_toml(data))
    except OSError as exc:
        why = cause(exc)
        raise RunStoreError(f"cannot record the smaller launch in {run.path}: {why}") from None


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


class RunMaker(RunStore):
    """The run store of whoever launches: it reads runs as any reader does, and makes them."""

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
        hosts...). Raises :class:`~ezpz_tui.core.runs.outputs.OutputsError` when the directory
        cannot be made or filled (nothing is left behind then), and ``ValueError`` for a
        caller's mistake (a reserved ``meta`` key, a value TOML cannot hold).
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
            # Not fsynced: both are rewritten, durably, before the launcher starts
            # (record_launch, the supervisor's `running`), and every fsync is a launch's wait.
            write_atomic(run.run_toml, _dump_toml(record), durable=False)
            pending = RunState(State.PENDING, run_id=run_dir.name, created=created.timestamp())
            write_state(run_dir, supervised_here(pending), durable=False)
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
