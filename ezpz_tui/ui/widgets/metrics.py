"""The metrics plot: any metric of the run's JSONL, for one rank, all ranks, or the mean across
ranks with its min/max band; EMA smoothing, log10, step or time on x, and the same metric of
earlier runs overlaid. One status line says what is shown and warns when the metric holds NaN
or infinite values.

The numbers live in :mod:`ezpz_tui.core.watching.metrics` (UI-free): a columnar store the app appends
the follower's record columns to, and :func:`~ezpz_tui.core.watching.metrics.prepare_plot`, which reduces a
million points per rank to about two per cell before plotext sees them (plotext's cost grows
with the points it is given: ~180 ms at 10k, DESIGN.md section 6). That module imports numpy,
so it is imported here only when the first metrics arrive: the TUI starts without numpy.

Redraws are throttled while data streams (at most one every ``REDRAW_S``); a key press redraws
at once. The plot is painted from plotext's character matrix straight into a rich Text rather
than through plotext's ANSI string and ``Text.from_ansi``: that round trip cost more than
plotting the points did.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING

from plotext._utility import colors_to_ansi
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.color import Color
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static
from textual_plotext import PlotextPlot

from ezpz_tui.ui.palette import bindings_for
from ezpz_tui.ui.widgets.topology import group_palette
from runtime.records import Record, RecordColumns

if TYPE_CHECKING:
    from textual_plotext.plot import Plot

    from ezpz_tui.core.watching.metrics import Drawing, MetricStore, Mode, PlotSettings, XAxis

REDRAW_S = 0.5
"""Least time between two redraws caused by arriving data."""

SMOOTHING = (0.0, 0.6, 0.9, 0.99)
"""EMA weights ``s`` cycles through; 0 is off."""

MODE_NAMES: dict[Mode, str] = {"rank": "one rank", "all": "all ranks", "band": "mean, min–max"}
"""The views ``v`` cycles through, as the status line names them before data arrives."""

MARKER = "hd"
"""plotext's half-block marker: 2x2 dots per cell, and a third cheaper to build than braille."""

BAND_MARKER = "sd"
"""Full blocks: one stroke per column fills the band solid."""

RGB = tuple[int, int, int]


@dataclass(frozen=True)
class PlotColours:
    """Line, band and warning colours taken from a theme (``App.theme_variables``)."""

    lines: tuple[RGB, ...]
    band: RGB
    mark: RGB

    @classmethod
    def from_theme(cls, variables: Mapping[str, str]) -> PlotColours:
        palette = group_palette(variables)
        primary = palette[0]
        surface = Color.parse(variables.get("surface", "#1e1e1e"))
        return cls(
            lines=tuple(c.rgb for c in palette),
            band=primary.blend(surface, 0.55).rgb,
            mark=Color.parse(variables.get("error", "#ff0000")).rgb,
        )

    def of(self, colour: int, band: bool = False) -> RGB:
        return self.band if band else self.lines[colour % len(self.lines)]


def paint(plt: Plot, drawing: Drawing, colours: PlotColours) -> None:
    """Hand ``drawing`` to plotext (already cleared, sized and themed by the caller), and a
    vertical line in the theme's error colour where the data first turned NaN or infinite.

    Lines are drawn in half blocks, except over a band: there everything is in full blocks,
    because a half-block cell of a line replaces the band's cell and leaves a hole around it.
    """
    ends: list[float] = []
    band = any(t.band for t in drawing.traces)
    for trace in drawing.traces:
        x = _tame(trace.x)
        ends += (x[0], x[-1])
        marker = BAND_MARKER if band else MARKER
        plt.plot(x, _tame(trace.y), marker=marker, color=colours.of(trace.colour, trace.band))
    if drawing.mark is not None:
        (mark,) = _tame([drawing.mark])
        plt.vline(mark, color=colours.mark)
        low, high = min([*ends, mark]), max([*ends, mark])
        if low < high:  # the first NaN may lie past the last finite point
            plt.xlim(low, high)


PLOTEXT_LIMIT = 1e300
"""plotext's tick arithmetic overflows on spans near 1e308 and on subnormal spans (below
2.2e-308): values are clipped to this size, and subnormal ones flushed to zero."""


def _tame(values: list[float]) -> list[float]:
    """``values`` plotext can scale: a finite loss of 1e308 is drawn at the edge, not fatal."""
    return [
        0.0 if -1e-300 < v < 1e-300 else max(-PLOTEXT_LIMIT, min(PLOTEXT_LIMIT, v)) for v in values
    ]


_STYLES: dict[tuple[object, object, object], Style] = {}


def _cell_style(fullground: object, style: object, background: object) -> Style:
    """The rich Style of one plotext colour triple, parsed once from plotext's own escape code
    so every colour form plotext accepts (names, 256-colour numbers, RGB) means the same."""
    key = (fullground, style, background)
    found = _STYLES.get(key)
    if found is None:
        spans = Text.from_ansi(colors_to_ansi(fullground, style, background) + "x").spans
        first = spans[0].style if spans else None
        found = _STYLES[key] = first if isinstance(first, Style) else Style()
    return found


def canvas_text(plt: Plot) -> Text:
    """Build ``plt`` and return its picture as a rich Text, read off plotext's character matrix.

    ``plt.build()`` renders the matrix to an ANSI string that ``Text.from_ansi`` parses back:
    together about 12 ms of a 120x30 redraw. Reading the matrix (the steps of ``build()`` up to
    the string) gives the same cells in about 2 ms.
    """
    plt._set_sizes()
    plt._build_matrix()
    matrix = plt.monitor.matrix
    text = Text(no_wrap=True, overflow="crop", end="")
    for row in range(matrix.rows - 1, -1, -1):
        cells = zip(
            matrix.marker[row],
            matrix.fullground[row],
            matrix.style[row],
            matrix.background[row],
            strict=True,
        )
        for (fullground, style, background), run in groupby(cells, key=lambda c: c[1:]):
            text.append("".join(c[0] for c in run), _cell_style(fullground, style, background))
        if row:
            text.append("\n")
    return text


class MetricPlot(PlotextPlot):
    """The plot area of :class:`MetricsView`: paints what the view prepared, cached until the
    drawing, the size or the theme changes (a focus change or an unrelated repaint costs
    nothing)."""

    DEFAULT_CSS = """
    MetricPlot { background: $surface; color: $text-muted; }
    """

    def __init__(self, view: MetricsView) -> None:
        super().__init__(id="metrics-plot")
        self._view = view
        self._painted: Drawing | None = None  # what _text shows, at which size and theme
        self._painted_at: tuple[int, int, str] = (0, 0, "")
        self._text = Text()

    def on_resize(self) -> None:
        """Decimation depends on the width: prepare the drawing again, status line included."""
        self._view.redraw()

    def render(self) -> RenderResult:
        width, height = self.size
        drawing = self._view.drawing(width)
        if drawing is None or not drawing.traces:
            message = drawing.message if drawing and drawing.message else None
            return Text(message or self._view.waiting_message(), style="italic", justify="center")
        at = (width, height, self.app.theme)
        if drawing is not self._painted or at != self._painted_at:
            plt = self.plt
            plt.clear_figure()
            plt.plotsize(width, height)
            plt._set_size(width, height)  # as PlotextPlot.render does: plotsize alone lags
            plt.theme(self._get_plotext_theme_name(self.app.theme))
            try:
                paint(plt, drawing, self._view.colours)
                self._text = canvas_text(plt)
            except Exception as exc:  # a plotext corner case must cost a plot, not the TUI
                self._text = Text(f"the plot failed to draw: {exc!r}", style="italic")
            self._painted, self._painted_at = drawing, at
        return self._text


class MetricsView(Widget, can_focus=True):
    """Plots of the open run's metrics; keys from the "plot" scope of the keymap.

    The app owns the follower and calls, on the UI thread: :meth:`set_run` when a run opens,
    :meth:`add_records` with each batch, :meth:`set_selected_rank` when the rank list moves and
    :meth:`toggle_overlay` to compare an earlier run. The widget fills its container (width and
    height ``1fr``); the plot takes all but the status line.
    """

    BINDINGS = bindings_for("plot")
    ALLOW_MAXIMIZE = True

    DEFAULT_CSS = """
    MetricsView { width: 1fr; height: 1fr; layout: vertical; }
    MetricsView > MetricPlot { height: 1fr; }
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

    def __init__(
        self,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)
        self.run_name = ""
        self.store: MetricStore | None = None
        self._pending: dict[int, RecordColumns | Sequence[Record]] = {}
        self._pending_restarts: set[int] = set()
        self._stale = False
        self.overlays: dict[str, MetricStore] = {}
        self.metric: str | None = None  # the user's choice; kept when another run opens
        self.mode: Mode = "rank"
        self.rank = 0
        self.smoothing = 0.0
        self.log_scale = False
        self.x_axis: XAxis = "step"
        self.colours = PlotColours(((128, 128, 128),), (64, 64, 64), (255, 0, 0))
        self._frame = 0  # bumped by every redraw: the drawing cache key
        self._overlay_generation = 0
        self._drawing_key: tuple[object, ...] = ()
        self._drawing: Drawing | None = None
        self._timer: Timer | None = None
        self._drawn_at = -math.inf

    def compose(self) -> ComposeResult:
        yield MetricPlot(self)
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

    def set_run(self, name: str) -> None:
        """A run was opened: its metrics replace the previous run's (overlays stay)."""
        self.run_name = name
        self.store = None
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
            from ezpz_tui.core.watching.metrics import MetricStore

            self.store = MetricStore()
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
        self.redraw()

    # --- drawing ----------------------------------------------------------------------------

    def settings(self) -> PlotSettings | None:
        """What the plot shows now; None until some metric exists."""
        metric = self.current_metric()
        if metric is None:
            return None
        from ezpz_tui.core.watching.metrics import PlotSettings

        return PlotSettings(
            metric=metric,
            mode=self.mode,
            rank=self.rank,
            smoothing=self.smoothing,
            log=self.log_scale,
            x=self.x_axis,
        )

    def drawing(self, width: int) -> Drawing | None:
        """The prepared drawing for a plot ``width`` cells wide, recomputed only after a redraw
        request (so data arriving between two throttled redraws is not drawn early)."""
        settings = self.settings()
        if settings is None:
            return None
        key = (self._frame, self._overlay_generation, settings, width)
        if key != self._drawing_key or self._drawing is None:
            from ezpz_tui.core.watching.metrics import prepare_plot

            self._drawing = prepare_plot(self.store, self.overlays, settings, width)
            self._drawing_key = key
        return self._drawing

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
        plot = self.query_one(MetricPlot)
        self.query_one("#metrics-status", Static).update(self.status_text(plot.size.width))
        plot.refresh()

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
            text.append(f" · {drawing.raw:,} pts → {drawing.drawn}")
        return text

    def _warning(self, metric: str) -> str:
        """``⚠ NaN on rank 3 from step 20 (+2 ranks)`` for the metric's first non-finite value."""
        if self.store is None:
            return ""
        from ezpz_tui.core.watching.metrics import nonfinite_word

        bad = self.store.nonfinite(metric)
        if not bad:
            return ""
        rank, first = min(bad.items(), key=lambda item: (item[1].step, item[0]))
        more = f" (+{len(bad) - 1} ranks)" if len(bad) > 1 else ""
        return f"⚠ {nonfinite_word(first.value)} on rank {rank} from step {first.step}{more}"
