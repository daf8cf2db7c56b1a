"""Where a run's checkpoints live and which of them can be loaded, without torch.

``<run>/checkpoints/step-<N>/`` holds the training state after N optimizer steps, written by
:mod:`runtime.checkpoint` with torch.distributed.checkpoint. The file :data:`COMPLETE` is
written into it last, by rank 0, once every rank's shards and the metadata are on disk: a
folder without it (a save cut short by a fault, the walltime or a full disk) is torn and never
loaded; the newest complete one before it is. The launcher, the TUI and the ranks all find
checkpoints through this module, so they agree on what "the newest checkpoint" is, and none of
them needs torch for it.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from runtime.atomic import write_atomic

CHECKPOINTS = "checkpoints"
COMPLETE = "COMPLETE"
REQUEST = "checkpoint.request"
"""In the run directory: the supervisor's request that the ranks checkpoint now (the job's
walltime is about to end), a JSON object; with ``"stop": true`` (a relaunch's) they save at
the step they are at and then end, running no step after it. Once the checkpoint it asked for
is complete, :class:`runtime.checkpoint.Checkpointer` writes the request back as
:data:`REQUEST_DONE` with the step saved, and removes it."""
REQUEST_DONE = REQUEST + ".done"
ANSWERS = "checkpoint.answers"
"""In the run directory: written by rank 0's :class:`runtime.checkpoint.Checkpointer` when it
is made (a JSON object: its pid, how often it looks for a request, how often it saves). A live
run without it has no Checkpointer yet, or none at all: nobody would answer a request, and a
relaunch knows that at once instead of after a timeout."""
STEP_DIR = re.compile(r"step-(\d+)")
RESUME_VAR = "EZPZ_RESUME_FROM"
"""The checkpoint a launch resumes from, set for every rank by ``ezpz-tui launch
--resume-from`` and by a relaunch that resumes; the demo and :func:`runtime.checkpoint.resume`
read it."""


class CheckpointError(Exception):
    """A checkpoint that cannot be used, with a sentence naming its path and what is wrong."""


@dataclass(frozen=True)
class Checkpoint:
    """One complete checkpoint: its folder and the optimizer steps it holds."""

    path: Path
    step: int


def step_dir(run_dir: str | os.PathLike[str], step: int) -> Path:
    return Path(run_dir) / CHECKPOINTS / f"step-{step}"


def request_path(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / REQUEST


def request_done_path(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / REQUEST_DONE


def answers_path(run_dir: str | os.PathLike[str]) -> Path:
    return Path(run_dir) / ANSWERS


def ask_to_save_and_stop(run_dir: str | os.PathLike[str], by: str) -> str:
    """Ask the run's ranks to save at the step they are at and then end (``by``: who asks,
    e.g. "relaunch"); the request's id, which the answer repeats. Whoever supervises the run
    records its end as a stop asked for (:func:`stop_asked`). Raises OSError when
    the request cannot be written."""
    asked = time.time()
    request_id = f"{os.getpid()}-{asked:.6f}"
    data = {"stop": True, "id": request_id, "asked": asked, "by": by}
    request_done_path(run_dir).unlink(missing_ok=True)  # an older request's answer
    write_atomic(request_path(run_dir), json.dumps(data).encode())
    return request_id


def stop_asked(run_dir: str | os.PathLike[str]) -> bool:
    """Whether the run was asked to save and stop (the request pending or answered): its
    ranks' own end after it is the stop someone asked for, not a success."""
    for path in (request_path(run_dir), request_done_path(run_dir)):
        found = read_request(Path(path))
        if found and found.get("stop") is True:
            return True
    return False


def read_request(path: Path) -> dict[str, object] | None:
    """A request (or a request answered) as the object it holds; None when there is none or
    it cannot be read. An empty or foreign file is a plain request: the walltime's of an
    older version wrote one without ``stop``."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError:
        data = {}
    return data if isinstance(data, dict) else {}


def is_complete(path: Path) -> bool:
    return (path / COMPLETE).is_file()


def _steps(folder: Path) -> list[tuple[int, Path]]:
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        match = STEP_DIR.fullmatch(entry.name)
        if match and entry.is_dir():
            found.append((int(match.group(1)), entry))
    return sorted(found)


def complete(run_dir: str | os.PathLike[str]) -> list[Checkpoint]:
    """The run's complete checkpoints, oldest first; torn ones are left out."""
    return [
        Checkpoint(path, step)
        for step, path in _steps(Path(run_dir) / CHECKPOINTS)
        if is_complete(path)
    ]


def newest(run_dir: str | os.PathLike[str]) -> Checkpoint | None:
    found = complete(run_dir)
    return found[-1] if found else None


def earlier(found: Checkpoint) -> Checkpoint | None:
    """The newest complete checkpoint of ``found``'s run before it: what a person resumes
    from when ``found`` cannot be read."""
    before = [c for c in complete(found.path.parent.parent) if c.step < found.step]
    return before[-1] if before else None


def torn(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Checkpoint folders without their completion mark (a save cut short, or one in flight)."""
    return [path for _, path in _steps(Path(run_dir) / CHECKPOINTS) if not is_complete(path)]


def resolve(target: str | os.PathLike[str]) -> Checkpoint:
    """The checkpoint ``target`` names: a checkpoint folder itself, or a run (or its
    ``checkpoints/`` folder) whose newest complete checkpoint is meant.

    :class:`CheckpointError` with the path and the reason when there is none to load.
    """
    path = Path(target).expanduser()
    if not path.exists():
        raise CheckpointError(f"{path}: no such run or checkpoint")
    match = STEP_DIR.fullmatch(path.name)
    if match and path.parent.name == CHECKPOINTS:
        if not is_complete(path):
            raise CheckpointError(
                f"{path}: checkpoint is torn (no {COMPLETE} mark: its save never finished)"
            )
        return Checkpoint(path, int(match.group(1)))
    run = path.parent if path.name == CHECKPOINTS else path
    found = newest(run)
    if found is not None:
        return found
    left = torn(run)
    if left:
        names = ", ".join(p.name for p in left)
        raise CheckpointError(f"{run}: no complete checkpoint (torn: {names})")
    raise CheckpointError(f"{run}: the run has no checkpoint in {run / CHECKPOINTS}")
