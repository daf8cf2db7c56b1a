"""``ezpz-tui tune``: the demo's fastest layout on this allocation, found by pruning on a memory
estimate and racing the rest under successive halving (:mod:`ezpz_tui.core.comparing.tune`).

Progress goes to stderr as it happens (each run, each rung's leader); stdout gets the
leaderboard (``--json``: as JSON), the best layout and how sure, the steps and time spent
against an exhaustive sweep of the same layouts, and the command that launches the best. Exit
status: 0 with a best layout, 1 when none finished a run, 2 for bad input (nothing fits, a
budget too small for one step, a command that is not the demo), 128+N when signal N stopped it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
from typing import Any

from ezpz_tui.cli.common import fail, say
from ezpz_tui.cli.launching import plan_from_args, session_for


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _host_limit_gb(ranks_per_node: int) -> float | None:
    """This host's available memory shared by its ranks (the CPU case): what each may use."""
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f)
    except OSError:
        return None
    kib = fields.get("MemAvailable", "").split()
    return int(kib[0]) / 2**20 / max(1, ranks_per_node) if kib and kib[0].isdigit() else None


class _Progress:
    def __call__(self, event: Any) -> None:
        from ezpz_tui.core.words import short_number

        where = f"rung {event.rung + 1} ({event.steps} steps) {event.entry.label}"
        if event.kind == "started":
            say(f"ezpz-tui: tune {where}: run {event.run.name if event.run else '?'}")
        elif event.kind == "ended":
            e = event.entry
            said = f"{short_number(e.tokens_per_s)} tokens/s" if e.state == "racing" else e.why
            say(f"ezpz-tui: tune {where}: {said}")
        elif event.kind == "refused":
            say(f"ezpz-tui: tune {where}: refused: {event.message}")
        elif event.kind == "rung":
            alive = [e.label for e in event.board if e.state == "racing"]
            say(f"ezpz-tui: tune rung {event.rung + 1} done; racing on: {', '.join(alive)}")


def cmd_tune(args: argparse.Namespace) -> int:
    from ezpz_tui.cli.comparing import peak_settings
    from ezpz_tui.core.comparing.memory import demo_model
    from ezpz_tui.core.comparing.sweep import is_demo
    from ezpz_tui.core.comparing.sweep_spec import DEFAULT_STEPS
    from ezpz_tui.core.comparing.tune import (
        FIRST_STEPS,
        board_lines,
        mfu_of,
        plan_tune,
        run_tune,
        sweep_cost,
    )
    from ezpz_tui.core.launching.processes import deferred_signals

    try:
        base = plan_from_args(args)
    except ValueError as exc:
        return fail(str(exc))
    if not is_demo(base.command):
        return fail(
            "tune estimates memory and counts FLOPs for the built-in demo only; "
            "give no command (or python -m runtime.examples.train)"
        )
    session = session_for(args)
    world = base.world_size(session.alloc)
    tps, pps, cps = (args.tp or _divisors(world), args.pp or _divisors(world), args.cp or [1])
    global_batch = args.global_batch or 8 * world
    limit = args.mem_limit_gb
    ppn = base.ranks_per_node(session.alloc)
    if limit is None and session.alloc.accelerator_kind == "cpu":
        limit = _host_limit_gb(ppn)
    model = demo_model(tps, pps, cps, global_batch)
    plan = plan_tune(base, session.alloc, (tps, pps, cps), model, limit)
    limit_said = "no memory limit" if limit is None else f"a limit of {limit:.3g} GiB a rank"
    for entry in plan.entries:
        if entry.state == "pruned":
            say(f"ezpz-tui: tune prunes {entry.label}: {entry.why}")
    if not plan.racing:
        return fail(f"no layout fits ({world} ranks, {limit_said}): see above")
    if args.dry_run:
        board = [(entry, None) for entry in plan.entries]
        if args.json:
            layouts = _layouts_json(board)
            print(
                json.dumps(
                    {"global_batch": global_batch, "mem_limit_gb": limit, "layouts": layouts},
                    indent=2,
                )
            )
        else:
            print("\n".join(board_lines(board)))
        return 0
    say(
        f"ezpz-tui: tune races {', '.join(e.label for e in plan.racing)} at a global batch of "
        f"{global_batch}, {limit_said}"
    )
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    with deferred_signals(stops) as stop_requested:
        outcome = run_tune(
            session,
            plan,
            args.first_steps or FIRST_STEPS,
            args.budget,
            _Progress(),
            lambda: bool(stop_requested),
        )
    if outcome.halted is not None:
        return fail(" ".join(outcome.halted.reasons))
    if outcome.too_small:
        return fail(f"--budget {args.budget:g} s is too small for one step of the first layout")
    peaks = peak_settings()
    sweep_steps, sweep_s = sweep_cost(outcome, DEFAULT_STEPS)
    board = [(entry, mfu_of(entry, peaks)) for entry in outcome.board]
    best = outcome.best
    launch = None
    if best is not None:
        sizes = ["--tp", str(best.plan.tp), "--pp", str(best.plan.pp), "--cp", str(best.plan.cp)]
        command = [*base.command, *model.args()]
        launch = shlex.join(["ezpz-tui", "launch", *sizes, "--ppn", str(ppn), "--", *command])
    if args.json:
        print(
            json.dumps(
                _as_json(outcome, board, model, limit, sweep_steps, sweep_s, launch), indent=2
            )
        )
    else:
        print("\n".join(_lines(outcome, board, sweep_steps, sweep_s, launch)))
    if stop_requested:
        return 128 + stop_requested[0]
    return 0 if best is not None else 1


def _as_json(
    outcome: Any,
    board: list[tuple[Any, float | None]],
    model: Any,
    limit: float | None,
    sweep_steps: int,
    sweep_s: float | None,
    launch: str | None,
) -> dict[str, Any]:
    return {
        "sweep_id": outcome.record.sweep_id,
        "global_batch": model.global_batch,
        "model": model.args(),
        "mem_limit_gb": limit,
        "rungs": outcome.rungs,
        "best": None if outcome.best is None else outcome.best.label,
        "gap": outcome.gap(),
        "stopped": outcome.stopped,
        "steps": outcome.steps_run,
        "seconds": outcome.seconds,
        "sweep_steps": sweep_steps,
        "sweep_seconds_estimate": sweep_s,
        "launch": launch,
        "layouts": _layouts_json(board),
    }


def _layouts_json(board: list[tuple[Any, float | None]]) -> list[dict[str, Any]]:
    return [
        {
            "layout": e.label,
            "state": e.state,
            "why": e.why,
            "estimate": None if e.estimate is None else e.estimate.as_dict(),
            "tokens_per_s": e.tokens_per_s,
            "mfu": mfu,
            "steps": e.steps,
            "runs": [p.name for p in e.runs],
        }
        for e, mfu in board
    ]


def _lines(
    outcome: Any,
    board: list[tuple[Any, float | None]],
    sweep_steps: int,
    sweep_s: float | None,
    launch: str | None,
) -> list[str]:
    from ezpz_tui.core.comparing.sweep_spec import DEFAULT_STEPS
    from ezpz_tui.core.comparing.tune import board_lines
    from ezpz_tui.core.words import short_number

    lines = [*board_lines(board), ""]
    best = outcome.best
    if best is None:
        lines.append(f"no best layout: {outcome.stopped or 'no layout finished a run'}")
    else:
        gap = outcome.gap()
        sure = f", {gap:.2f}x the next" if gap is not None else " (the only layout raced)"
        lines.append(f"best: {best.label} at {short_number(best.tokens_per_s)} tokens/s{sure}")
    lines.append(f"spent: {outcome.steps_run} steps in {outcome.seconds:.0f} s")
    if sweep_steps:
        guess = "" if sweep_s is None else f", about {sweep_s:.0f} s"
        lines.append(
            f"an exhaustive sweep at {DEFAULT_STEPS} steps a layout (the sweep prompt's "
            f"default): {sweep_steps} steps{guess}"
        )
    lines.append(f"compare them: ezpz-tui compare {outcome.record.sweep_id}")
    if launch is not None:
        lines.append(f"launch it: {launch}")
    return lines
