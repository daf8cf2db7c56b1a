"""The Metrics view's step cursor, zoom and event keys (a mixin of :class:`~.metrics.MetricsView`).

The cursor is a step (``cursor_step``, None while hidden); its points, readout, zoom window
and events are computed in :mod:`ezpz_tui.core.watching.metrics.cursor` and
:mod:`ezpz_tui.core.watching.metrics.events`. Moving it never re-runs plotext: the plot keeps
its painted canvas and only the cursor's column is restyled (``MetricPlot.render``), and the
status line shows the readout. Zooming changes the settings' window, so the plot prepares and
paints again, with only the window's points decimated.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widget import Widget

if TYPE_CHECKING:
    from ezpz_tui.core.watching.metrics.cursor import Axis, Readout, Window
    from ezpz_tui.core.watching.metrics.events import Event
    from ezpz_tui.core.watching.metrics.plot import PlotSettings
    from ezpz_tui.core.watching.metrics.store import MetricStore

    _Widget = Widget
else:
    _Widget = object  # a plain mixin: Textual follows only the first widget base for CSS

LOCALTIME = time.localtime
"""How the readout turns a record's timestamp into a clock (tests pin it to UTC)."""

ZOOM = 0.5
"""Width factor of one ``+`` (``-`` divides by it)."""


class PlotCursor(_Widget):
    """Cursor state and keys; the view provides the store, the settings and the redraw."""

    if TYPE_CHECKING:
        store: MetricStore | None
        overlays: dict[str, MetricStore]

        def settings(self) -> PlotSettings | None: ...
        def redraw(self) -> None: ...
        def show_status(self) -> None: ...

    cursor_step: int | None = None
    window: Window | None = None
    event_note = ""  # which event the cursor jumped to, until it moves on
    _count = ""
    _axis: tuple[object, Axis] | None = None
    _events: tuple[object, list[Event]] | None = None

    class StepChosen(Message):
        """Enter on the cursor: read ``rank``'s log around ``step``."""

        def __init__(self, rank: int, step: int, span: tuple[int, int]) -> None:
            super().__init__()
            self.rank = rank
            self.step = step
            self.span = span  # the run's first and last step, to place a log without steps

    # --- what the cursor moves over -------------------------------------------------------

    def axis(self) -> Axis | None:
        """The points of the main line, cached until the data or the settings change."""
        settings = self.settings()
        if self.store is None or settings is None:
            return None
        from dataclasses import replace

        from ezpz_tui.core.watching.metrics.cursor import cursor_axis

        key = (self.store.version, replace(settings, smoothing=0.0, log=False, window=None))
        if self._axis is None or self._axis[0] != key:
            self._axis = (key, cursor_axis(self.store, settings))
        axis = self._axis[1]
        return axis if len(axis.steps) else None

    def cursor_x(self) -> float | None:
        """Where the cursor is drawn, in plotted x units; None while hidden."""
        axis = self.axis() if self.cursor_step is not None else None
        if axis is None or self.cursor_step is None:
            return None
        x = float(axis.x[axis.index_of(self.cursor_step)])
        return x if math.isfinite(x) else None

    def readout(self) -> Readout | None:
        """What the cursor reads (None while hidden): see ``core...cursor.readout``."""
        settings = self.settings()
        if self.cursor_step is None or self.store is None or settings is None:
            return None
        from ezpz_tui.core.watching.metrics.cursor import readout

        return readout(self.store, settings, self.cursor_step, self.overlays)

    def _full(self, axis: Axis) -> Window:
        import numpy as np

        finite = axis.x[np.isfinite(axis.x)]  # a step no rank timed has no place in time
        return (float(finite.min()), float(finite.max())) if len(finite) else (0.0, 0.0)

    def _visible_range(self, axis: Axis) -> tuple[int, int]:
        """First and last index of the points in the window."""
        if self.window is None:
            return 0, len(axis.x) - 1
        import numpy as np

        inside = np.flatnonzero((axis.x >= self.window[0]) & (axis.x <= self.window[1]))
        return (int(inside[0]), int(inside[-1])) if len(inside) else (0, len(axis.x) - 1)

    # --- moving ---------------------------------------------------------------------------

    def take_count(self) -> int:
        count = int(self._count or "1")
        self._count = ""
        return count

    def place(self, index: int, note: str = "") -> None:
        """Put the cursor on point ``index`` (clamped); the zoom window follows it (moved by
        half its width) when it leaves the window. Repaints the plot from its cached canvas."""
        axis = self.axis()
        if axis is None:
            self.app.bell()
            return
        index = max(0, min(len(axis.steps) - 1, index))
        self.cursor_step = int(axis.steps[index])
        self.event_note = note
        x = float(axis.x[index])
        window = self.window
        if window is not None and math.isfinite(x) and not window[0] <= x <= window[1]:
            from ezpz_tui.core.watching.metrics.cursor import pan

            width = window[1] - window[0]
            self.window = pan((x - width / 2, x + width / 2), self._full(axis), 0.0)
            self.redraw()
            return
        self.repaint_cursor()

    def repaint_cursor(self) -> None:
        """The cursor moved: the plots restyle one column of their canvas, the status line
        shows the readout. No plotext."""
        from ezpz_tui.ui.widgets.metric_plot import MetricPlot

        for plot in self.query(MetricPlot):
            plot.refresh()
        self.show_status()

    def _current_index(self, axis: Axis, edge: int) -> int | None:
        """The cursor's point; None when hidden (the first move shows it at ``edge``)."""
        if self.cursor_step is None:
            self._count = ""
            self.place(edge if edge >= 0 else len(axis.steps) - 1)
            return None
        return axis.index_of(self.cursor_step)

    def move(self, points: int) -> bool:
        """Move by ``points`` (times the count); False at the edge (nothing moved)."""
        axis = self.axis()
        if axis is None:
            self.app.bell()
            return True
        index = self._current_index(axis, -1)
        if index is None:
            return True
        target = index + points * self.take_count()
        if not 0 <= target < len(axis.steps) and index in (0, len(axis.steps) - 1):
            return False
        self.place(target)
        return True

    def action_point_left(self) -> None:
        self.move(-1)

    def action_point_right(self) -> None:
        self.move(1)

    async def action_region_left(self) -> None:
        """h: the previous point; from the first point, the region on the left."""
        if not self.move(-1):
            await self.run_action("screen.region_left")

    async def action_region_right(self) -> None:
        """l: the next point; from the last point, the region on the right."""
        if not self.move(1):
            await self.run_action("screen.region_right")

    def action_first(self) -> None:
        self._count = ""
        self.place(0)

    def action_last(self) -> None:
        self._count = ""
        self.place(1 << 62)

    def action_window_start(self) -> None:
        axis = self.axis()
        if axis is not None:
            self.place(self._visible_range(axis)[0])

    def action_window_end(self) -> None:
        axis = self.axis()
        if axis is not None:
            self.place(self._visible_range(axis)[1])

    def action_hide_cursor(self) -> None:
        self._count = ""
        if self.cursor_step is not None:
            self.cursor_step = None
            self.repaint_cursor()

    def on_key(self, event: events.Key) -> None:
        """Digits make a count (the keymap's ``count``); ``0`` with none is ``window_start``."""
        if event.character is None or not event.character.isdigit():
            return
        event.stop()
        if event.character == "0" and not self._count:
            self.action_window_start()
        else:
            self._count = (self._count + event.character)[-6:]

    # --- zoom -----------------------------------------------------------------------------

    def _zoom(self, factor: float) -> None:
        axis = self.axis()
        if axis is None:
            self.app.bell()
            return
        from ezpz_tui.core.watching.metrics.cursor import zoom

        full = self._full(axis)
        centre = self.cursor_x()
        if centre is None:
            lo, hi = self.window or full
            centre = (lo + hi) / 2
        self.window = zoom(self.window, full, centre, factor ** self.take_count())
        self.redraw()

    def action_zoom_in(self) -> None:
        self._zoom(ZOOM)

    def action_zoom_out(self) -> None:
        self._zoom(1 / ZOOM)

    def action_zoom_fit(self) -> None:
        self._count = ""
        self.window = None
        self.redraw()

    def _pan(self, fraction: float) -> None:
        axis = self.axis()
        if axis is None or self.window is None:
            self.app.bell()
            return
        from ezpz_tui.core.watching.metrics.cursor import pan

        self.window = pan(self.window, self._full(axis), fraction * self.take_count())
        self.redraw()

    def action_pan_left(self) -> None:
        self._pan(-0.5)

    def action_pan_right(self) -> None:
        self._pan(0.5)

    # --- events ---------------------------------------------------------------------------

    def curve_events(self) -> list[Event]:
        """The main line's events (see ``core.watching.metrics.events``), cached per data."""
        settings = self.settings()
        axis = self.axis()
        if axis is None or settings is None or self.store is None:
            return []
        key = (
            self.store.version,
            settings.metric,
            settings.mode,
            settings.rank,
            len(self.overlays),
        )
        if self._events is None or self._events[0] != key:
            self._events = (key, self._find_events(axis, settings, self.store))
        return self._events[1]

    def _find_events(self, axis: Axis, settings: PlotSettings, store: MetricStore) -> list[Event]:
        import numpy as np

        from ezpz_tui.core.watching.metrics.cursor import main_rank
        from ezpz_tui.core.watching.metrics.events import Event, find_events
        from ezpz_tui.core.watching.metrics.store import nonfinite_word

        if settings.mode == "rank":
            _, y = store.series(settings.metric, main_rank(store, settings) or 0, "step")
            extra: list[Event] = []
        else:
            y = store.band(settings.metric, "step").mean
            # The mean leaves NaNs out: each rank's first non-finite value is an event too.
            extra = [
                Event(
                    axis.index_of(bad.step), "nonfinite", f"{nonfinite_word(bad.value)} on r{rank}"
                )
                for rank, bad in store.nonfinite(settings.metric).items()
            ]
        parents = {
            name: int(other.band(settings.metric, "step").x[-1])
            for name, other in self.overlays.items()
            if other.ranks(settings.metric)
        }
        found = find_events(axis.steps, np.asarray(y), parents)
        return sorted(found + extra)

    def _jump(self, direction: int) -> None:
        axis = self.axis()
        if axis is None:
            self.app.bell()
            return
        from ezpz_tui.core.watching.metrics.events import next_event

        here = axis.index_of(self.cursor_step) if self.cursor_step is not None else -1
        if self.cursor_step is None and direction < 0:
            here = len(axis.steps)
        found = None
        for _ in range(self.take_count()):
            found = next_event(self.curve_events(), here, direction) or found
            if found is None:
                break
            here = found.index
        if found is None:
            self.app.bell()
            return
        self.place(found.index, found.text)

    def action_next_heading(self) -> None:
        self._jump(1)

    def action_previous_heading(self) -> None:
        self._jump(-1)

    # --- enter ----------------------------------------------------------------------------

    def action_open_step_log(self) -> None:
        reading = self.readout()
        axis = self.axis()
        if reading is None or reading.rank is None or axis is None:
            self.app.bell()
            return
        span = (int(axis.steps[0]), int(axis.steps[-1]))
        self.post_message(self.StepChosen(reading.rank, reading.step, span))

    def readout_text(self, names: list[str] | None = None) -> Text:
        """The status line while the cursor shows: step, wall time, every line's value, the
        event jumped to; ``names``: the small multiples' metrics, one value each."""
        reading = self.readout()
        text = Text()
        if reading is None:
            return text
        text.append(f"step {reading.step:,}", "bold")
        if math.isfinite(reading.time):
            clock = time.strftime("%H:%M:%S", LOCALTIME(reading.time))
            start = self.store.start_time if self.store is not None else math.nan
            text.append(f" · {clock}")
            if math.isfinite(start):
                text.append(f" (+{reading.time - start:,.1f}s)")
        values = reading.values
        if names and self.store is not None:
            from ezpz_tui.core.watching.metrics.cursor import mean_at

            values = []
            for name in names:
                value = mean_at(self.store, name, reading.step)
                if value is not None:
                    values.append((name, value))
        for label, value in values:
            text.append(f" · {label} ")
            text.append(f"{value:.6g}", "bold")
        if self.event_note:
            text.append(f" · ⚑ {self.event_note}", "bold")
        if self._count:
            text.append(f" · {self._count}…")
        return text
