"""The heatmap of a whole job: one line per host, one cell per local rank, coloured by a figure.

It paints what :mod:`ezpz_tui.core.watching.heatmap` decides (layout, scale, legend numbers) and
adds colour and keys:

- the ramp runs from the theme's success colour through warning to error, so the bad end of every
  figure is the theme's "error" and a theme change recolours the grid; a rank without data is a
  dim dot;
- j/k and the arrows move the cursor, h/l too until the grid's edge (there they move to the next
  region, as everywhere else); g/G first/last cell, ctrl+d/ctrl+u half a page; ``/`` goes to a
  rank number or a host; ``o`` colours by the next figure that has data; Enter posts
  :class:`Heatmap.Chosen` with the rank under the cursor;
- the first line is the legend (figure, ramp with its ends, worst host), the last line the cell
  under the cursor (``rank 37 · host x3 · local 5 · 0.41 s``).

Drawing is line by line (no widget per cell): a repaint colours the rows on screen only, so
:meth:`Heatmap.set_data` every half second with 16k ranks costs the visible cells plus a linear
pass for the scale and the legend.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from ezpz_tui.core.runs.hosts import short_host
from ezpz_tui.core.watching.heatmap import (
    BUCKETS,
    FIGURE_KEYS,
    Figure,
    Grid,
    Scale,
    Summary,
    figure,
    layout_grid,
    row_label,
    summarize,
    widest_host,
)
from ezpz_tui.ui.palette import SCREEN_NAVIGATION, bindings_for, screen_bindings_for

Places = Mapping[int, tuple[str, int]]
FigureValues = Mapping[str, Mapping[int, "float | None"]]

LABEL_WIDTH = 10
"""Cells a host label takes at most: the end of a node name, where node names differ."""

WAITING = "Waiting for ranks …"

_RAMP_COLOURS = ("success", "warning", "error")
"""Theme variables the ramp passes through, good to bad."""


def heat_ramp(variables: Mapping[str, str], buckets: int = BUCKETS) -> list[Color]:
    """``buckets`` colours from the theme's success colour through warning to error."""
    stops = [
        Color.parse(variables.get(name, fallback))
        for name, fallback in zip(_RAMP_COLOURS, ("#4EBF71", "#FEA62B", "#B93C5B"), strict=True)
    ]
    ramp = []
    for bucket in range(buckets):
        at = 2.0 * bucket / max(buckets - 1, 1)  # 0..2 across the two halves
        half = min(int(at), 1)
        ramp.append(stops[half].blend(stops[half + 1], at - half))
    return ramp


class Heatmap(Widget, can_focus=True):
    """Every rank of a job as a coloured cell; the integrator feeds it with :meth:`set_data`."""

    class Chosen(Message):
        """Enter on a cell: the app shows ``rank``'s log."""

        def __init__(self, heatmap: Heatmap, rank: int) -> None:
            super().__init__()
            self.heatmap = heatmap
            self.rank = rank

        @property
        def control(self) -> Heatmap:
            return self.heatmap

    BINDINGS: ClassVar = [
        *bindings_for(
            "navigation",
            only={"cursor_down", "cursor_up", "first", "last", "half_page_down", "half_page_up"},
        ),
        *screen_bindings_for("navigation", SCREEN_NAVIGATION),
        *bindings_for("global", only={"region_left", "region_right"}),
        *bindings_for("heatmap"),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "heatmap--legend",
        "heatmap--label",
        "heatmap--label-cursor",
        "heatmap--unplaced",
        "heatmap--nodata",
        "heatmap--info",
    }

    DEFAULT_CSS = """
    Heatmap { height: auto; max-height: 100%; padding: 0 1; background: $surface; }
    Heatmap > .heatmap--legend { text-style: bold; }
    Heatmap > .heatmap--label { color: $text-muted; }
    Heatmap > .heatmap--label-cursor { color: $accent; text-style: bold; }
    Heatmap > .heatmap--unplaced { color: $text-disabled; }
    Heatmap > .heatmap--nodata { color: $text-disabled; }
    Heatmap > .heatmap--info { color: $text; }
    """

    figure: reactive[str] = reactive("step_time")
    """The key (in ``FIGURE_KEYS``) of the figure the cells are coloured by."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._places: dict[int, tuple[str, int]] = {}
        self._values: FigureValues = {}
        self._about: dict[str, str] = {}
        self._unplaced: frozenset[int] = frozenset()
        self._version = 0  # counts changes of the places (and of the ranks without one)
        self._label_width = 1
        self._widest = 0
        self._grid = layout_grid({}, 1)
        self._grid_key = (-1, 0)  # (version, columns) the grid was laid out for
        self._cursor = (0, 0)  # (row, column) of the grid
        self._top = 0  # first grid row on screen
        self._scale: Scale | None = None  # of the shown figure, None: to be computed
        self._summary: Summary | None = None
        self._ramp_key: tuple[str, ...] = ()
        self._ramp: list[Style] = []

    # --- data -------------------------------------------------------------------------------

    def set_data(
        self, places: Places, values: FigureValues, about: Mapping[str, str] | None = None
    ) -> None:
        """Show ``values`` (figure key -> rank -> value; ``None`` or a missing rank: no data) on
        the ranks of ``places`` (rank -> (host, local rank), the ranks whose place is known).
        ``about`` (figure key -> words) follows a figure's value in the info line: what an MFU
        is a share of.

        Meant to be called on every update (~2 per second): ``places`` is copied and compared, so
        the grid is laid out again only when it changed; ``values`` is read as it is at each
        repaint until the next call. Ranks with values but no place are drawn after the hosts.
        """
        places = dict(places)
        unplaced = frozenset(r for by_rank in values.values() for r in by_rank.keys() - places)
        changed = places != self._places or unplaced != self._unplaced
        self._places, self._unplaced, self._values = places, unplaced, values
        self._about = dict(about or {})
        self._scale = self._summary = None
        if changed:
            self._version += 1
            names = (len(short_host(host)) for host, _ in places.values())
            unplaced_label = len(f"r{max(unplaced)}") if unplaced else 1
            self._label_width = min(max(max(names, default=1), unplaced_label), LABEL_WIDTH)
            self._widest = widest_host(places)
        self.refresh(layout=changed)

    @property
    def shown_figure(self) -> Figure:
        return figure(self.figure)

    def _figure_values(self) -> Mapping[int, float | None]:
        return self._values.get(self.figure, {})

    def _scale_and_summary(self) -> tuple[Scale, Summary | None]:
        """The shown figure's scale and legend numbers, computed once per data or figure change."""
        if self._scale is None:
            values = self._figure_values()
            self._scale = Scale.of(self.shown_figure, values)
            self._summary = summarize(self.shown_figure, values, self._places)
        return self._scale, self._summary

    def watch_figure(self) -> None:
        self._scale = self._summary = None
        self.refresh()

    # --- layout -----------------------------------------------------------------------------

    def _geometry(self, width: int) -> tuple[int, int, int]:
        """(label width, cell width, columns) for ``width`` cells: two characters a cell while
        the widest host fits with them, else one (64 ranks and a label fit in 80 columns)."""
        room = max(width - self._label_width - 1, 1)
        cell = 2 if 2 * self._widest <= room else 1
        return self._label_width, cell, max(room // cell, 1)

    def grid_for(self, width: int) -> Grid:
        """The grid laid out for ``width`` content cells (cached until places or width change);
        the cursor stays on its rank."""
        key = (self._version, self._geometry(width)[2])
        if key != self._grid_key:
            before = self.cursor_rank
            self._grid_key = key
            self._grid = layout_grid(self._places, key[1], self._unplaced)
            self._cursor = self._grid.where.get(before, (0, 0)) if before is not None else (0, 0)
            self._clamp_cursor()
            self._scroll_to_cursor()
        return self._grid

    @property
    def grid(self) -> Grid:
        return self.grid_for(self.size.width)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """With ``height: auto``: the legend, a line per grid row and the cursor line."""
        return len(self.grid_for(width).rows) + 2

    # --- cursor -----------------------------------------------------------------------------

    @property
    def cursor_rank(self) -> int | None:
        """The rank under the cursor; ``None`` on a gap or an empty grid."""
        row, column = self._cursor
        rows = self._grid.rows
        if row >= len(rows) or column >= len(rows[row].cells):
            return None
        return rows[row].cells[column]

    def _clamp_cursor(self) -> None:
        rows = self._grid.rows
        if not rows:
            self._cursor = (0, 0)
            return
        row = min(max(self._cursor[0], 0), len(rows) - 1)
        column = min(max(self._cursor[1], 0), len(rows[row].cells) - 1)
        self._cursor = (row, column)

    def move_to(self, row: int, column: int) -> None:
        """Put the cursor on (``row``, ``column``), clamped to the grid, and scroll to it."""
        self.grid_for(self.size.width)  # laid out for the current width first
        self._cursor = (row, column)
        self._clamp_cursor()
        self._scroll_to_cursor()
        self.refresh()

    def _scroll_to_cursor(self) -> None:
        """Scroll just enough to show the cursor's row between the legend and the info line."""
        visible = max(self.size.height - 2, 1)
        if self._cursor[0] < self._top:
            self._top = self._cursor[0]
        elif self._cursor[0] >= self._top + visible:
            self._top = self._cursor[0] - visible + 1
        self._top = max(0, min(self._top, max(len(self._grid.rows) - visible, 0)))

    def move_to_rank(self, rank: int) -> bool:
        """Put the cursor on ``rank``; False when the grid does not hold it."""
        where = self.grid.where.get(rank)
        if where is not None:
            self.move_to(*where)
        return where is not None

    def action_cursor_down(self) -> None:
        self.move_to(self._cursor[0] + 1, self._cursor[1])

    def action_cursor_up(self) -> None:
        self.move_to(self._cursor[0] - 1, self._cursor[1])

    def action_cell_left(self) -> None:
        self.move_to(self._cursor[0], self._cursor[1] - 1)

    def action_cell_right(self) -> None:
        self.move_to(self._cursor[0], self._cursor[1] + 1)

    async def action_region_left(self) -> None:
        """h: the cell to the left; from the first column, the region on the left."""
        if self._cursor[1] > 0:
            self.action_cell_left()
        else:
            await self.run_action("screen.region_left")

    async def action_region_right(self) -> None:
        """l: the cell to the right; from the row's last cell, the region on the right."""
        row, column = self._cursor
        if row < len(self.grid.rows) and column < len(self.grid.rows[row].cells) - 1:
            self.action_cell_right()
        else:
            await self.run_action("screen.region_right")

    def action_first(self) -> None:
        self.move_to(0, 0)

    def action_last(self) -> None:
        rows = self.grid.rows
        self.move_to(len(rows) - 1, len(rows[-1].cells) - 1 if rows else 0)

    def action_half_page_down(self) -> None:
        self.move_to(self._cursor[0] + max(1, (self.size.height - 2) // 2), self._cursor[1])

    def action_half_page_up(self) -> None:
        self.move_to(self._cursor[0] - max(1, (self.size.height - 2) // 2), self._cursor[1])

    def action_cycle_figure(self) -> None:
        """Colour by the next figure that has values (all in turn while none has)."""
        with_data = [k for k in FIGURE_KEYS if self._values.get(k)] or list(FIGURE_KEYS)
        later = [k for k in with_data if FIGURE_KEYS.index(k) > FIGURE_KEYS.index(self.figure)]
        self.figure = (later or with_data)[0]

    def action_choose_cell(self) -> None:
        rank = self.cursor_rank
        if rank is None:
            self.app.bell()
        else:
            self.post_message(self.Chosen(self, rank))

    def search(self, term: str) -> None:
        """``/``: go to a rank (``37``, ``r37``) or to the first row of a host named like
        ``term``; the bell when there is none."""
        text = term.strip().lower().removeprefix("r")
        if text.isdigit() and self.move_to_rank(int(text)):
            return
        for y, row in enumerate(self.grid.rows):
            if row.host is not None and term.strip().lower() in row.host.lower():
                self.move_to(y, 0)
                return
        self.app.bell()

    # --- painting ---------------------------------------------------------------------------

    def _ramp_styles(self) -> list[Style]:
        """A background style per bucket, from the theme, recomputed when the theme changes."""
        variables = self.app.theme_variables
        key = tuple(variables.get(name, "") for name in _RAMP_COLOURS)
        if key != self._ramp_key:
            self._ramp_key = key
            self._ramp = [
                Style(color=c.get_contrast_text(1.0).rich_color, bgcolor=c.rich_color)
                for c in heat_ramp(variables)
            ]
        return self._ramp

    def _style(self, name: str) -> Style:
        """A component's whole style: a partial one would resolve the theme's ``auto`` text
        colours against no background (white, unreadable on a light theme)."""
        return self.get_component_rich_style(f"heatmap--{name}")

    def render_line(self, y: int) -> Strip:
        width, height = self.size
        base = self.rich_style
        grid = self.grid
        if y == 0:
            segments = self._legend(width)
        elif y == height - 1 and height > 1:
            segments = self._info()
        else:
            index = self._top + y - 1
            segments = self._row(index, width) if index < len(grid.rows) else []
        return Strip([Segment(t, base + s) for t, s in segments]).adjust_cell_length(width, base)

    def _row(self, index: int, width: int) -> list[tuple[str, Style]]:
        """A grid row: its label, then its cells, runs of one look merged into one segment."""
        label_width, cell, _ = self._geometry(width)
        row = self.grid.rows[index]
        on_row = index == self._cursor[0]
        look = "label-cursor" if on_row else "label" if row.host is not None else "unplaced"
        label = (row_label(row.label, label_width) + " ", self._style(look))
        segments: list[tuple[str, Style]] = []
        scale, _ = self._scale_and_summary()
        values = self._figure_values()
        ramp, nodata = self._ramp_styles(), self._style("nodata")
        blank, dot = " " * cell, "·".ljust(cell)
        for column, rank in enumerate(row.cells):
            if rank is None:
                text, style = blank, Style()
            else:
                bucket = scale.bucket(values.get(rank))
                text, style = (dot, nodata) if bucket is None else (blank, ramp[bucket])
            if on_row and column == self._cursor[1]:
                text = "◆" if cell == 1 else "◀▶"
                style += Style(bold=True) if rank is not None else nodata
            if segments and segments[-1][1] == style:
                segments[-1] = (segments[-1][0] + text, style)
            else:
                segments.append((text, style))
        return [label, *segments]

    def _legend(self, width: int) -> list[tuple[str, Style]]:
        """``step time  0.19 s ▕████████▏ 0.41 s · worst host: x3 (median 0.41 s vs 0.20 s)``."""
        legend = self._style("legend")
        if not self.grid.rows:
            return [(WAITING, self._style("nodata"))]
        fig = self.shown_figure
        scale, summary = self._scale_and_summary()
        if summary is None:
            return [
                (f"{fig.label}  ", legend),
                ("no data yet · o: next figure", self._style("nodata")),
            ]
        good, bad = (fig.format(end) for end in scale.ends)
        segments = [(f"{fig.label}  {good} ", legend)]
        segments += [(" ", style) for style in self._ramp_styles()]
        segments.append((f" {bad}", legend))
        worst = summary.worst_host_text(fig)
        if worst:
            segments.append((f" · {worst}", self._style("info")))
        return segments

    def _info(self) -> list[tuple[str, Style]]:
        """The cell under the cursor: ``rank 37 · host x3 · local 5 · 0.41 s``."""
        info = self._style("info")
        rank = self.cursor_rank
        if rank is None:
            return [("no rank here", self._style("nodata"))] if self.grid.rows else []
        host, local = self._places.get(rank, ("", -1))
        where = f"host {short_host(host)} · local {local}" if host else "host not known yet"
        value = self._figure_values().get(rank)
        shown = "no data" if value is None else self.shown_figure.format(value)
        about = self._about.get(self.figure)
        shown += f" {about}" if about and value is not None else ""
        return [(f"rank {rank} · {where} · {shown}", info)]
