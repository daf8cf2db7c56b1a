"""Save and resume training with torch.distributed.checkpoint, into any parallel layout.

A :class:`Checkpointer` saves the model, the optimizer, an optional LR scheduler and data
loader (anything with ``state_dict``/``load_state_dict``), every rank's RNG states and the step
to ``<run>/checkpoints/step-<N>/`` (:mod:`runtime.checkpoint_dirs`). The model and optimizer go
through ``get_state_dict``/``set_state_dict``, so DDP's wrapper, FSDP2's shards and
tensor-parallel DTensors are saved under the plain model's parameter names with their global
shapes, and a load reshards them for whatever TP/PP/CP/DP sizes the resuming run has. The
optimizer state is flattened per parameter, so a pipeline stage saves and loads only its own
layers' (the model must keep the whole model's names on every stage, as the demo's does).

Saves are asynchronous where torch offers it: the step is held up while the state is copied,
and the files are written by a thread over a gloo group of their own, so the next steps'
collectives never wait on them. The completion mark is written by rank 0 once every rank's
files and the metadata are written, from the writer's thread; a failed save is raised at the
next save or at :meth:`Checkpointer.close`, the same step on every rank. When the supervisor
asks for a checkpoint (the job's walltime is about to end: ``[checkpoint] before_walltime``),
every rank saves at the same step and waits until it is written; when a relaunch asks it to
save and stop, every rank then ends (:class:`SaveAndStop`, exit status 0) without running
another step, so the run that replaces it continues at exactly that step. Whether one is asked
is looked at every step by default, for nothing: rank 0's look goes into an all-reduce started
at one step and read at the next, on a group of its own, so no step waits on it and a request
is answered one step after rank 0 sees it. A Checkpointer says that it answers
(:data:`~runtime.checkpoint_dirs.ANSWERS`) when it is made.
A load that fails names what a person needs: the file (one shorter than the checkpoint's index
says: a copy or a save cut short), the newest earlier complete checkpoint, and the command that
resumes from it, in the exception itself, which is what a failure report quotes.

torch is imported when a :class:`Checkpointer` is made, not with this module.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import pickle
import random
import shlex
import shutil
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from runtime.atomic import write_atomic
from runtime.checkpoint_dirs import (
    COMPLETE,
    RESUME_VAR,
    Checkpoint,
    CheckpointError,
    answers_path,
    complete,
    earlier,
    read_request,
    request_done_path,
    request_path,
    resolve,
    step_dir,
    torn,
)

KEEP = 2
SHOWN = 3  # names of keys listed in a message before "(+N more)"
METADATA = ".metadata"  # DCP's index of a checkpoint's files: which bytes of which hold what
SAVE, SAVE_AND_STOP = 1, 2  # what rank 0 found asked, as the ranks agree on it


class SaveAndStop(SystemExit):
    """Raised by :meth:`Checkpointer.step_done` on every rank once the checkpoint a relaunch
    asked for is complete: the script ends there, exit status 0, with no step after ``step``
    run. A script with something to do before it ends catches it and raises it again."""

    def __init__(self, step: int) -> None:
        super().__init__(0)
        self.step = step


def resume_target(explicit: str | os.PathLike[str] | None = None) -> Checkpoint | None:
    """The checkpoint to resume from: ``explicit``, else the launcher's ``EZPZ_RESUME_FROM``;
    None when neither names one. :class:`CheckpointError` when the one named cannot be used."""
    target = explicit if explicit is not None else os.environ.get(RESUME_VAR) or None
    return None if target is None else resolve(target)


class Checkpointer:
    """Saves every ``every`` steps into ``run_dir`` and loads a checkpoint back.

    In the training loop: ``start = ckpt.resume()`` before the first step (0 when there is
    nothing to resume from), ``ckpt.step_done(step + 1)`` after each optimizer step, and
    ``ckpt.close()`` at the end, which waits for a save still being written.
    """

    def __init__(
        self,
        model: Any,
        optimizer: Any,
        run_dir: str | os.PathLike[str],
        *,
        scheduler: Any = None,
        data: Any = None,
        every: int = 0,
        keep: int = KEEP,
        async_save: bool = True,
        describe: dict[str, Any] | None = None,
        poll_every: int = 1,
    ) -> None:
        import torch.distributed as dist

        self.model, self.optimizer = model, optimizer
        self.scheduler, self.data = scheduler, data
        self.run_dir = Path(run_dir)
        self.every, self.keep = every, max(1, keep)
        self.describe = describe or {}
        self._dist = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank() if self._dist else 0
        if not self._dist:  # DCP says so on every save and load, from the writer's thread too
            warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavail")
        # The writer thread's collectives run beside the training's: on a group of their own.
        self._group = dist.new_group(backend="gloo") if self._dist and async_save else None
        self.async_save = async_save
        # Whether the supervisor asks for a checkpoint (checkpoint_dirs.REQUEST) is read by
        # rank 0 every ``poll_every`` steps and agreed on over a group of its own, so that
        # every rank saves at the same step: the all-reduce started at one look is read at
        # the next, so no step waits on it.
        self.poll_every = poll_every
        self._poll_group = dist.new_group(backend="gloo") if self._dist and poll_every else None
        self._poll: tuple[Any, Any] | None = None  # the look in flight: its work and tensor
        self._saved_step: int | None = None
        self._pending: tuple[Any, Path, threading.Event] | None = None
        self._error: CheckpointError | None = None  # rank 0's, marking a save complete
        self._lock = threading.Lock()  # the figures, added to by the writer's thread
        self._figures: dict[str, float] = {}
        if self.rank == 0 and poll_every:
            self._say_answers()

    def _say_answers(self) -> None:
        """Tell whoever would ask (a relaunch) that this run answers a request, and how soon."""
        said = {"pid": os.getpid(), "poll_every": self.poll_every, "every": self.every}
        said["time"] = time.time()
        with contextlib.suppress(OSError):  # a run directory a script names may not exist yet
            self.run_dir.mkdir(parents=True, exist_ok=True)
            write_atomic(answers_path(self.run_dir), json.dumps(said).encode())

    # -- the state ------------------------------------------------------------------------

    def _state(self, step: int) -> dict[str, Any]:
        import torch
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict

        _check_same_parameters(self.model, self.optimizer)
        options = StateDictOptions(flatten_optimizer_state_dict=True)
        model_sd, optim_sd = get_state_dict(self.model, self.optimizer, options=options)
        state: dict[str, Any] = {
            "model": model_sd,
            "optim": optim_sd,
            "train": {"step": torch.tensor(step, dtype=torch.int64)},
            "rng": {f"rank{self.rank}": _rng_state()},
        }
        if self.scheduler is not None:
            state["scheduler"] = self.scheduler.state_dict()
        if self.data is not None:
            state["data"] = self.data.state_dict()
        return state

    # -- saving ---------------------------------------------------------------------------

    def step_done(self, step: int) -> None:
        """After optimizer step ``step`` (counted from 1): save when it is a multiple of
        ``every``, or when the supervisor asked for a checkpoint (its walltime is ending, or a
        relaunch): then the save is written before the step returns, and a relaunch's
        request ends the script here (:class:`SaveAndStop`)."""
        if self.every and step % self.every == 0:
            self.save(step)
        if not self.poll_every or step % self.poll_every:
            return
        asked = self._requested()
        if not asked:
            return
        if self._saved_step != step:
            self.save(step)
        self.wait()
        if self.rank == 0:
            self._answered(step)
        with self._lock:
            self._figures["ckpt_requested"] = 1.0
        if asked == SAVE_AND_STOP:
            self.close()
            if self.rank == 0:
                sys.stderr.write(f"checkpoint: saved step {step}; stopping, as asked\n")
                sys.stderr.flush()
            # The relaunch waits for this process to end: the interpreter's teardown would
            # collect the whole heap of a torch process (seconds); what lives now is left out.
            gc.freeze()
            raise SaveAndStop(step)

    def _answered(self, step: int) -> None:
        """Rank 0: the request, answered with the step saved, where the asker looks for it."""
        request = request_path(self.run_dir)
        asked = read_request(request) or {}
        answer = {**asked, "step": step, "answered": time.time()}
        with contextlib.suppress(OSError):
            write_atomic(request_done_path(self.run_dir), json.dumps(answer).encode())
            request.unlink()

    def _looked(self) -> int:
        """What rank 0 finds asked now: nothing, a save, or a save and a stop."""
        if self.rank != 0:
            return 0
        asked = read_request(request_path(self.run_dir))
        if asked is None:
            return 0
        return SAVE_AND_STOP if asked.get("stop") is True else SAVE

    def _requested(self) -> int:
        """What every rank agrees was asked: rank 0's look of the previous poll, agreed on
        while the steps ran; a new look is started unless one is answered now."""
        if self._poll_group is None:
            return self._looked()
        import torch
        import torch.distributed as dist

        agreed = 0
        if self._poll is not None:
            work, flag = self._poll
            self._poll = None
            work.wait()
            agreed = int(flag.item())
        if not agreed:
            flag = torch.tensor([self._looked()], dtype=torch.int32)
            self._poll = (dist.all_reduce(flag, group=self._poll_group, async_op=True), flag)
        return agreed

    def save(self, step: int) -> None:
        """Start saving the state after ``step`` optimizer steps; returns once it is copied.

        A failure of the previous save is raised here, so that every rank learns of it at the
        same step: each rank's writer learns it at its own moment."""
        import torch.distributed.checkpoint as dcp

        asked, waiting = time.time(), time.perf_counter()
        self.wait()  # a previous save still being written: it took longer than this interval
        waited = time.perf_counter() - waiting
        path = step_dir(self.run_dir, step)
        start = time.perf_counter()
        state = self._state(step)
        try:
            if self.async_save:
                future = dcp.async_save(
                    state, checkpoint_id=path, process_group=self._group, no_dist=not self._dist
                )
            else:
                dcp.save(state, checkpoint_id=path, no_dist=not self._dist)
                future = None
        except _failures() as exc:
            raise CheckpointError(f"{path}: checkpoint save failed: {_reason(exc)}") from exc
        held = time.perf_counter() - start
        self._saved_step = step
        finished = threading.Event()
        self._pending = (future, path, finished)
        timing = {"asked_at": asked, "waited_s": waited}
        if future is None:
            self._finish(None, step, path, start, held, timing, finished)
            self.wait()
        else:
            future.add_done_callback(
                lambda done: self._finish(done, step, path, start, held, timing, finished)
            )

    def _finish(
        self,
        future: Any,
        step: int,
        path: Path,
        start: float,
        held: float,
        timing: dict[str, float],
        finished: Any,
    ) -> None:
        """When a save's files are all written (in the writer's thread): rank 0 marks it
        complete and prunes, at once, so that a fault a moment later finds it loadable.

        The mark also holds when the save was asked for, how long it waited for the one
        before and how long it took to write, with the interval it was asked at: what a
        reader needs to tell a save slower than its interval without the ranks' records."""
        try:
            if future is not None and future.exception() is not None:
                return
            figures = {"ckpt_step": float(step), "ckpt_save_s": held}
            figures["ckpt_write_s"] = time.perf_counter() - start
            if self.rank == 0:
                size = _size(path)
                mark = {
                    "step": step,
                    "bytes": size,
                    "saved_at": time.time(),
                    "write_s": figures["ckpt_write_s"],
                    "every": self.every,
                    **timing,
                    **self.describe,
                }
                try:
                    write_atomic(path / COMPLETE, json.dumps(mark).encode())
                except OSError as exc:
                    self._error = CheckpointError(f"{path}: checkpoint save failed: {exc}")
                    return
                figures["ckpt_mb"] = size / 1e6
                self._prune()
            with self._lock:
                self._figures.update(figures)
        finally:
            finished.set()

    def wait(self) -> None:
        """Wait for the save in flight to be written and marked; raise what stopped it."""
        if self._pending is None:
            return
        future, path, finished = self._pending
        self._pending = None
        try:
            if future is not None:
                future.result()
        except _failures() as exc:
            raise CheckpointError(f"{path}: checkpoint save failed: {_reason(exc)}") from exc
        finished.wait()
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _prune(self) -> None:
        """Keep the newest ``keep`` complete checkpoints; drop torn ones older than those."""
        kept = complete(self.run_dir)
        for old in kept[: -self.keep]:
            shutil.rmtree(old.path, ignore_errors=True)
        newest = kept[-1].step if kept else -1
        for path in torn(self.run_dir):
            if int(path.name.split("-")[1]) < newest:
                shutil.rmtree(path, ignore_errors=True)

    def metrics(self) -> dict[str, float]:
        """The figures of the saves finished since the last call, for the step's record:
        ``ckpt_save_s`` (what the step was held up), ``ckpt_write_s`` (until written),
        ``ckpt_mb`` (rank 0), ``ckpt_load_s`` (once, after a resume)."""
        with self._lock:
            figures, self._figures = self._figures, {}
        return figures

    def close(self) -> None:
        """Wait for the save in flight, and for the look for a request in flight (every rank
        started it: it ends at once)."""
        if self._poll is not None:
            work, _ = self._poll
            self._poll = None
            work.wait()
        self.wait()

    # -- loading --------------------------------------------------------------------------

    def resume(self, target: str | os.PathLike[str] | None = None) -> int:
        """Load ``target`` (default: ``EZPZ_RESUME_FROM``); the step to continue from, 0 when
        there is nothing to resume."""
        found = resume_target(target)
        return 0 if found is None else self.load(found)

    def load(self, found: Checkpoint) -> int:
        import torch.distributed.checkpoint as dcp
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_state_dict

        start = time.perf_counter()
        try:
            meta = dcp.FileSystemReader(str(found.path)).read_metadata()
        except _failures() as exc:
            said = f"{found.path / METADATA}: unreadable checkpoint index: {_reason(exc)}"
            raise CheckpointError(said + earlier_advice(found)) from exc
        saved = meta.state_dict_metadata
        state = self._state(0)
        self._check_fits(found.path, saved, state)
        rng_key = f"rng.rank{self.rank}"
        if rng_key not in saved:  # saved on fewer ranks: this one keeps its seeded RNG
            del state["rng"]
        try:
            dcp.load(state, checkpoint_id=found.path, no_dist=not self._dist)
        except _failures() as exc:
            short = short_files(found.path, meta)
            if short:  # torch's reason names no file: the sizes do, and say it all
                said = "; ".join(
                    f"{path} is cut short ({size} of its {wants} bytes)"
                    for path, size, wants in short
                )
            else:
                said = f"{found.path}: checkpoint load failed: {_reason(exc)}"
            raise CheckpointError(f"{said}{earlier_advice(found)}") from exc
        set_state_dict(
            self.model,
            self.optimizer,
            model_state_dict=state["model"],
            optim_state_dict=state["optim"],
            options=StateDictOptions(flatten_optimizer_state_dict=True),
        )
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        if self.data is not None:
            self.data.load_state_dict(state["data"])
        if "rng" in state:
            _set_rng_state(state["rng"][f"rank{self.rank}"])
        with self._lock:
            self._figures["ckpt_load_s"] = time.perf_counter() - start
        return int(state["train"]["step"].item())

    def _check_fits(self, path: Path, saved: dict[str, Any], state: dict[str, Any]) -> None:
        """The same :class:`CheckpointError` on every rank when the model's parameters and the
        checkpoint's differ in names or shapes, before anything is loaded."""
        ours = {f"model.{k}": tuple(v.shape) for k, v in state["model"].items() if _is_tensor(v)}
        everyone = [ours]
        if self._dist:
            import torch.distributed as dist

            everyone = [{} for _ in range(dist.get_world_size())]
            dist.all_gather_object(everyone, ours)
        wanted: dict[str, tuple[int, ...]] = {}
        for shapes in everyone:
            wanted.update(shapes)
        theirs = {
            k: tuple(v.size)
            for k, v in saved.items()
            if k.startswith("model.") and hasattr(v, "size")
        }
        missing = sorted(k[6:] for k in wanted.keys() - theirs.keys())
        unexpected = sorted(k[6:] for k in theirs.keys() - wanted.keys())
        shapes = sorted(
            f"{k[6:]} is {list(theirs[k])} in the checkpoint, {list(wanted[k])} here"
            for k in wanted.keys() & theirs.keys()
            if wanted[k] != theirs[k]
        )
        parts = []
        if missing:
            parts.append(f"missing {_some(missing)}")
        if unexpected:
            parts.append(f"unexpected {_some(unexpected)}")
        if shapes:
            parts.append(f"shapes differ: {_some(shapes)}")
        if parts:
            raise CheckpointError(
                f"{path}: checkpoint is from a different model: {'; '.join(parts)}"
            )


def short_files(path: Path, meta: Any) -> list[tuple[Path, int, int]]:
    """The files of the checkpoint at ``path`` smaller than its index says they are (cut
    short by a fault, a full disk or a copy), with their size and the bytes the index needs."""
    wants: dict[str, int] = {}
    for info in meta.storage_data.values():
        name = getattr(info, "relative_path", None)
        if isinstance(name, str):
            wants[name] = max(wants.get(name, 0), info.offset + info.length)
    short = []
    for name, need in sorted(wants.items()):
        try:
            size = (path / name).stat().st_size
        except OSError:
            size = 0
        if size < need:
            short.append((path / name, size, need))
    return short


def earlier_advice(found: Checkpoint) -> str:
    """What a person can do about ``found``: resume from the newest complete checkpoint before
    it, with the command that does (this rank's own, launched with ``--resume-from``)."""
    before = earlier(found)
    if before is None:
        return f"; no earlier complete checkpoint in {found.path.parent}"
    command = [_swapped(arg, found, before.path) for arg in sys.orig_argv]
    return (
        f"; the newest earlier complete checkpoint is step {before.step}, {before.path}: "
        f"resume from it with `ezpz-tui launch --resume-from {before.path} -- "
        f"{shlex.join(command)}` (with this run's launch flags)"
    )


def _swapped(arg: str, found: Checkpoint, before: Path) -> str:
    """A word of the command (``PATH``, or ``--flag=PATH``) that named ``found`` (itself, its
    run or its run's checkpoints, whose newest it is) naming ``before`` instead."""
    flag, eq, value = arg.partition("=") if arg.startswith("-") else ("", "", arg)
    if (flag and not eq) or not value:
        return arg
    try:
        meant = Path(value).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        return arg
    named = (found.path, found.path.parent, found.path.parent.parent)
    return f"{flag}{eq}{before}" if meant in (p.resolve() for p in named) else arg


def _check_same_parameters(model: Any, optimizer: Any) -> None:
    """DCP finds each optimizer state's parameter name through the model's parameters: DDP
    over tensor parallelism swaps those for local copies on every forward, and the names
    are lost (torch fails with a bare KeyError deep in get_state_dict)."""
    held = {id(p) for p in model.parameters()}
    given = [p for group in optimizer.param_groups for p in group["params"]]
    if any(id(p) not in held for p in given):
        raise CheckpointError(
            "cannot checkpoint: the optimizer's parameters are not the model's (DDP over "
            "tensor parallelism replaces them every forward); use FSDP (--strategy fsdp) "
            "when tp > 1 and dp > 1"
        )


def _failures() -> tuple[type[BaseException], ...]:
    """What a DCP call raises: its CheckpointException is a BaseException, not an Exception."""
    from torch.distributed.checkpoint.api import CheckpointException

    return (Exception, CheckpointException)


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _some(items: list[str]) -> str:
    more = f" (+{len(items) - SHOWN} more)" if len(items) > SHOWN else ""
    return ", ".join(items[:SHOWN]) + more


def _rng_state() -> bytes:
    """Python's, numpy's, torch's and the accelerator's RNG states of this rank, pickled:
    one value of a size DCP need not know in advance."""
    import torch

    states: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    with contextlib.suppress(ImportError):
        import numpy as np

        states["numpy"] = np.random.get_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state()
    return pickle.dumps(states)


def _set_rng_state(blob: bytes) -> None:
    import torch

    states = pickle.loads(blob)
    random.setstate(states["python"])
    torch.set_rng_state(states["torch"])
    if "numpy" in states:
        with contextlib.suppress(ImportError):
            import numpy as np

            np.random.set_state(states["numpy"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state(states["cuda"])


def _size(path: Path) -> int:
    total = 0
    for entry in path.rglob("*"):
        with contextlib.suppress(OSError):
            if entry.is_file():
                total += entry.stat().st_size
    return total


def _reason(exc: BaseException) -> str:
    """The first line of what went wrong, out of DCP's exception that wraps every rank's."""
    failures = getattr(exc, "failures", None)
    if isinstance(failures, dict) and failures:
        rank, inner = sorted(failures.items())[0]
        found = inner[0] if isinstance(inner, tuple) else inner
        return f"rank {rank}: {_reason(found)}"
    cause = exc.__cause__ or exc.__context__
    text = str(exc).strip().splitlines()
    if isinstance(exc, OSError) or not text:
        return text[0] if text else type(exc).__name__
    if cause is not None and isinstance(cause, OSError):
        return str(cause)
    return text[0]
