"""A live run handed to its relaunch: saved at the step it is at, then stopped, then said.

A relaunch that continues from the run it replaces asks that run to save now and stop (the
request the walltime uses, :data:`runtime.checkpoint_dirs.REQUEST`, with ``"stop": true``):
its ranks save at the step they are at, run no step after it and end by themselves, status 0
(:class:`runtime.checkpoint.SaveAndStop`), so the child continues at exactly that step. The
wait is bounded (``[checkpoint] relaunch_save_s``); what the save is doing is said while it
runs (the folder it writes and its size); whatever happens (no answer in time, the run dies or
its disk fills during the save) the run is then stopped, and the newest complete checkpoint is
what the child continues from, said in words. A run with no Checkpointer never gets a request
(its rank 0 never said it answers: :data:`runtime.checkpoint_dirs.ANSWERS`): it is stopped at
once, and the words say where the child starts.

The times kept (asked, saved, stopped) go into the child's record as ``[handover]``, from
which :mod:`ezpz_tui.core.runs.restart` measures the restart.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ezpz_tui.core.launching.elsewhere import Refused, stop_elsewhere
from ezpz_tui.core.launching.processes import DEFAULT_GRACE_S
from ezpz_tui.core.launching.supervisor import RunHandle
from ezpz_tui.core.runs.liveness import run_state
from runtime.checkpoint_dirs import (
    Checkpoint,
    answers_path,
    ask_to_save_and_stop,
    newest,
    read_request,
    request_done_path,
    request_path,
    torn,
)
from runtime.rundir import RunDir

Progress = Callable[[str], None]
POLL_S = 0.2  # how often the wait looks at the run directory: two stats and a listing
SAY_EVERY_S = 0.5  # how often the progress line is said again
END_WAIT_S = 30.0  # after the save: how long the ranks may take to end by themselves
TAIL_BYTES = 8192  # the end of rank 0's metrics read for the step it is at


def answers(run_dir: Path) -> bool:
    """Whether the run's rank 0 made a Checkpointer that looks for requests."""
    return answers_path(run_dir).is_file()


def steps_done(run_dir: Path) -> int | None:
    """The optimizer steps rank 0 has recorded (its last record's step + 1): the step a save
    now would hold, give or take the steps that run before it is answered."""
    path = RunDir(run_dir).metrics(0)
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - TAIL_BYTES))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    for line in reversed(tail.splitlines()[1:] if len(tail) >= TAIL_BYTES else tail.splitlines()):
        try:
            step = json.loads(line).get("step")
        except (ValueError, AttributeError):
            continue
        if isinstance(step, int):
            return step + 1
    return None


def pending_stop(run_dir: Path) -> float | None:
    """When a save-and-stop asked of the run (by this process or another) was asked, while it
    is unanswered; None when none is."""
    asked = read_request(request_path(run_dir))
    if not asked or asked.get("stop") is not True:
        return None
    when = asked.get("asked")
    return float(when) if isinstance(when, int | float) else 0.0


def checkpoint_words(found: Checkpoint | None, done: int | None) -> str:
    """Where a child starts from ``found`` when its parent had done ``done`` steps."""
    if found is None:
        return "at step 0 (no complete checkpoint)"
    redone = f" ({done - found.step} steps redone)" if done is not None else ""
    return f"at step {found.step}, the newest checkpoint{redone}"


@dataclass(frozen=True)
class Handover:
    """What handing a live run to its relaunch came to."""

    run_id: str
    asked: float  # when the save (or the stop, for a run that cannot save) was asked
    saved: float | None  # when the save asked for was complete; None: it was not
    step: int | None  # the step saved now
    stopped: float  # when none of the run's processes was left (or the stop gave up)
    found: Checkpoint | None  # what the child continues from: the newest complete checkpoint
    said: str  # the outcome in words, as the progress line ends
    left: str | None = None  # why the run may still be there (it would not stop); None: gone

    def record(self) -> dict[str, Any]:
        """The child's ``[handover]`` entry: the times its restart is measured from."""
        entry: dict[str, Any] = {"parent": self.run_id, "asked": self.asked}
        entry["stopped"] = self.stopped
        if self.saved is not None and self.step is not None:
            entry |= {"saved": self.saved, "step": self.step}
        if self.found is not None:
            entry["resumed_step"] = self.found.step
        entry["said"] = self.said
        return entry


class _Here:
    """A run this process supervises, through its handle."""

    def __init__(self, handle: RunHandle) -> None:
        self.handle, self.run_dir = handle, handle.run_dir

    def ask(self) -> str | None:
        return self.handle.ask_save_and_stop()

    def ended(self, wait_s: float = 0.0) -> bool:
        return self.handle.wait(wait_s) is not None

    def state(self) -> str:
        return str(self.handle.state.state)

    def stop(self, grace_s: tuple[float, float]) -> str | None:
        done = self.handle.stop(grace_s)
        left = ", ".join(map(str, done.remaining))
        return None if done.clean else f"processes of {self.run_dir.name} would not die ({left})"


class _Elsewhere:
    """A run another process on this node supervises (an ``ezpz-tui launch``, a tether): asked
    through its directory, stopped through its supervisor when it does not end by itself."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def ask(self) -> str | None:
        try:
            return ask_to_save_and_stop(self.run_dir, "relaunch")
        except OSError:
            return None

    def ended(self, wait_s: float = 0.0) -> bool:
        deadline = time.monotonic() + wait_s
        while run_state(self.run_dir).live:
            if time.monotonic() >= deadline:
                return False
            time.sleep(POLL_S)
        return True

    def state(self) -> str:
        return str(run_state(self.run_dir).state)

    def stop(self, grace_s: tuple[float, float]) -> str | None:
        if self.ended():
            return None
        ended = stop_elsewhere(self.run_dir, timeout_s=sum(grace_s) + END_WAIT_S)
        return ended.reason if isinstance(ended, Refused) else None


def hand_over(
    run: RunHandle | Path,
    wait_s: float,
    grace_s: tuple[float, float] = DEFAULT_GRACE_S,
    progress: Progress | None = None,
) -> Handover:
    """Ask the live run (a handle of this process's, or the directory of one another process
    supervises) to save now and stop, wait for the save at most ``wait_s`` seconds (saying how
    it goes through ``progress``), then stop the run; blocks, so call it from a worker."""
    live = _Here(run) if isinstance(run, RunHandle) else _Elsewhere(run)
    run_dir = live.run_dir
    name = run_dir.name
    say = progress or (lambda line: None)
    asked = time.time()
    done = steps_done(run_dir)
    request_id = live.ask() if answers(run_dir) else None
    if request_id is None:
        found = newest(run_dir)
        why = "it saves no checkpoints" if not answers(run_dir) else "it cannot be asked"
        said = f"{name}: not saved now ({why}); the new run starts {checkpoint_words(found, done)}"
        say(said)
        left = live.stop(grace_s)
        return Handover(name, asked, None, None, time.time(), found, said, left)
    saved, step = _wait_for_save(live, request_id, asked, wait_s, say)
    if saved is not None:
        say(f"{name}: saved step {step} in {saved - asked:.1f} s; waiting for it to end")
        live.ended(END_WAIT_S)  # its ranks end by themselves after the save
    ended = live.ended()
    left = live.stop(grace_s)
    if saved is None:  # unanswered: a run that would not stop must not end later for it
        with contextlib.suppress(OSError):
            request_path(run_dir).unlink(missing_ok=True)
    found = newest(run_dir)
    if saved is not None and found is not None and found.step == step:
        said = f"{name}: saved step {step} now and stopped; the new run continues at step {step}"
    elif saved is None and ended:
        said = (
            f"{name} ended before its save was complete ({live.state()}): the new run "
            f"starts {checkpoint_words(found, done)}"
        )
    elif saved is None:
        said = (
            f"{name}: no save within {wait_s:g} s, stopped; the new run starts "
            f"{checkpoint_words(found, done)}"
        )
    else:
        where = checkpoint_words(found, done)
        said = f"{name}: saved step {step}, stopped; the new run starts {where}"
    say(said)
    return Handover(name, asked, saved, step, time.time(), found, said, left)


def _wait_for_save(
    live: _Here | _Elsewhere, request_id: str, asked: float, wait_s: float, say: Progress
) -> tuple[float | None, int | None]:
    """When the save asked for was complete and its step; (None, None) when the run ended
    before it was, or ``wait_s`` passed."""
    run, name = live.run_dir, live.run_dir.name
    before = newest(run)
    deadline = time.monotonic() + wait_s
    said_at = 0.0
    while True:
        answer = read_request(request_done_path(run))
        if answer and answer.get("id") == request_id and isinstance(answer.get("step"), int):
            when = answer.get("answered")
            return (float(when) if isinstance(when, int | float) else time.time()), answer["step"]
        if live.ended() or time.monotonic() >= deadline:
            return None, None
        now = time.monotonic()
        if now - said_at >= SAY_EVERY_S:
            said_at = now
            say(_saving_line(run, name, before, time.time() - asked))
        time.sleep(POLL_S)


def _saving_line(run: Path, name: str, before: Checkpoint | None, elapsed: float) -> str:
    """What the save is doing: the folder it writes (newer than the newest complete one
    before it) and what is in it so far."""
    floor = before.step if before is not None else -1
    writing = [p for p in torn(run) if int(p.name.split("-")[1]) > floor]
    if not writing:
        return f"{name}: asked to save at the step it is at ({elapsed:.1f} s)"
    folder = writing[-1]
    size = 0
    for entry in folder.iterdir() if folder.is_dir() else ():
        try:
            size += entry.stat().st_size
        except OSError:
            continue
    return f"{name}: saving {folder.name}: {size / 1e6:.1f} MB written ({elapsed:.1f} s)"
