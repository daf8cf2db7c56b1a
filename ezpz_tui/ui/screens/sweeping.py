"""``W``: a sweep from the TUI, as ``ezpz-tui sweep`` runs one, in a worker thread.

The prompt starts from the plan on the form (:func:`~ezpz_tui.core.comparing.sweep_spec.
default_spec`); Enter runs every valid combination in turn (:func:`~ezpz_tui.core.comparing.
sweep.run_sweep`), each an ordinary run opened in the Run tab as it starts, and ends on the
Compare tab with the sweep's runs ranked. ``X`` during a sweep stops the run going on and
starts no more; launch and relaunch wait until the sweep is over.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from textual import work

from ezpz_tui.ui.messages import SweepProgress
from ezpz_tui.ui.screens.comparing import COMPARE_TAB, CompareControl

if TYPE_CHECKING:
    from ezpz_tui.core.comparing.sweep import SweepPlan


class SweepControl(CompareControl):
    """Starts, follows and stops the TUI's one sweep at a time."""

    def __init__(self) -> None:
        super().__init__()
        self._sweep_stop: threading.Event | None = None  # set: the sweep should stop

    @property
    def sweeping(self) -> bool:
        return self._sweep_stop is not None

    def action_sweep(self) -> None:
        from ezpz_tui.core.comparing.sweep import is_demo
        from ezpz_tui.core.comparing.sweep_spec import default_spec
        from ezpz_tui.ui.screens.search import SearchScreen

        form = self.form
        if self.sweeping:
            self.notify("A sweep is running: X stops it.", severity="warning")
            return
        if self.session is None or form.plan is None or form.alloc is None:
            self.notify("Still detecting the allocation.", severity="warning")
            return
        if self.session.alive():
            self.notify("A run of this session is alive: X stops it first.", severity="warning")
            return
        start = default_spec(form.plan, form.alloc, is_demo(form.plan.command))
        prompt = "sweep: tp=1,2 pp=1,2 cp=1 steps=20 (Enter runs every valid combination)"
        self.app.push_screen(SearchScreen(prompt, value=start), self._sweep_typed)

    def _sweep_typed(self, text: str | None) -> None:
        from ezpz_tui.core.comparing.sweep import plan_sweep, with_steps
        from ezpz_tui.core.comparing.sweep_spec import parse_spec

        if not text or self.form.plan is None or self.form.alloc is None:
            return
        try:
            spec = parse_spec(text)
            base = self.form.plan.with_changes(
                command=with_steps(self.form.plan.command, spec.steps)
            )
        except ValueError as exc:
            self.notify(str(exc), title="No sweep", severity="error")
            return
        plan = plan_sweep(base, self.form.alloc, spec.tp, spec.pp, spec.cp)
        if not plan.runs:
            why = "; ".join(f"tp{p.tp} pp{p.pp} cp{p.cp}: {w}" for p, w in plan.skipped[:3])
            self.notify(f"No layout of that sweep fits: {why}", title="No sweep", severity="error")
            return
        for skipped, why in plan.skipped:
            self.notify(f"skipped tp{skipped.tp} pp{skipped.pp} cp{skipped.cp}: {why}", timeout=6)
        self._sweep_stop = threading.Event()
        self._sweep_worker(plan, self._sweep_stop)

    @work(thread=True, exclusive=True, group="sweep")
    def _sweep_worker(self, plan: SweepPlan, stop: threading.Event) -> None:
        from ezpz_tui.core.comparing.sweep import run_sweep

        assert self.session is not None
        outcome = run_sweep(
            self.session,
            plan,
            on_event=lambda event: self.post_message(SweepProgress(event, None)),
            should_stop=stop.is_set,
        )
        if outcome.halted is not None:
            said = f"The sweep stopped: {outcome.halted.text}"
        else:
            best = "stopped" if outcome.stopped else f"{len(outcome.run_dirs)} runs"
            said = f"Sweep {outcome.record.sweep_id}: {best}"
        self.post_message(SweepProgress(None, said))

    async def on_sweep_progress(self, message: SweepProgress) -> None:
        from textual.widgets import TabbedContent

        event = message.event
        if event is None:  # the sweep is over: its runs, ranked
            self._sweep_stop = None
            self.notify(message.text or "", timeout=6)
            self.query_one(TabbedContent).active = COMPARE_TAB
            self.refresh_comparison()
            return
        where = f"sweep {event.index + 1}/{event.total}: tp{event.plan.tp} pp{event.plan.pp}"
        if event.kind == "started" and event.handle is not None:
            await self.open_run(event.handle.run_dir)
            self.notify(f"{where} cp{event.plan.cp} started", timeout=4)
        elif event.kind == "refused":
            self.notify(f"{where} refused: {event.message}", severity="warning", timeout=8)

    def action_stop_run(self) -> None:
        from ezpz_tui.ui.screens.confirm import ConfirmScreen

        stop = self._sweep_stop
        if stop is None:
            super().action_stop_run()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                stop.set()

        question = "Stop the sweep? The run going on is stopped and no other run starts."
        self.app.push_screen(ConfirmScreen(question, self.keymap), answered)

    def action_launch(self) -> None:
        if self.sweeping:
            self.notify("A sweep is running: X stops it first.", severity="warning")
        else:
            super().action_launch()

    def action_relaunch(self) -> None:
        if self.sweeping:
            self.notify("A sweep is running: X stops it first.", severity="warning")
        else:
            super().action_relaunch()
