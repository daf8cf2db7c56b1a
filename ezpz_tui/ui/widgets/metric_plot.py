"""The plot area of the Metrics view, and how a prepared drawing becomes its picture.

:func:`paint` hands a :class:`~ezpz_tui.core.watching.metrics.plot.Drawing` (already reduced to
about two points per cell) to plotext in the theme's colours; :func:`canvas_text` reads the
picture off plotext's character matrix straight into a rich Text rather than through plotext's
ANSI string and ``Text.from_ansi``: that round trip cost more than plotting the points did.
:class:`MetricPlot` caches that Text until the drawing, its size or the theme changes, and
draws the step cursor over the cached Text (:func:`with_cursor`: one column restyled, no plotext),
so moving the cursor costs a copy of the Text, not a plot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING, NamedTuple

from plotext._utility import colors_to_ansi
from rich.style import Style
from rich.text import Text
from textual.app import RenderResult
from textual.color import Color
from textual_plotext import PlotextPlot

from ezpz_tui.ui.widgets.topology import group_palette

if TYPE_CHECKING:
    from textual_plotext.plot import Plot

    from ezpz_tui.core.watching.metrics.plot import Drawing
    from ezpz_tui.ui.widgets.metrics import MetricsView

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
    cursor: RGB = (128, 128, 128)

    @classmethod
    def from_theme(cls, variables: Mapping[str, str]) -> PlotColours:
        palette = group_palette(variables)
        primary = palette[0]
        surface = Color.parse(variables.get("surface", "#1e1e1e"))
        return cls(
            lines=tuple(c.rgb for c in palette),
            band=primary.blend(surface, 0.55).rgb,
            mark=Color.parse(variables.get("error", "#ff0000")).rgb,
            cursor=Color.parse(variables.get("accent", "#ffa62b")).rgb,
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
    if drawing.join is not None:
        plt.vline(drawing.join, color=colours.of(-1))
    if drawing.window is not None:
        low, high = drawing.window
        if drawing.mark is not None and low <= drawing.mark <= high:
            plt.vline(drawing.mark, color=colours.mark)
        plt.xlim(*_tame([low, high]))
    elif drawing.mark is not None:
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


class Geometry(NamedTuple):
    """Where plotext put the data in the picture: the canvas's first column and width, its
    rows as lines of the Text (top first), the x range it spans, and the Text's line width."""

    column: int
    width: int
    lines: range
    xlim: tuple[float, float]
    line_width: int

    def column_of(self, x: float) -> int | None:
        """The picture's column of ``x`` (plotext's own rounding); None outside the canvas."""
        low, high = self.xlim
        if not high > low:
            return self.column + self.width // 2 if x == low else None
        cell = math.floor(round(0.5 + (self.width - 1) * (x - low) / (high - low), 8))
        return self.column + cell if 0 <= cell < self.width else None


def geometry(plt: Plot) -> Geometry | None:
    """The canvas geometry of the figure ``canvas_text`` just built; None when it has none."""
    matrix = plt.monitor.matrix
    xlim = plt.monitor.xlim[0]
    columns, rows = matrix.Cols_canvas, matrix.Rows_canvas
    if None in xlim or not len(columns) or not len(rows):
        return None
    lines = range(matrix.rows - rows.stop, matrix.rows - rows.start)
    return Geometry(columns.start, len(columns), lines, (xlim[0], xlim[1]), matrix.cols)


def with_cursor(text: Text, where: Geometry, x: float, style: Style) -> Text:
    """``text`` (a picture from ``canvas_text``) with the canvas column of ``x`` in ``style``:
    the cursor line. A copy; the cached picture stays clean."""
    column = where.column_of(x)
    if column is None:
        return text
    out = text.copy()
    stride = where.line_width + 1  # each line and its newline
    for line in where.lines:
        start = line * stride + column
        out.stylize(style, start, start + 1)
    return out


class MetricPlot(PlotextPlot):
    """The plot area of :class:`MetricsView`: paints what the view prepared, cached until the
    drawing, the size or the theme changes (a focus change or an unrelated repaint costs
    nothing)."""

    DEFAULT_CSS = """
    MetricPlot { background: $surface; color: $text-muted; }
    """

    def __init__(self, view: MetricsView, slot: int = 0, classes: str = "") -> None:
        super().__init__(
            id="metrics-plot" if slot == 0 else f"metrics-plot-{slot}", classes=classes
        )
        self._view = view
        self.slot = slot  # 0: the plot; 1...: the further small multiples
        self._geometry: Geometry | None = None
        self._painted: Drawing | None = None  # what _text shows, at which size and theme
        self._painted_at: tuple[int, int, str] = (0, 0, "")
        self._text = Text()

    def on_resize(self) -> None:
        """Decimation depends on the width: prepare the drawing again, status line included."""
        self._view.redraw()

    def render(self) -> RenderResult:
        width, height = self.size
        drawing = self._view.drawing(width, self.slot)
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
            if self._view.stacked:
                plt.title(self._view.metric_of(self.slot) or "")
            try:
                paint(plt, drawing, self._view.colours)
                self._text = canvas_text(plt)
                self._geometry = geometry(plt)
            except Exception as exc:  # a plotext corner case must cost a plot, not the TUI
                self._text = Text(f"the plot failed to draw: {exc!r}", style="italic")
                self._geometry = None
            self._painted, self._painted_at = drawing, at
        x = self._view.cursor_x()
        if x is None or self._geometry is None:
            return self._text
        style = Style(bgcolor=Color(*self._view.colours.cursor).rich_color)
        return with_cursor(self._text, self._geometry, x, style)
