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

from ezpz_tui.ui.main.comparison import COMPARE_TAB
from ezpz_tui.ui.messages import SweepProgress

if TYPE_CHECKING:
    from ezpz_tui.core.comparing.sweep import SweepPlan
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
            prompt = "sweep: tp=1,2 pp=1,2 cp=1 steps=20 (Enter runs every valid combination)"
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
