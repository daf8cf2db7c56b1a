"""The small read-only panels: allocation facts, doctor checks, the summary bar.

They are on the first frame, so the core modules they format with load when first used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static

from ezpz_tui.ui.widgets.steady import SteadyStatic
from ezpz_tui.ui.widgets.table import VimTable

if TYPE_CHECKING:
    from ezpz_tui.core.checking.check import Check
    from ezpz_tui.core.launching.allocation import Allocation
    from ezpz_tui.core.launching.plan import LaunchPlan
    from ezpz_tui.core.watching.checkpoint_gauge import Gauge

Clock = Callable[[], float]

LEVEL_STYLE = {"ok": "green", "warning": "yellow", "error": "bold red"}
LEVEL_MARK = {"ok": "ok", "warning": "warn", "error": "FAIL"}


class AllocationPanel(Static):
    """Scheduler, job, machine, hosts, accelerators and walltime left (counting down)."""

    def __init__(self, clock: Clock, **kwargs: object) -> None:
        super().__init__("Detecting the allocation …", **kwargs)  # type: ignore[arg-type]
        self.clock = clock
        self.alloc: Allocation | None = None
        self.bad_hosts: tuple[str, ...] = ()  # listed in the outputs' bad_hosts.txt
        self._shown: tuple[Allocation, str, tuple[str, ...]] | None = None

    def set_allocation(self, alloc: Allocation) -> None:
        self.alloc = alloc
        self.tick()

    def set_bad_hosts(self, hosts: list[str]) -> None:
        """The hosts ``bad_hosts.txt`` lists: those of this allocation are shown excluded."""
        self.bad_hosts = tuple(hosts)
        self.tick()

    def tick(self) -> None:
        from ezpz_tui.core.launching.allocation import format_duration
        from ezpz_tui.core.runs.hosts import short_host

        alloc = self.alloc
        if alloc is None:
            return
        walltime = format_duration(alloc.walltime_left(self.clock()))
        listed = {short_host(h) for h in self.bad_hosts}
        excluded = tuple(short_host(h) for h in alloc.hosts if short_host(h) in listed)
        if (alloc, walltime, excluded) == self._shown:
            return  # only the walltime changes between ticks; nothing to redraw
        # A new allocation or exclusion may change the panel's height; a tick never does.
        relayout = self._shown is None or self._shown[0::2] != (alloc, excluded)
        self._shown = (alloc, walltime, excluded)
        # One line per fact, cut rather than folded: a fold pushes the doctor off an 80x24 screen.
        table = Table.grid(padding=(0, 1))
        table.add_column(style="bold", no_wrap=True, min_width=9)
        table.add_column(no_wrap=True, overflow="ellipsis")
        short = [short_host(h) for h in alloc.hosts[:2]]
        more = f" +{len(alloc.hosts) - 2}" if len(alloc.hosts) > 2 else ""
        table.add_row("scheduler", alloc.scheduler)
        table.add_row("job", (alloc.job_id or "-").split(".")[0])
        table.add_row("machine", alloc.machine)
        table.add_row("hosts", f"{len(alloc.hosts)}: {', '.join(short)}{more}")
        if excluded:  # hosts that failures named: launches here skip them
            shown = Text(f"✗ {len(excluded)}: {', '.join(excluded)}", "bold red")
            shown.append(" (bad_hosts.txt)", "dim")
            table.add_row("excluded", shown)
        table.add_row("accel", f"{alloc.accelerators_per_host} {alloc.accelerator_kind}/host")
        table.add_row("walltime", walltime)
        self.update(table, layout=relayout)


class DoctorPanel(Vertical):
    """Each check with its status and reason; the highlighted one's remedy below the list.

    :meth:`run` probes in a worker; the answer arrives as :class:`Checked`, shown here and
    passed on to the screen (the summary counts the errors).
    """

    @dataclass(eq=False)
    class Checked(Message):
        """Every check has answered; ``cached``: some answers are the last start's probes,
        re-checked behind them."""

        checks: list[Check]
        cached: bool = False

    def compose(self) -> ComposeResult:
        yield Static("Doctor: running checks …", id="doctor-title")
        yield VimTable(id="doctor-table")
        yield Static("", id="doctor-remedy")

    def on_mount(self) -> None:
        table = self.query_one(VimTable)
        table.add_columns("", "check", "reason")
        table.is_heading = lambda row: self.checks[row].level != "ok"
        self.checks: list[Check] = []

    def run(
        self, alloc: Allocation, plan: LaunchPlan | None, outputs: Path, reuse: bool = False
    ) -> None:
        """Run the checks again (the probes take seconds: subprocesses import torch).
        ``reuse``: show the answers the probes gave last time at once, then probe again."""
        self.query_one("#doctor-title", Static).update("Doctor: running checks …")
        self._probe(alloc, plan, outputs, reuse)

    @work(thread=True, exclusive=True, group="doctor")
    def _probe(
        self, alloc: Allocation, plan: LaunchPlan | None, outputs: Path, reuse: bool
    ) -> None:
        from ezpz_tui.core.checking.doctor import run_checks
        from ezpz_tui.core.checking.probe_cache import ProbeCache, cache_path

        cache = ProbeCache(cache_path(), reuse=reuse)
        checks = run_checks(alloc, plan, outputs=outputs, cache=cache)
        if cache.used:
            self.post_message(self.Checked(checks, cached=True))
            cache = ProbeCache(cache_path(), reuse=False)
            checks = run_checks(alloc, plan, outputs=outputs, cache=cache)
        self.post_message(self.Checked(checks))

    def on_doctor_panel_checked(self, message: Checked) -> None:
        self.set_checks(message.checks, message.cached)

    def set_checks(self, checks: list[Check], cached: bool = False) -> None:
        """Show ``checks``; rows that have not changed stay as they are (a re-check that
        agrees with the cached answers moves nothing)."""
        if checks != self.checks:
            self.checks = checks
            table = self.query_one(VimTable)
            row = table.cursor_row
            table.clear()
            for check in checks:
                level = check.level
                mark = Text(LEVEL_MARK.get(level, level), LEVEL_STYLE.get(level, ""))
                table.add_row(mark, check.name, check.reason)
            if 0 < row < len(checks):
                table.move_cursor(row=row)
            self._show_remedy(table.cursor_row)
        errors = sum(c.level == "error" for c in checks)
        warnings = sum(c.level == "warning" for c in checks)
        title = Text("Doctor: ")
        title.append(f"{len(checks) - errors - warnings} ok", "green")
        title.append(f" {warnings} warn", "yellow" if warnings else "")
        title.append(f" {errors} fail", "bold red" if errors else "")
        if cached:
            title.append(" · cached, re-checking …", "dim")
        self.query_one("#doctor-title", Static).update(title)

    def _show_remedy(self, row: int) -> None:
        remedy = self.query_one("#doctor-remedy", Static)
        if not 0 <= row < len(self.checks):
            remedy.update("", layout=False)
            return
        check = self.checks[row]
        text = Text(f"{check.name}: ", "bold")
        text.append(check.reason)
        if check.remedy:
            text.append("\n→ ", "bold")
            text.append(check.remedy)
        remedy.update(text, layout=False)  # fixed height in the CSS: no relayout per key

    def on_data_table_row_highlighted(self, event: VimTable.RowHighlighted) -> None:
        self._show_remedy(event.cursor_row)


class SummaryBar(SteadyStatic):
    """One line visible from every region: run, state, step, loss, rate, walltime, doctor;
    told again every second, repainted when its words change."""

    def show(
        self,
        *,
        run: str | None,
        state: str | None,
        step: int | None,
        loss: float | None,
        steps_per_s: float | None,
        walltime: float | None,
        doctor_errors: int | None,
        slow: int = 0,
        finish: str | None = None,
        late: bool = False,
        goodput: float | None = None,
        checkpoint: Gauge | None = None,
        saving: str | None = None,
    ) -> None:
        """``finish``: when the run will end at its pace, or the step the walltime ends at
        (``late``, shown as a warning); ``goodput``: the productive share of its wall time;
        ``checkpoint``: the opened run's checkpoint gauge. ``saving``: how the save a relaunch
        waits for goes, in place of the run's figures."""
        text = Text()
        text.append(" ezpz ", "reverse bold")
        if run is None:
            text.append("  no run yet (r launches the plan)")
        else:
            style = {
                "running": "bold green",
                "succeeded": "green",
                "failed": "bold red",
                "stopped": "yellow",
                "hung": "bold magenta",
            }.get(state or "", "")
            text.append(f"  {run} ")
            text.append(f"● {state or '…'}", style)  # … until the run's state is read
            if saving:
                text.append(f"  {saving}", "bold cyan")
            elif step is not None:
                text.append(f"  step {step}")
            if loss is not None and not saving:
                text.append(f"  loss {loss:.4g}")
            if steps_per_s is not None and not saving:
                text.append(f"  {steps_per_s:.2f} it/s")
            if goodput is not None and not saving:
                text.append(f"  goodput {goodput * 100:.0f}%")
            if slow and not saving:
                text.append(f"  {slow} slow", "bold yellow")
            if finish and not saving:
                text.append(f"  {finish}", "bold yellow" if late else "")
            if checkpoint is not None and not saving:
                _append_gauge(text, checkpoint)
        text.append(f"  walltime {_duration(walltime)}")
        if doctor_errors is None:
            text.append("  doctor …")
        elif doctor_errors:
            text.append(f"  doctor: {doctor_errors} error(s)", "bold red")
        else:
            text.append("  doctor ok", "green")
        self.update(text, layout=False)  # one line, always: no relayout per tick


def _append_gauge(text: Text, checkpoint: Gauge) -> None:
    """The gauge's words, and its first warning in full (``top`` lists them all)."""
    text.append(f"  {checkpoint.words()}")
    if checkpoint.warnings:
        more = f" (+{len(checkpoint.warnings) - 1})" if len(checkpoint.warnings) > 1 else ""
        text.append(f"  ⚠ {checkpoint.warnings[0]}{more}", "bold yellow")


def _duration(seconds: float | None) -> str:
    """``format_duration``, without loading the allocation module for the first frame's ``-``."""
    if seconds is None:
        return "-"
    from ezpz_tui.core.launching.allocation import format_duration

    return format_duration(seconds)
