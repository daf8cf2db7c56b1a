"""A tune: the fastest layout of the demo found in a fraction of an exhaustive sweep.

The field's tuners (NeMo's AutoConfigurator, Megatron's and MindSpeed's auto-tuning) do two
things a sweep does not: they prune by a memory estimate before running anything, and they race
short runs. So does this. :func:`plan_tune` takes every TP x PP x CP combination that fits the
allocation (the one plan validation, :func:`ezpz_tui.core.launching.plan.check`) and the demo's
model fixed for all of them (:mod:`ezpz_tui.core.comparing.memory`); a layout the model does not
divide, or whose worst rank's estimate is over the memory limit, is pruned with the reason.
:func:`run_tune` races the rest under successive halving: each rung runs every survivor for
``first_steps x 2**rung`` steps (a fresh run each time, one at a time: layouts measured side by
side would measure each other), ranks them by median tokens/s past warm-up, and keeps the faster
half, until one is left. Every run has the same global batch, so their losses compare too.

The runs are ordinary runs whose parent is the tune's sweep record, so ``ezpz-tui compare
<sweep-id>`` shows them all. ``budget_s`` bounds the wall time: no run starts past it, and a run
going when it passes is stopped; a first run stopped before its first step means the budget
cannot hold one (:attr:`TuneOutcome.too_small`).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from ezpz_tui.core.comparing.facts import read_facts
from ezpz_tui.core.comparing.memory import DemoModel, MemoryEstimate, demo_problem, estimate
from ezpz_tui.core.comparing.sweep import is_demo, layout_label, never, start_in_sweep
from ezpz_tui.core.comparing.sweep_record import (
    FINISHED,
    RUNNING,
    STOPPED,
    SweepRecord,
    new_sweep,
    write_sweep,
)
from ezpz_tui.core.launch_result import NotStarted, not_started
from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import LaunchPlan, LaunchRefused, check
from ezpz_tui.core.session import Session
from ezpz_tui.core.watching.efficiency import PeakSettings
from ezpz_tui.core.watching.numbers import read_numbers
from ezpz_tui.core.words import percent_of, short_number
from runtime.rundir import State

EntryState = Literal["racing", "dropped", "pruned", "best"]
FIRST_STEPS = 6  # a layout's first race: 2 steps of warm-up, 4 measured


@dataclass(frozen=True)
class Entry:
    """One layout on the leaderboard: its estimate, where the race left it and why, and what
    its latest run measured."""

    plan: LaunchPlan
    estimate: MemoryEstimate | None
    state: EntryState
    why: str = ""
    runs: tuple[Path, ...] = ()
    tokens_per_s: float | None = None
    step_time_s: float | None = None
    steps: int = 0  # steps run over all its runs
    seconds: float = 0.0  # wall time of all its runs, start-up included

    @property
    def label(self) -> str:
        return layout_label(self.plan)


@dataclass(frozen=True)
class TunePlan:
    """The layouts a tune races and those it pruned, with the model they all train."""

    model: DemoModel
    entries: tuple[Entry, ...]

    @property
    def racing(self) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.state == "racing")


def plan_tune(
    base: LaunchPlan,
    alloc: Allocation,
    sizes: tuple[Sequence[int], Sequence[int], Sequence[int]],
    model: DemoModel,
    mem_limit_gb: float | None,
) -> TunePlan:
    """Every combination of ``sizes`` (tp, pp, cp) on ``base``: racing, or pruned with why."""
    entries = []
    tps, pps, cps = (list(dict.fromkeys(values)) for values in sizes)
    for tp, pp, cp in itertools.product(tps, pps, cps):
        plan = base.with_changes(tp=tp, pp=pp, cp=cp)
        try:
            check(plan, alloc)
        except LaunchRefused as refused:
            why = " ".join(p.message for p in refused.problems)
            entries.append(Entry(plan, None, "pruned", why))
            continue
        dp = plan.world_size(alloc) // (tp * pp * cp)
        problem = demo_problem(model, tp, pp, cp, dp)
        if problem is not None:
            entries.append(Entry(plan, None, "pruned", problem))
            continue
        guess = estimate(model, tp, pp, cp, dp)
        if mem_limit_gb is not None and guess.total_gb > mem_limit_gb:
            why = f"estimate {guess.total_gb:.3g} GiB a rank is over the {mem_limit_gb:g} GiB limit"
            entries.append(Entry(plan, guess, "pruned", why))
            continue
        entries.append(Entry(plan, guess, "racing"))
    return TunePlan(model, tuple(entries))


EventKind = Literal["started", "ended", "rung", "refused"]


@dataclass(frozen=True)
class TuneEvent:
    """``started``/``ended``: a run of ``entry`` in ``rung``; ``rung``: a rung was decided (the
    leaderboard in ``board``); ``refused``: a launch refused when its turn came."""

    kind: EventKind
    rung: int
    steps: int
    entry: Entry
    board: tuple[Entry, ...] = ()
    message: str = ""
    run: Path | None = None  # the run ``started`` started


@dataclass(frozen=True)
class TuneOutcome:
    """The final leaderboard (best first), the tune's record, and how it ended."""

    record: SweepRecord
    board: tuple[Entry, ...]
    run_dirs: tuple[Path, ...]
    steps_run: int
    seconds: float
    stopped: str | None = None  # why it ended before one layout was left
    halted: NotStarted | None = None
    too_small: bool = False  # the budget ran out before the first run's first step
    rungs: list[int] = field(default_factory=list)  # steps per run of each rung

    @property
    def best(self) -> Entry | None:
        return next((e for e in self.board if e.state == "best"), None)

    def gap(self) -> float | None:
        """How sure: the best's tokens/s over the next one's in the last rung both ran."""
        best = self.best
        others = [e for e in self.board if e is not best and e.tokens_per_s]
        if best is None or not best.tokens_per_s or not others:
            return None
        return best.tokens_per_s / max(e.tokens_per_s or 0.0 for e in others)


def with_demo_args(command: Sequence[str], steps: int, model: DemoModel) -> tuple[str, ...]:
    """The demo command with ``--steps`` and the tune's fixed model and global batch."""
    if not is_demo(command):
        raise ValueError("tune estimates memory and races the built-in demo only")
    return (*command, "--steps", str(steps), *model.args())


def ranked_board(entries: Sequence[Entry]) -> tuple[Entry, ...]:
    """Best first: the best, the racing by speed, the dropped by speed, the pruned."""
    order = {"best": 0, "racing": 1, "dropped": 2, "pruned": 3}
    return tuple(sorted(entries, key=lambda e: (order[e.state], -(e.tokens_per_s or 0.0))))


def run_tune(
    session: Session,
    plan: TunePlan,
    first_steps: int,
    budget_s: float | None = None,
    on_event: Callable[[TuneEvent], None] = lambda event: None,
    should_stop: Callable[[], bool] = never,
    poll_s: float = 0.2,
    clock: Callable[[], float] = time.monotonic,
) -> TuneOutcome:
    """Race ``plan``'s layouts (see the module docstring); blocks, as :func:`~.sweep.run_sweep`."""
    start = clock()
    entries = {e.label: e for e in plan.entries}
    racing = [e.label for e in plan.racing]
    base_command = plan.racing[0].plan.command if racing else ()
    record = SweepRecord(
        sweep_id="",
        created=0.0,
        state=RUNNING,
        layouts=tuple(racing),
        skipped=tuple((e.label, e.why) for e in plan.entries if e.state == "pruned"),
        runs=(),
        steps=first_steps,
        command=tuple(base_command),
    )
    outputs = session.store.outputs
    try:
        record = new_sweep(outputs, record)
    except OSError as exc:
        board = ranked_board(list(entries.values()))
        halted = not_started(exc, outputs, "launch")
        return TuneOutcome(record, board, (), 0, 0.0, halted=halted)
    run_dirs: list[Path] = []
    steps_run, rung, rungs = 0, 0, []
    stopped: str | None = None
    halted: NotStarted | None = None
    try:
        while len(racing) > 1 and stopped is None and halted is None:
            steps = first_steps * 2**rung
            rungs.append(steps)
            for label in racing:
                if should_stop():
                    stopped = "stopped"
                    break
                if budget_s is not None and clock() - start >= budget_s:
                    stopped = f"the budget of {budget_s:g} s ran out"
                    break
                entry = entries[label]
                run_plan = entry.plan.with_changes(
                    command=with_demo_args(base_command, steps, plan.model)
                )
                began = clock()
                record, handle = start_in_sweep(session, run_plan, record)
                if isinstance(handle, NotStarted) and handle.kind == "refused":
                    said = " ".join(handle.reasons)
                    entries[label] = replace(entry, state="dropped", why=f"refused: {said}")
                    on_event(TuneEvent("refused", rung, steps, entries[label], message=said))
                    continue
                if isinstance(handle, NotStarted):
                    halted = handle
                    break
                run_dirs.append(handle.run_dir)
                on_event(TuneEvent("started", rung, steps, entry, run=handle.run_dir))
                while handle.wait(poll_s) is None:
                    over = budget_s is not None and clock() - start >= budget_s
                    if should_stop() or over:
                        stopped = "stopped" if not over else f"the budget of {budget_s:g} s ran out"
                        handle.stop(reason=stopped)
                        break
                numbers = read_numbers(handle.run_dir)
                steps_run += numbers.records
                ok = handle.state.state == State.SUCCEEDED
                entries[label] = replace(
                    entry,
                    runs=(*entry.runs, handle.run_dir),
                    tokens_per_s=numbers.tokens_per_s if ok else entry.tokens_per_s,
                    step_time_s=numbers.step_time_s if ok else entry.step_time_s,
                    steps=entry.steps + numbers.records,
                    seconds=entry.seconds + clock() - began,
                    state="racing" if ok else "dropped",
                    why="" if ok else f"its run {handle.run_dir.name} {handle.state.state}",
                )
                on_event(TuneEvent("ended", rung, steps, entries[label]))
                if stopped is not None:
                    break
            if stopped is not None or halted is not None:
                break
            alive = [lab for lab in racing if entries[lab].state == "racing"]
            alive.sort(key=lambda lab: -(entries[lab].tokens_per_s or 0.0))
            keep = alive[: max(1, math.ceil(len(alive) / 2))]
            for lab in alive[len(keep) :]:
                why = f"in the slower half after {steps} steps"
                entries[lab] = replace(entries[lab], state="dropped", why=why)
            racing = keep
            leader = entries[keep[0]] if keep else entries[label]
            on_event(TuneEvent("rung", rung, steps, leader, ranked_board(list(entries.values()))))
            rung += 1
        if stopped is None and halted is None and len(racing) == 1:
            entries[racing[0]] = replace(entries[racing[0]], state="best", why="the race's last")
    except OSError as exc:  # the record could not be rewritten
        halted = not_started(exc, outputs, "launch")
    finally:
        done = stopped is None and halted is None
        # the budget ended the tune before any step of any layout: it cannot hold one
        too_small = stopped is not None and stopped != "stopped" and steps_run == 0
        ended = replace(record, state=FINISHED if done else STOPPED)
        try:
            write_sweep(outputs, ended)
            record = ended
        except OSError:
            pass
    return TuneOutcome(
        record,
        ranked_board(list(entries.values())),
        tuple(run_dirs),
        steps_run,
        clock() - start,
        stopped,
        halted,
        too_small,
        rungs,
    )


def sweep_cost(outcome: TuneOutcome, steps: int) -> tuple[int, float | None]:
    """What an exhaustive sweep of the raced layouts at ``steps`` steps each would cost: its
    steps, and its seconds estimated from each layout's runs (their start-up, and their
    measured step time for the steps); None where a layout has no measured step time."""
    raced = [e for e in outcome.board if e.runs]
    if not raced or any(e.step_time_s is None for e in raced):
        return steps * len(raced), None
    seconds = 0.0
    for e in raced:
        step_s = e.step_time_s or 0.0
        start_up = max(0.0, e.seconds - e.steps * step_s) / len(e.runs)
        seconds += start_up + steps * step_s
    return steps * len(raced), seconds


def mfu_of(entry: Entry, peaks: PeakSettings) -> float | None:
    """The MFU of ``entry``'s latest run (reading it may run the CPU probe: not in a UI
    thread)."""
    return read_facts(entry.runs[-1], peaks).mfu if entry.runs else None


WHY_WIDTH = 44  # the reason column: the leaderboard stays within 100 columns


def board_lines(board: Sequence[tuple[Entry, float | None]]) -> list[str]:
    """The leaderboard as text, one layout a line with its MFU beside it (None: none yet),
    best first; the CLI prints it and the Compare tab shows it while the race goes on."""
    lines = [
        f"{'#':>2} {'LAYOUT':<12} {'STATE':<8} {'EST GiB':>8} {'TOK/s':>6} {'MFU':>6} "
        f"{'STEPS':>5}  WHY"
    ]
    for i, (e, mfu) in enumerate(board):
        est = "-" if e.estimate is None else f"{e.estimate.total_gb:.3g}"
        why = e.why if len(e.why) <= WHY_WIDTH else e.why[: WHY_WIDTH - 1] + "…"
        lines.append(
            f"{i + 1:>2} {e.label:<12} {e.state:<8} {est:>8} {short_number(e.tokens_per_s):>6} "
            f"{percent_of(mfu):>6} {e.steps:>5}  {why}".rstrip()
        )
    return lines
