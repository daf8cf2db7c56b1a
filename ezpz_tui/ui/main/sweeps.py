"""``W``: a sweep or a tune from the TUI, as ``ezpz-tui sweep`` and ``ezpz-tui tune`` run
them, in a worker thread.

The prompt starts from the plan on the form (:func:`~ezpz_tui.core.comparing.sweep_spec.
default_spec`); Enter runs every valid combination in turn (:func:`~ezpz_tui.core.comparing.
sweep.run_sweep`), each an ordinary run opened in the Run tab as it starts, and ends on the
Compare tab with the sweep's runs ranked. Starting the text with ``tune`` races the layouts
instead (:func:`~ezpz_tui.core.comparing.tune.run_tune`: pruned by a memory estimate, then
successive halving), with the leaderboard live above the Compare tab's table; at its end the
best layout is put on the launch form, so the launch key starts it. ``X`` during either stops
the run going on and starts no more; launch and relaunch wait until it is over.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ezpz_tui.ui.main.comparison import COMPARE_TAB
from ezpz_tui.ui.messages import SweepProgress, TuneProgress

if TYPE_CHECKING:
    from ezpz_tui.core.comparing.sweep import SweepPlan
    from ezpz_tui.core.comparing.sweep_spec import SweepSpec
    from ezpz_tui.core.comparing.tune import TunePlan
    from ezpz_tui.ui.main.host import Host

BUSY = "A sweep is running: X stops it first."


class Sweeps:
    """Starts, follows and stops the TUI's one sweep at a time."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self._stop: threading.Event | None = None  # set: the sweep should stop

    @property
    def sweeping(self) -> bool:
        return self._stop is not None

    def refuses_launch(self) -> bool:
        """Launch and relaunch wait for the sweep: say so, and whether they must."""
        if self.sweeping:
            self.host.notify(BUSY, severity="warning")
        return self.sweeping

    def start(self) -> None:
        from ezpz_tui.core.comparing.sweep import is_demo
        from ezpz_tui.core.comparing.sweep_spec import default_spec

        host, plan = self.host, self.host.plan
        if self.sweeping:
            host.notify("A sweep is running: X stops it.", severity="warning")
        elif host.session is None or plan is None:
            host.notify("Still detecting the allocation.", severity="warning")
        elif host.session.alive():
            host.notify("A run of this session is alive: X stops it first.", severity="warning")
        else:
            start = default_spec(plan, host.session.alloc, is_demo(plan.command))
            prompt = (
                "sweep: tp=1,2 pp=1,2 cp=1 steps=20 (Enter runs every valid combination; "
                "start with tune to race them: tune tp=1,2 steps=6 budget=600 mem=4)"
            )
            host.dialogs.prompt(prompt, start, self.typed)

    def typed(self, text: str | None) -> None:
        """The prompt's answer: plan the sweep's layouts and run those that fit."""
        from ezpz_tui.core.comparing.sweep import plan_sweep, with_steps
        from ezpz_tui.core.comparing.sweep_spec import parse_spec

        host, form_plan = self.host, self.host.plan
        if not text or form_plan is None or host.session is None:
            return
        try:
            spec = parse_spec(text)
            if spec.tune:
                self._tune(spec)
                return
            base = form_plan.with_changes(command=with_steps(form_plan.command, spec.steps))
        except ValueError as exc:
            host.notify(str(exc), title="No sweep", severity="error")
            return
        plan = plan_sweep(base, host.session.alloc, spec.tp, spec.pp, spec.cp)
        if not plan.runs:
            why = "; ".join(f"tp{p.tp} pp{p.pp} cp{p.cp}: {w}" for p, w in plan.skipped[:3])
            host.notify(f"No layout of that sweep fits: {why}", title="No sweep", severity="error")
            return
        for skipped, why in plan.skipped:
            host.notify(f"skipped tp{skipped.tp} pp{skipped.pp} cp{skipped.cp}: {why}", timeout=6)
        stop = self._stop = threading.Event()
        host.in_thread(lambda: self._run(plan, stop), "sweep", exclusive=True)

    def _tune(self, spec: SweepSpec) -> None:
        """Plan the race (pruning with the reasons said) and run it in a worker;
        ``ValueError`` for a command the tune cannot race."""
        from ezpz_tui.core.comparing.memory import demo_model
        from ezpz_tui.core.comparing.sweep import is_demo
        from ezpz_tui.core.comparing.tune import FIRST_STEPS, board_lines, plan_tune

        host, form_plan = self.host, self.host.plan
        assert form_plan is not None and host.session is not None
        if not is_demo(form_plan.command):
            raise ValueError("tune races the built-in demo only: put it in the command field")
        world = form_plan.world_size(host.session.alloc)
        model = demo_model(spec.tp, spec.pp, spec.cp, 8 * world)
        plan = plan_tune(
            form_plan, host.session.alloc, (spec.tp, spec.pp, spec.cp), model, spec.mem_gb
        )
        if not plan.racing:
            why = "; ".join(f"{e.label}: {e.why}" for e in plan.entries[:3])
            host.notify(f"No layout fits: {why}", title="No tune", severity="error")
            return
        host.show_race(board_lines([(e, None) for e in plan.entries]))
        host.show_tab(COMPARE_TAB)
        stop = self._stop = threading.Event()
        first = spec.steps or FIRST_STEPS
        host.in_thread(
            lambda: self._run_tune(plan, first, spec.budget, stop), "sweep", exclusive=True
        )

    def _run_tune(
        self, plan: TunePlan, first: int, budget: float | None, stop: threading.Event
    ) -> None:
        """The race, in the worker: each event posts the leaderboard with each layout's MFU
        (read here: it may run the CPU probe)."""
        from ezpz_tui.core.comparing.tune import (
            TuneEvent,
            board_lines,
            mfu_of,
            ranked_board,
            run_tune,
        )
        from ezpz_tui.core.watching.efficiency import PeakSettings

        session, post = self.host.session, self.host.post_message
        settings = self.host.settings
        peaks = PeakSettings(settings.peak_tflops, settings.peak_dtype)
        assert session is not None
        entries = {e.label: e for e in plan.entries}

        def board() -> list[str]:
            ranked = ranked_board(list(entries.values()))
            return board_lines([(e, mfu_of(e, peaks)) for e in ranked])

        def seen(event: TuneEvent) -> None:
            entries[event.entry.label] = event.entry
            for entry in event.board:
                entries[entry.label] = entry
            post(TuneProgress(event.run if event.kind == "started" else None, board()))

        outcome = run_tune(session, plan, first, budget, seen, stop.is_set)
        entries.update({e.label: e for e in outcome.board})
        best = outcome.best
        if outcome.halted is not None:
            said = f"The tune stopped: {outcome.halted.text}"
        elif outcome.too_small:
            said = f"The budget of {budget:g} s is too small for one step of the first layout"
        elif best is None:
            said = f"No best layout: {outcome.stopped or 'no layout finished a run'}"
        else:
            gap = outcome.gap()
            lead = f", {gap:.2f}x the next" if gap is not None else ""
            said = (
                f"Tune {outcome.record.sweep_id}: best {best.label}{lead}, "
                f"{outcome.steps_run} steps; it is on the launch form: r launches it"
            )
        post(TuneProgress(None, board(), said, None if best is None else best.plan))

    async def tune_progress(self, message: TuneProgress) -> None:
        host = self.host
        host.show_race(message.board)
        if message.run is not None:
            await host.open_run(message.run)
        if message.text is None:
            return
        self._stop = None  # the tune is over
        if message.best is not None:
            host.use_plan(message.best)
        host.notify(message.text, timeout=10)
        host.show_tab(COMPARE_TAB)
        host.refresh_comparison()

    def stop(self) -> bool:
        """``X`` during a sweep: ask, then stop it; False when no sweep is running."""
        stop = self._stop
        if stop is None:
            return False
        question = "Stop the sweep? The run going on is stopped and no other run starts."
        self.host.dialogs.confirm(question, stop.set)
        return True

    def _run(self, plan: SweepPlan, stop: threading.Event) -> None:
        from ezpz_tui.core.comparing.sweep import run_sweep

        session, post = self.host.session, self.host.post_message
        assert session is not None
        outcome = run_sweep(
            session,
            plan,
            on_event=lambda event: post(SweepProgress(event, None)),
            should_stop=stop.is_set,
        )
        if outcome.halted is not None:
            said = f"The sweep stopped: {outcome.halted.text}"
        else:
            best = "stopped" if outcome.stopped else f"{len(outcome.run_dirs)} runs"
            said = f"Sweep {outcome.record.sweep_id}: {best}"
        post(SweepProgress(None, said))

    async def progress(self, message: SweepProgress) -> None:
        host, event = self.host, message.event
        if event is None:  # the sweep is over: its runs, ranked
            self._stop = None
            host.notify(message.text or "", timeout=6)
            host.show_tab(COMPARE_TAB)
            host.refresh_comparison()
            return
        where = f"sweep {event.index + 1}/{event.total}: tp{event.plan.tp} pp{event.plan.pp}"
        if event.kind == "started" and event.handle is not None:
            await host.open_run(event.handle.run_dir)
            host.notify(f"{where} cp{event.plan.cp} started", timeout=4)
        elif event.kind == "refused":
            host.notify(f"{where} refused: {event.message}", severity="warning", timeout=8)
