"""The Metrics view: any metric of the run's JSONL, for one rank, all ranks, or the mean across
ranks with its min/max band; EMA smoothing, log10, step or time on x, and the same metric of
earlier runs overlaid. One status line says what is shown and warns when the metric holds NaN
or infinite values.

The numbers live in :mod:`ezpz_tui.core.watching.metrics` (UI-free): a columnar store the app
appends the follower's record columns to, and ``prepare_plot``, which reduces a million points
per rank to about two per cell before plotext sees them (plotext's cost grows with the points
it is given: ~180 ms at 10k, docs/pitfalls.md). That package imports numpy, so it is
imported here only when the first metrics arrive: the TUI starts without numpy. The plot area
itself, and its painting, is :mod:`ezpz_tui.ui.widgets.metric_plot`.

Redraws are throttled while data streams (at most one every ``REDRAW_S``); a key press redraws
at once.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.color import Color
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static

from ezpz_tui.ui.palette import SCREEN_NAVIGATION, bindings_for, screen_bindings_for
from ezpz_tui.ui.widgets.metric_cursor import PlotCursor
from ezpz_tui.ui.widgets.metric_plot import MetricPlot, PlotColours
from runtime.record_columns import RecordColumns
from runtime.records import Record

if TYPE_CHECKING:
    from ezpz_tui.core.watching.metrics.plot import Drawing, Mode, PlotSettings
    from ezpz_tui.core.watching.metrics.store import MetricStore, RankData, XAxis

REDRAW_S = 0.5
"""Least time between two redraws caused by arriving data."""

SMOOTHING = (0.0, 0.6, 0.9, 0.99)
"""EMA weights ``s`` cycles through; 0 is off."""

MODE_NAMES: dict[Mode, str] = {"rank": "one rank", "all": "all ranks", "band": "mean, min–max"}
"""The views ``v`` cycles through, as the status line names them before data arrives."""


STACKED_PLOTS = 4
"""Plots small multiples stack (``V``)."""


class MetricsView(PlotCursor, Widget, can_focus=True):
    """Plots of the open run's metrics; keys from the "plot" scope of the keymap.

    The app owns the follower and calls, on the UI thread: :meth:`set_run` when a run opens,
    :meth:`add_records` with each batch, :meth:`set_selected_rank` when the rank list moves and
    :meth:`toggle_overlay` to compare an earlier run. The widget fills its container (width and
    height ``1fr``); the plot takes all but the status line. ``V`` stacks small multiples
    (:func:`~ezpz_tui.core.watching.metrics.cursor.stacked_metrics`) sharing the x axis, the
    zoom and the step cursor (:class:`PlotCursor`), whose readout replaces the status line.
    """

    BINDINGS: ClassVar = [
        # Digits (a count, ``0``) are read in ``PlotCursor.on_key``, as the rank list reads them.
        *bindings_for("plot", only=None, exclude={"count", "window_start"}),
        *bindings_for("navigation", only={"first", "last", "next_heading", "previous_heading"}),
        *screen_bindings_for("navigation", SCREEN_NAVIGATION),
        *bindings_for("global", only={"region_left", "region_right"}),
    ]
    ALLOW_MAXIMIZE = True

    DEFAULT_CSS = """
    MetricsView { width: 1fr; height: 1fr; layout: vertical; }
    MetricsView > MetricPlot { height: 1fr; }
    MetricsView > MetricPlot.-spare { display: none; }
    MetricsView > #metrics-status {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $text-muted;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    MetricsView:focus > #metrics-status { background: $primary 25%; color: $text; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.run_name = ""
        self.run_dir: str | os.PathLike[str] | None = None  # where a rank's series is read
        self.store: MetricStore | None = None
        self._reading: int | None = None  # the rank whose series a worker reads
        self._pending: dict[int, RecordColumns | Sequence[Record]] = {}
        self._pending_restarts: set[int] = set()
        self._stale = False
        self.overlays: dict[str, MetricStore] = {}
        self.joined: str | None = None  # the overlay the open run resumed from
        self.metric: str | None = None  # the user's choice; kept when another run opens
        self.mode: Mode = "rank"
        self.rank = 0
        self.smoothing = 0.0
        self.log_scale = False
        self.x_axis: XAxis = "step"
        self.stacked = False
        self.colours = PlotColours(((128, 128, 128),), (64, 64, 64), (255, 0, 0))
        self._frame = 0  # bumped by every redraw: the drawing cache key
        self._overlay_generation = 0
        self._drawings: dict[int, tuple[tuple[object, ...], Drawing]] = {}
        self._timer: Timer | None = None
        self._drawn_at = -math.inf

    def compose(self) -> ComposeResult:
        for slot in range(STACKED_PLOTS):
            yield MetricPlot(self, slot, classes="-spare" if slot else "")
        yield Static(id="metrics-status")

    def on_show(self) -> None:
        if self._stale:
            self.redraw()

    def on_mount(self) -> None:
        # The signal, not a watch of app.theme: it comes after the theme's variables are set.
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._theme_changed())
        self._theme_changed()

    def _theme_changed(self) -> None:
        self.colours = PlotColours.from_theme(self.app.theme_variables)
        self.redraw()

    # --- the app's calls --------------------------------------------------------------------

    def set_run(self, name: str, run_dir: str | os.PathLike[str] | None = None) -> None:
        """A run was opened: its metrics replace the previous run's (overlays stay). With
        ``run_dir`` a run of many ranks keeps only the shown ranks' series (the store reads
        the others' from their files when they are shown)."""
        self.run_name = name
        self.run_dir = run_dir
        self.joined = None
        self.store = None
        self._pending.clear()
        self._pending_restarts.clear()
        self.redraw()

    def adopt_store(self, store: MetricStore) -> None:
        """The opened run's metrics as they were read elsewhere, in place of what this view
        holds of it: folded by the first read's worker process (records that come later add
        to them), or a finished run's bands and last values from its digest
        (:meth:`MetricStore.settled`)."""
        self.store = store
        self._pending.clear()
        self._pending_restarts.clear()
        self.redraw()

    def add_records(
        self, records: Mapping[int, RecordColumns | Sequence[Record]], restarts: set[int]
    ) -> None:
        """New records from the follower (``Batch.records``: columns by rank; lists of
        :class:`Record` work too); ``restarts``: ranks whose file began again. Cheap: the
        columns are appended; the plot follows within ``REDRAW_S``."""
        if not records and not restarts:
            return
        for rank in restarts:
            self._pending.pop(rank, None)
            self._pending_restarts.add(rank)
        for rank, recs in records.items():
            have = self._pending.get(rank)
            if have is None:
                self._pending[rank] = recs
            else:
                if not isinstance(have, RecordColumns):
                    have = self._pending[rank] = RecordColumns.from_records(have)
                more = recs if isinstance(recs, RecordColumns) else RecordColumns.from_records(recs)
                have.extend(more)
        if self._timer is None:
            # Never 0: a Textual timer divides by its interval when it runs late.
            wait = max(0.01, self._drawn_at + REDRAW_S - time.monotonic())
            self._timer = self.set_timer(wait, self._flush)

    def _flush(self) -> None:
        self._timer = None
        self.redraw()

    def _take_pending(self) -> None:
        """Move what arrived since the last draw into the store.

        Records wait in columns until a draw needs them: adding to the store costs about the
        same for ten records as for a thousand, and with 256 ranks a batch every 0.1 s that
        overhead alone held the UI thread ~25 ms per batch (bench/monitor_bench.py).
        """
        if not self._pending and not self._pending_restarts:
            return
        if self.store is None:
            from ezpz_tui.core.watching.metrics.load import rank_loader
            from ezpz_tui.core.watching.metrics.store import MetricStore

            loader = rank_loader(self.run_dir) if self.run_dir is not None else None
            self.store = MetricStore(loader)
        for rank in self._pending_restarts:
            self.store.reset(rank)
        for rank, recs in self._pending.items():
            self.store.add(rank, recs)
        self._pending.clear()
        self._pending_restarts.clear()

    def set_selected_rank(self, rank: int) -> None:
        """The rank drawn in "one rank" mode (and on top of a many-rank band)."""
        if rank != self.rank:
            self.rank = rank
            self.redraw()

    def set_joined(self, name: str | None) -> None:
        """The open run resumed from the checkpoint of the run ``name`` (overlaid): its
        curve up to the open run's first step is drawn as the start of the open run's."""
        self.joined = name
        self._overlay_generation += 1
        self.redraw()

    def toggle_overlay(self, name: str, store: MetricStore | None) -> bool:
        """Overlay an earlier run's mean of the same metric, or remove it (``store`` None, or
        ``name`` already shown). Returns whether it is shown now: False for a run without
        metrics."""
        shown = name not in self.overlays and store is not None and store.count > 0
        if shown:
            assert store is not None
            self.overlays[name] = store
        else:
            self.overlays.pop(name, None)
        self._overlay_generation += 1
        self.redraw()
        return shown

    # --- keys -------------------------------------------------------------------------------

    def _names(self) -> list[str]:
        self._take_pending()
        stores = [s for s in (self.store, *self.overlays.values()) if s is not None]
        names = sorted(set().union(*(s.names() for s in stores)))
        return sorted(names, key=lambda n: n != "loss")

    def current_metric(self) -> str | None:
        """The metric on screen: the user's choice while it exists, else loss, else the first."""
        names = self._names()
        if self.metric in names:
            return self.metric
        return names[0] if names else None

    def _step_metric(self, step: int) -> None:
        names = self._names()
        if not names:
            self.app.bell()
            return
        current = self.current_metric()
        index = names.index(current) if current in names else 0
        self.metric = names[(index + step) % len(names)]
        self.redraw()

    def action_next_metric(self) -> None:
        self._step_metric(1)

    def action_previous_metric(self) -> None:
        self._step_metric(-1)

    def action_cycle_view(self) -> None:
        modes: list[Mode] = list(MODE_NAMES)
        self.mode = modes[(modes.index(self.mode) + 1) % len(modes)]
        self.redraw()

    def action_cycle_smoothing(self) -> None:
        self.smoothing = SMOOTHING[(SMOOTHING.index(self.smoothing) + 1) % len(SMOOTHING)]
        self.redraw()

    def action_toggle_log_scale(self) -> None:
        self.log_scale = not self.log_scale
        self.redraw()

    def action_toggle_x_axis(self) -> None:
        self.x_axis = "time" if self.x_axis == "step" else "step"
        self.window = None  # seconds and steps: the zoom does not carry over
        self.redraw()

    def action_toggle_stacked(self) -> None:
        """Small multiples on or off; the plots beyond the metrics the run has stay hidden."""
        self.stacked = not self.stacked
        shown = len(self.stacked_names()) if self.stacked else 1
        for plot in self.query(MetricPlot):
            plot.set_class(plot.slot >= max(1, shown), "-spare")
        self.redraw()

    def stacked_names(self) -> list[str]:
        """The metrics of the small multiples, top to bottom."""
        from ezpz_tui.core.watching.metrics.cursor import stacked_metrics

        return stacked_metrics(self._names(), self.current_metric(), STACKED_PLOTS)

    def metric_of(self, slot: int) -> str | None:
        """The metric plot ``slot`` shows: the current one, or a small multiple's."""
        if not self.stacked:
            return self.current_metric() if slot == 0 else None
        names = self.stacked_names()
        return names[slot] if slot < len(names) else None

    # --- drawing ----------------------------------------------------------------------------

    def settings(self, slot: int = 0) -> PlotSettings | None:
        """What plot ``slot`` shows now; None until some metric exists."""
        metric = self.metric_of(slot) if self.stacked else self.current_metric()
        if metric is None:
            return None
        from ezpz_tui.core.watching.metrics.plot import PlotSettings

        return PlotSettings(
            metric=metric,
            mode=self.mode,
            rank=self.rank,
            smoothing=self.smoothing,
            log=self.log_scale,
            x=self.x_axis,
            window=self.window,
        )

    def drawing(self, width: int, slot: int = 0) -> Drawing | None:
        """The prepared drawing for plot ``slot``, ``width`` cells wide, recomputed only after
        a redraw request (so data arriving between two throttled redraws is not drawn early)."""
        settings = self.settings(slot)
        if settings is None:
            return None
        key = (self._frame, self._overlay_generation, settings, width)
        cached = self._drawings.get(slot)
        if cached is None or cached[0] != key:
            from ezpz_tui.core.watching.metrics.plot import prepare_plot

            cached = self._drawings[slot] = (
                key,
                prepare_plot(self.store, self.overlays, settings, width, self.joined),
            )
            self._read_wanted()
        return cached[1]

    # --- a rank's series, read when shown (a lean store) -----------------------------------

    def _read_wanted(self) -> None:
        """Start reading a rank the plot asked for and the store does not hold: one at a time,
        in a thread (a file of a million records takes a while); the plot redraws with it."""
        store = self.store
        if store is None or self._reading is not None:
            return
        wanted = store.wanted()
        if not wanted:
            return
        rank = self.rank if self.rank in wanted else min(wanted)
        self._reading = rank
        self._read_rank(store, rank)

    @work(thread=True, group="metric-rank")
    def _read_rank(self, store: MetricStore, rank: int) -> None:
        data = store.read_rank(rank)
        with contextlib.suppress(RuntimeError):  # the app closed meanwhile
            self.app.call_from_thread(self._rank_read, store, rank, data)

    def _rank_read(self, store: MetricStore, rank: int, data: RankData | None) -> None:
        self._reading = None
        if store is not self.store or data is None:
            return
        self._take_pending()  # the records the read must cover, or it is read again
        if store.install(rank, data):
            self.redraw()
        # Else the file held fewer records than the follower brought: the next draw reads it
        # again (not at once: an unreadable file would be read in a loop).

    def waiting_message(self) -> str:
        if self.run_name:
            return f"no metrics yet — {self.run_name} has written no metrics/rank-*.jsonl records"
        return "no metrics yet — launch a run, or open one from the runs list"

    def redraw(self) -> None:
        """Redraw now (the plot at its next repaint, the status line at once); while the view
        is not on screen (another tab), only remember to when it shows again.

        Picking a rank in the Run tab calls :meth:`set_selected_rank`: drawing the hidden plot
        then (a store update and a band over 256 ranks) sat between that key and its repaint.
        """
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        # Pending records go into the store either way: as Python lists they take four times
        # the memory of the store's arrays.
        self._take_pending()
        self._drawn_at = time.monotonic()
        if self.is_mounted and not self.region.area:
            self._stale = True
            return
        self._stale = False
        self._frame += 1
        if not self.is_mounted:
            return
        self.show_status()
        for plot in self.query(MetricPlot):
            plot.refresh()

    def show_status(self) -> None:
        """The status line, or the cursor's readout while the cursor shows."""
        plot = self.query_one(MetricPlot)
        if self.cursor_step is not None and self.store is not None:
            names = self.stacked_names() if self.stacked else None
            line = self.readout_text(names)
        else:
            line = self.status_text(plot.size.width)
        self.query_one("#metrics-status", Static).update(line)

    def status_text(self, width: int) -> Text:
        """The status line: metric, warning, view, smoothing, scale, x axis, legend, points."""
        settings = self.settings()
        drawing = self.drawing(width)
        if settings is None:
            return Text(f"{self.run_name or 'no run open'} · no metrics yet")
        names = self._names()
        text = Text()
        text.append(settings.metric, "bold")
        text.append(f" ({names.index(settings.metric) + 1}/{len(names)})")
        warning = self._warning(settings.metric)
        if warning:
            text.append("  ")
            text.append(warning, Style(color=Color(*self.colours.mark).rich_color, bold=True))
        shown = drawing.shown if drawing and drawing.shown else MODE_NAMES[settings.mode]
        parts = [
            shown,
            f"ema {settings.smoothing}" if settings.smoothing else "raw",
            "log10" if settings.log else "linear",
            "x: time (s)" if settings.x == "time" else "x: step",
        ]
        if drawing and drawing.hidden:
            parts[2] += f" ({drawing.hidden} ≤ 0 hidden)"
        for part in parts:
            text.append(" · ")
            text.append(part)
        if drawing:
            for trace in drawing.traces:
                if trace.colour < 0:  # an overlay
                    text.append(" · ")
                    text.append("━ ", Style(color=Color(*self.colours.of(trace.colour)).rich_color))
                    text.append(trace.label)
            for name in drawing.missing:
                text.append(f" · {name}: no {settings.metric}")
            if drawing.join is not None:
                text.append(f" · ┆ resumed at step {drawing.join:.0f} from {self.joined}")
            text.append(f" · {drawing.raw:,} pts → {drawing.drawn}")
        if settings.window is not None:
            low, high = settings.window
            text.append(f" · zoom {low:,.6g}–{high:,.6g} (= all)")
        return text

    def _warning(self, metric: str) -> str:
        """``⚠ NaN on rank 3 from step 20 (+2 ranks)`` for the metric's first non-finite value."""
        if self.store is None:
            return ""
        from ezpz_tui.core.watching.metrics.store import nonfinite_word

        bad = self.store.nonfinite(metric)
        if not bad:
            return ""
        rank, first = min(bad.items(), key=lambda item: (item[1].step, item[0]))
        more = f" (+{len(bad) - 1} ranks)" if len(bad) > 1 else ""
        return f"⚠ {nonfinite_word(first.value)} on rank {rank} from step {first.step}{more}"
