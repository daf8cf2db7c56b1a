"""What the summary bar says of the run on screen: its state (``hung`` when every rank is
silent), progress, expected finish against the walltime, stragglers, goodput and checkpoint
gauge, gathered from the opened run, the launch that started it and the allocation.

Its own module because the screen asks for it from a dozen places (every batch, tick, listing
and launch) and the figures are read from parts the screen only holds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ezpz_tui.core.checking.check import Check
    from ezpz_tui.core.launching.allocation import Allocation
    from ezpz_tui.core.launching.supervisor import RunHandle
    from ezpz_tui.ui.opened_run import OpenedRun
    from ezpz_tui.ui.widgets.panels import SummaryBar


def show_summary(
    bar: SummaryBar,
    opened: OpenedRun | None,
    handle: RunHandle | None,
    alloc: Allocation | None,
    checks: Sequence[Check] | None,
    clock: Callable[[], float],
    checkpoint_max_age_s: float,
    saving: str | None,
) -> None:
    """Show on ``bar`` the opened run (or, with none opened, the launch ``handle``) as of
    ``clock()``."""
    progress = opened.progress if opened else None
    name = opened.path.name if opened else handle.run_dir.name if handle else None
    state = handle.state.state if handle else opened.state if opened else None
    slow = 0
    if state == "running" and opened and opened.monitor.hung(clock()) is not None:
        state = "hung"  # every rank silent: S shows where each one waits
    elif state == "running" and opened:
        monitor, now = opened.monitor, clock()
        slow = sum(monitor.state_of(r, now) == "slow" for r in monitor.slow_ranks)
    elif opened and opened.monitor.run_state and not opened.monitor.run_state.live:
        slow = len(opened.monitor.slow_ranks)  # its stragglers as of its end
    walltime = alloc.walltime_left(clock()) if alloc else None
    finish = None
    if opened and progress and state == "running":
        from ezpz_tui.core.watching.finish import expected_finish

        step_s = opened.monitor.steps.median
        if step_s is None and progress.steps_per_s:
            step_s = 1 / progress.steps_per_s
        finish = expected_finish(progress.step, opened.total_steps, step_s, walltime)
    bar.show(
        run=name,
        state=state,
        step=progress.step if progress else None,
        loss=progress.loss if progress else None,
        steps_per_s=progress.steps_per_s if progress else None,
        finish=finish.words() if finish else None,
        late=finish is not None and finish.reached is not None,
        walltime=walltime,
        doctor_errors=None if checks is None else sum(c.level == "error" for c in checks),
        slow=slow,
        goodput=opened.goodput if opened else None,
        checkpoint=opened.checkpoint_gauge(clock(), checkpoint_max_age_s) if opened else None,
        saving=saving,
    )
