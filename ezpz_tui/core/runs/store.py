"""Run directories as a reader finds them: named, listed and read back, whoever made them.

The run store is the read side's: the runs list, the palette, ``runs``, ``compare`` and every
command that takes a RUN name and list runs through it, and need not import the code that makes
and drives runs for that (:mod:`ezpz_tui.core.launching.making` makes run directories).

* Runs are listed by the creation epoch they record, not by id, so a DST change cannot reorder
  them; ids from the same millisecond sort naturally (``-2`` before ``-10``).
* Runs are listed in the state a reader should believe
  (:func:`ezpz_tui.core.runs.liveness.run_state`), ``lost`` included.
* A run is named by its id, a path, or a unique prefix of its id; an outputs directory that
  cannot be read is an :class:`~ezpz_tui.core.runs.outputs.OutputsError` naming it and the
  cause.
* Any direct subdirectory that looks like a run (:meth:`runtime.rundir.RunDir.looks_like_run`)
  is listed, and ezpz's own runs one level further down (``<module>/<timestamp>``, listed by
  that relative id) with the state their files show
  (:mod:`ezpz_tui.core.runs.ezpz_layout`); listing never raises.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ezpz_tui.core.runs.ezpz_layout import ezpz_runs_and_others
from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.runs.outputs import listing
from ezpz_tui.core.runs.record import RunStoreError, positive_int, read_record, read_run_toml
from runtime.rundir import FINAL, RUN_TOML, RunDir, State


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
        return self.scan()[0]

    def scan(self) -> tuple[list[RunSummary], list[Path]]:
        """:meth:`list_runs`, and the folders it looked into that hold no run (ezpz's
        ``<module>`` folders and what is in them, a run directory not yet made): a run appears
        in one of those, or in the outputs directory, by changing that folder."""
        try:
            entries = list(os.scandir(self.outputs))
        except OSError:
            return [], []
        runs: list[RunSummary] = []
        others: list[Path] = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            try:
                if not entry.is_dir():
                    continue
                if RunDir(Path(entry.path)).looks_like_run():
                    runs.append(self.summary(Path(entry.path)))
                else:  # ezpz's outputs/<module>/<timestamp>
                    below, more = ezpz_runs_and_others(entry.path)
                    runs.extend(map(self.summary, below))
                    others += [Path(entry.path), *more]
            except OSError:
                continue
        runs.sort(key=lambda r: (r.created, _natural(r.run_id)), reverse=True)
        return runs, others

    def summary(self, path: Path) -> RunSummary:
        """The run's line, from memory when its written state is final and unchanged."""
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
