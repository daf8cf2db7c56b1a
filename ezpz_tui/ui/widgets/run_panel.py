"""The Run tab: the opened run's header, its rank list over the log of the selected rank (or all).

The rank list sits above the log, not beside it: between the sidebars the main column is often
only 45-55 columns wide, and a log line needs the width more than the list does.

The screen owns the follower and hands each batch's :class:`~ezpz_tui.core.watching.monitor.Changes`
to :meth:`RunPanel.apply`; reading older lines and whole lines from disk runs in workers here,
which report back with :class:`RunPanel.OlderRead` and :class:`RunPanel.LineRead`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static

from ezpz_tui.core.watching.monitor import (
    CUT,
    LENGTH,
    NO_FILTER,
    OFFSET,
    RANK,
    TEXT,
    Changes,
    LogLine,
    RunMonitor,
    parse_filter,
    read_lines_before,
    read_whole_line,
)
from ezpz_tui.keymap.table import DEFAULT_KEYMAP, Keymap
from ezpz_tui.ui.palette import bindings_for
from ezpz_tui.ui.widgets.logview import LogView, rank_name, styled
from ezpz_tui.ui.widgets.ranks import RankList
from ezpz_tui.ui.widgets.runs import STATE_STYLE, RunDetails
from ezpz_tui.ui.widgets.steady import SteadyStatic

if TYPE_CHECKING:
    from ezpz_tui.core.watching.failure import Failure

NO_RUN = "No run opened. Launch one (r), or pick one in the runs list and press Enter."
OLDER_CHUNK = 2000  # lines read back per step when scrolling above the buffer
SHORT_BUFFER = 200  # a selected rank holding fewer lines has its earlier ones read back


def summary_line(failure: Failure, keymap: Keymap) -> Text:
    """One line for the Run tab: the cause, and the keys that say more and recover."""
    text = Text("✗ ", "bold red", no_wrap=True, overflow="ellipsis", end="")
    text.append(failure.cause, "red")
    text.append(f"  {keymap['show_failure'].label}: why", "dim")
    text.append(f" · {keymap['exclude_and_relaunch'].label}: exclude host and relaunch", "dim")
    return text


class RunPanel(Vertical):
    # The view keys act from the rank list too: pick a rank, then `a` or `&` without moving.
    BINDINGS = bindings_for("log", only={"toggle_all_ranks", "filter"})
    DEFAULT_CSS = """
    RunPanel #run-header { height: auto; max-height: 3; padding: 0 1; }
    RunPanel #run-failure { height: 1; padding: 0 1; display: none; }
    RunPanel #ranks-head { height: 1; display: none; overflow: hidden; }
    RunPanel RankList { height: auto; max-height: 35%; min-height: 2; }
    RunPanel #log-status { height: 1; padding: 0 1; background: $panel; }
    RunPanel #log { height: 1fr; }
    """

    @dataclass(eq=False)
    class OlderRead(Message):
        """Lines of ``rank``'s log before byte ``offset``, read back from disk."""

        rank: int
        offset: int
        older: list[LogLine]

    @dataclass(eq=False)
    class LineRead(Message):
        """The whole text of a log line that was cut to fit the buffer."""

        line: LogLine
        text: str

    @dataclass(eq=False)
    class FilterWanted(Message):
        """``&``: the screen asks for the log's filter, starting from ``current``, and hands
        the answer to :meth:`RunPanel.filter_by`."""

        prompt: str
        current: str

    @dataclass(eq=False)
    class WholeLine(Message):
        """Enter on a log line: the screen shows ``text`` whole in a dialog."""

        title: str
        text: Text

    def __init__(self, clock: Callable[[], float] = time.time, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.clock = clock
        self.monitor: RunMonitor | None = None
        self.read_only = False
        # The person chose a rank, or the panel went to the first failure already: from then on
        # a failure found later does not move the view.
        self._rank_settled = False
        self._placed: int | None = None  # a rank whose log show_step placed: keep it there
        # The header's run details and efficiency line as last shown: the line moves with rank
        # 0's records, which a finished run's details (said once) come before.
        self._details: RunDetails | None = None
        self._efficiency: str | None = None

    def compose(self) -> ComposeResult:
        yield SteadyStatic(NO_RUN, id="run-header")  # told again with every runs listing
        yield Static("", id="run-failure")
        yield Static("", id="ranks-head")
        yield RankList(self.clock, id="ranks")
        yield SteadyStatic("", id="log-status")
        yield LogView(id="log")

    @property
    def log(self) -> LogView:
        return self.query_one(LogView)

    @property
    def ranks(self) -> RankList:
        return self.query_one(RankList)

    def open(self, monitor: RunMonitor, read_only: bool) -> None:
        """Show ``monitor``'s run (empty until the first batch arrives)."""
        self.monitor = monitor
        self.read_only = read_only
        self._rank_settled = False
        self._details = None
        header = Text(monitor.run_dir.name, "bold")
        header.append("  reading …", "dim")
        self.query_one("#run-header", Static).update(header)
        self.ranks.set_monitor(monitor)
        self.show_failure(None)
        self.log.filter = NO_FILTER
        monitor.show(0)
        self.log.show([], 0, max(1, len(monitor.ranks)))

    def show_details(self, details: RunDetails) -> None:
        state = details.state.state
        header = Text(details.path.name, "bold")
        header.append("  ")
        header.append(state, STATE_STYLE.get(state, ""))
        sizes = details.plan.get("sizes")
        if isinstance(sizes, dict) and sizes:
            header.append("  " + " ".join(f"{k}={v}" for k, v in sizes.items()))
        if self.read_only:
            header.append("  (read-only: not started here)", "dim")
        if details.plan.get("parent"):
            header.append(f"\nparent {details.plan['parent']}", "dim")
            if details.restart:  # a relaunch's child: what its restart cost, on the same line
                header.append(f" · {details.restart}", "dim")
        if details.problem:
            header.append(f"\n{details.problem}: ranks as their files show", "yellow")
        if details.state.reason:
            header.append(f"\n{details.state.reason}", "yellow")
        if details.trackers:
            header.append(f"\n{details.trackers}", "dim")
        if details.stage:
            header.append(f"\n{details.stage}", "dim")
        self._details = details
        efficiency = self._efficiency = self._efficiency_line()
        if efficiency:
            header.append(f"\n{efficiency}", "dim")
        self.query_one("#run-header", Static).update(header)

    def _efficiency_line(self) -> str | None:
        """``MFU 41.2% · 407 TFLOPS/device at rank 0's last step · of H100 SXM5 bf16 989
        TFLOPS (datasheet)``, and on a line of its own why it is suspect where it is; why there
        is none, for a run that says its FLOPs per token."""
        from ezpz_tui.core.words import percent_of

        monitor = self.monitor
        if monitor is None:
            return None
        steps = monitor.steps
        eff = monitor.efficiency.get(steps.flops_per_token, self.clock())
        if eff is None:
            return None
        tokens = steps.tokens_per_s.get(0)
        if eff.peak is None:
            return f"MFU {eff.why_not}"
        tflops = eff.tflops(tokens)
        at = "-" if tflops is None else f"{tflops:.3g}"
        line = (
            f"MFU {percent_of(eff.mfu(tokens))} · {at} TFLOPS/device at rank 0's last step · "
            f"of {eff.peak.label}"
        )
        why = eff.suspect(tokens)
        return line if why is None else f"{line}\n{why}"

    def show_failure(self, failure: Failure | None, keymap: Keymap = DEFAULT_KEYMAP) -> None:
        """The failure's cause in one line under the header, with the keys that say why and
        recover; hidden while the run has not failed."""
        line = self.query_one("#run-failure", Static)
        line.display = failure is not None
        if failure is not None:
            line.update(summary_line(failure, keymap))

    def apply(self, changes: Changes) -> None:
        assert self.monitor is not None
        ranks, log = self.ranks, self.log
        ranks.update_rows(wait=False)
        if self._details is not None and self._efficiency_line() != self._efficiency:
            self.show_details(self._details)
        if changes.problems:
            self._status_changed()
        first = self.monitor.first_failure
        if not self._rank_settled and first is not None and log.rank not in (None, first):
            self._rank_settled = True
            ranks.select_rank(first)  # a failed run opens on the rank that failed first
            return
        if log.rank is None:
            log.append(changes.arrived)
        elif log.rank in changes.restarted:
            self._show_rank(log.rank)
        elif log.rank in changes.by_rank:
            log.append(changes.by_rank[log.rank])

    def tick(self) -> None:
        """Once a second: ages and stalls change with time alone (in an ended run they do
        not, and 16,384 rows are not worth re-sorting for nothing)."""
        run = self.monitor.run_state if self.monitor is not None else None
        if self.monitor is not None and (run is None or run.live):
            self.ranks.update_rows(wait=False)

    # --- reactions --------------------------------------------------------------------------

    def show_step(self, rank: int, step: int, span: tuple[int, int]) -> str:
        """Show ``rank``'s log with the cursor on the line printed around ``step`` (found as
        :func:`~ezpz_tui.core.watching.steplines.line_of_step` says); returns how it was
        found, in words for a notice ("" when the run has no such rank)."""
        from ezpz_tui.core.watching.steplines import line_of_step

        if self.monitor is None or rank not in self.monitor.ranks:
            return ""
        self._rank_settled = True  # the person chose this rank: a failure elsewhere keeps out
        if self.ranks.selected != rank:
            self._placed = rank  # the list's Selected message would show the log's end
        self.ranks.select_rank(rank)
        log = self.log
        self._show_rank(rank)
        index, how = line_of_step([line[TEXT] for line in log.lines], step, span)
        log.move_to(index)
        log.call_after_refresh(log.action_center)
        return {
            "exact": f"rank {rank}, step {step}",
            "before": f"rank {rank}: the last line before step {step}",
            "after": f"rank {rank}: step {step} is older than the lines held; scroll up",
            "proportion": f"rank {rank}: no step in its log; placed by position",
            "none": f"rank {rank} has printed nothing",
        }[how]

    @on(RankList.Selected)
    def _rank_selected(self, event: RankList.Selected) -> None:
        if self.monitor is None:
            return
        if self._placed == event.rank:
            self._placed = None
            return
        if self.ranks.has_focus:
            self._rank_settled = True
        self._show_rank(event.rank)

    def _show_rank(self, rank: int) -> None:
        """``rank``'s log in the log view; its buffer grows to what a view holds and, when it
        was off screen (a few lines kept), its earlier lines are read back from disk."""
        assert self.monitor is not None
        self.monitor.show(rank)
        self.log.show(self.monitor.lines_of(rank), rank, len(self.monitor.ranks))
        self.log.want_older_if_short(SHORT_BUFFER)

    @on(RankList.Sorted)
    def _ranks_sorted(self, event: RankList.Sorted) -> None:
        head = self.query_one("#ranks-head", Static)
        head.display = event.worth_showing
        head.update(event.heading)

    @on(LogView.StatusChanged)
    def _status_changed(self) -> None:
        """The line above the log, then what of the shown rank's files cannot be used (all
        ranks': of every rank), where the lines they hold would have been."""
        text = self.log.status_text()
        problems = self.monitor.problems_of(self.log.rank) if self.monitor else []
        for line in problems:
            text.append(f" · {line}", "bold red")
        # One line (the CSS): no layout of the screen for each rank a key shows.
        self.query_one("#log-status", Static).update(text, layout=False)

    @on(RankList.Chosen)
    def _rank_chosen(self) -> None:
        self.log.focus()

    def action_toggle_all_ranks(self) -> None:
        if self.monitor is None:
            return
        log, count = self.log, len(self.monitor.ranks)
        if log.rank is None:
            self._show_rank(self.ranks.selected or 0)
        else:
            self.monitor.show(None)
            log.show(self.monitor.all_lines, None, count)

    def action_filter(self) -> None:
        log = self.log
        current = " ".join(
            ([f"@{','.join(map(str, sorted(log.filter.ranks)))}"] if log.filter.ranks else [])
            + ([log.filter.text] if log.filter.text else [])
        )
        prompt = "filter: @0,3-5 for ranks, then text; empty clears (Enter)"
        self.post_message(self.FilterWanted(prompt, current))

    def filter_by(self, spec: str | None) -> None:
        """The filter typed after ``&`` (None: the prompt was closed, nothing changes)."""
        if spec is None or self.monitor is None:
            return
        log = self.log
        line_filter, problem = parse_filter(spec)
        if problem:
            self.notify(problem, severity="warning")
        source = self.monitor.all_lines if log.rank is None else self.monitor.lines_of(log.rank)
        log.set_filter(line_filter, source)

    @on(LogView.WantOlder)
    def _want_older(self, event: LogView.WantOlder) -> None:
        if self.monitor is not None:
            self._read_older(self.monitor.log_path(event.rank), event.rank, event.offset)

    @work(thread=True, group="older")
    def _read_older(self, path: Path, rank: int, offset: int) -> None:
        older = read_lines_before(path, rank, offset, OLDER_CHUNK)
        self.post_message(self.OlderRead(rank, offset, older))

    def on_run_panel_older_read(self, message: OlderRead) -> None:
        log = self.log
        if log.rank == message.rank and log.lines and log.lines[0][OFFSET] == message.offset:
            log.prepend(message.older)
        else:
            log.older_pending = False

    @on(LogView.ShowLine)
    def _show_line(self, event: LogView.ShowLine) -> None:
        line = event.line
        if self.monitor is None or line[OFFSET] < 0 or not line[CUT]:
            self._show_whole(line, line[TEXT])
        else:
            self._read_whole(self.monitor.log_path(line[RANK]), line)

    @work(thread=True, group="whole-line")
    def _read_whole(self, path: Path, line: LogLine) -> None:
        self.post_message(self.LineRead(line, read_whole_line(path, line)))

    def on_run_panel_line_read(self, message: LineRead) -> None:
        self._show_whole(message.line, message.text)

    def _show_whole(self, line: LogLine, text: str) -> None:
        title = f"{rank_name(line[RANK])}, byte {line[OFFSET]}, {line[LENGTH]} bytes"
        shown = styled(text)
        shown.no_wrap = False
        self.post_message(self.WholeLine(title, shown))
