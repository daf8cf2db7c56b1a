"""The topology grid: host x accelerator cells with rank numbers, coloured by one kind of group.

It paints what :mod:`ezpz_tui.core.launching.topology` lays out, so every decision about what
to show (which hosts to fold into a summary line, how to shorten names) is made, and tested,
without a terminal. This widget only adds colour and keys:

- group colours come from the current theme (primary, warning, success, error, accent,
  secondary, then hue turns of the primary for themes whose colours coincide), so a theme change
  recolours the grid; past eight groups the colours repeat bold and underlined;
- `o` colours by the next dimension with groups (TP → PP → CP → DP), j/k scroll, g/G jump to
  the top/bottom;
- hovering a cell shows its rank, host, coordinates and the ranks of its group.

The layout is redone for the widget's own size: with ``height: auto`` and a ``max-height`` (the
app's layout) a large allocation is summarised to fit, instead of growing a long scroll.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.color import Color, rgb_to_lab
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import LaunchPlan
from ezpz_tui.core.launching.topology.describe import describe_cell
from ezpz_tui.core.launching.topology.layout import Line, Span, layout_topology
from ezpz_tui.core.launching.topology.model import Cell, Topology, build_topology, next_colour_by
from ezpz_tui.ui.palette import SCREEN_NAVIGATION, bindings_for, screen_bindings_for

PALETTE_SIZE = 8
"""Distinct group colours before they repeat in another style."""

_THEME_COLOURS = ("primary", "warning", "success", "error", "accent", "secondary")
"""Theme variables the group colours start from, in order: adjacent groups get contrasting
hues first (blue-ish, yellow-ish, green-ish, red-ish in most themes)."""

_DISTINCT = (40.0, 30.0, 20.0, 10.0, 0.0)
"""Colour differences (CIE76 ΔE) tried in turn: the palette takes the most distinct colours it
can find, and only settles for closer ones when a theme offers too few (nord's primary and
secondary are both pale blue)."""

_HUE_TURNS = (0.5, 0.25, 0.75, 0.125, 0.625, 0.375, 0.875)
_LIGHTNESS_SHIFTS = (0.0, -0.18, 0.18)

WAITING = "Waiting for the allocation and the launch plan …"


def _distance(a: Color, b: Color) -> float:
    """How different two colours look (CIE76 ΔE: about 2 is just noticeable, 40 is obvious)."""
    la, lb = rgb_to_lab(a), rgb_to_lab(b)
    return float(((la.L - lb.L) ** 2 + (la.a - lb.a) ** 2 + (la.b - lb.b) ** 2) ** 0.5)


def group_palette(variables: Mapping[str, str], size: int = PALETTE_SIZE) -> list[Color]:
    """``size`` colours, as distinct as possible, from a theme's CSS variables
    (``App.theme_variables``).

    The theme's own accent colours come first; the rest are the primary colour turned round the
    hue circle (and made lighter or darker), close to the theme's saturation and lightness.
    """
    theme = [Color.parse(variables[name]) for name in _THEME_COLOURS if name in variables]
    primary = theme[0] if theme else Color.parse("#0178d4")
    hue, saturation, lightness = primary.hsl
    saturation = max(saturation, 0.45)
    turned = [
        Color.from_hsl((hue + turn) % 1.0, saturation, min(max(lightness + shift, 0.3), 0.75))
        for shift in _LIGHTNESS_SHIFTS
        for turn in _HUE_TURNS
    ]
    chosen: list[Color] = []
    for distinct in _DISTINCT:
        for colour in (*theme, *turned):
            if len(chosen) < size and all(_distance(colour, c) >= distinct for c in chosen):
                chosen.append(colour)
    grounds = [Color.parse(variables[n]) for n in ("surface", "background") if n in variables]
    if grounds and all(ground.brightness > 0.5 for ground in grounds):
        # A light theme: the pastel end of a palette (latte's yellow, the hue turns) is drawn
        # as plot lines and rank names on near-white, where it must still stand out.
        chosen = [_readable_on(colour, grounds) for colour in chosen]
    return chosen


MIN_CONTRAST = 3.0
"""WCAG's contrast ratio for graphics and large text: plot lines, rank names on a light
theme's ground reach at least this."""


def contrast(a: Color, b: Color) -> float:
    """WCAG 2 contrast ratio of two colours: 1 (the same) to 21 (black on white)."""

    def luminance(colour: Color) -> float:
        r, g, b = (
            v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
            for v in (c / 255 for c in colour.rgb)
        )
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    light, dark = sorted((luminance(a), luminance(b)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def _readable_on(colour: Color, grounds: list[Color]) -> Color:
    """``colour`` darkened in small steps until it reaches :data:`MIN_CONTRAST` on every
    ground (light ones)."""
    for _ in range(40):
        if all(contrast(colour, ground) >= MIN_CONTRAST for ground in grounds):
            break
        colour = colour.darken(0.03)
    return colour


def group_style(group: int, palette: list[Color]) -> Style:
    """The look of group ``group``: a cell filled with its colour; on every second turn round the
    palette also bold and underlined, so group 0 and group 8 never look alike."""
    colour = palette[group % len(palette)]
    second_turn = (group // len(palette)) % 2 == 1
    return Style(
        color=colour.get_contrast_text(1.0).rich_color,
        bgcolor=colour.rich_color,
        bold=second_turn,
        underline=second_turn,
    )


class TopologyGrid(ScrollView, can_focus=True):
    """Host x accelerator cells of the current launch plan, coloured by ``colour_by`` groups.

    The app calls :meth:`update_plan` whenever the launch form changes; that is cheap (linear in
    the number of ranks) and only redraws.
    """

    BINDINGS = (
        bindings_for("navigation", only={"cursor_down", "cursor_up", "first", "last"})
        + screen_bindings_for("navigation", SCREEN_NAVIGATION)
        + bindings_for("topology")
    )

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "topology-grid--heading",
        "topology-grid--index",
        "topology-grid--label",
        "topology-grid--cell",
        "topology-grid--idle",
        "topology-grid--dim",
        "topology-grid--note",
        "topology-grid--reason",
    }

    DEFAULT_CSS = """
    TopologyGrid {
        height: auto;
        padding: 0 1;
        scrollbar-size-vertical: 1;
        overflow-x: hidden;
    }
    TopologyGrid > .topology-grid--heading { text-style: bold; }
    TopologyGrid > .topology-grid--index { color: $text-muted; }
    TopologyGrid > .topology-grid--label { color: $text; }
    TopologyGrid > .topology-grid--cell { background: $panel; color: $text; }
    TopologyGrid > .topology-grid--idle { color: $text-disabled; }
    TopologyGrid > .topology-grid--dim { color: $text-muted; }
    TopologyGrid > .topology-grid--note { color: $text-warning; }
    TopologyGrid > .topology-grid--reason { color: $text-error; }
    """

    colour_by: reactive[str] = reactive("tp")
    """The dimension whose groups colour the cells: tp, pp, cp or dp."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._plan: LaunchPlan | None = None
        self._alloc: Allocation | None = None
        self.topology: Topology | None = None
        self.lines: list[Line] = [(Span(WAITING, "dim"),)]
        self._palette_key: tuple[str, ...] = ()
        self._palette: list[Color] = []

    # --- model ------------------------------------------------------------------------------

    def update_plan(self, plan: LaunchPlan, alloc: Allocation) -> None:
        """Show ``plan`` on ``alloc``; called on every change of the launch form, so an edit that
        does not change the plan (a half-typed number) costs nothing."""
        if (plan, alloc) == (self._plan, self._alloc):
            return
        self._plan, self._alloc = plan, alloc
        self._rebuild()

    def watch_colour_by(self) -> None:
        self._rebuild()

    def _rebuild(self) -> None:
        if self._plan is None or self._alloc is None:
            return
        self.topology = build_topology(self._plan, self._alloc, self.colour_by)
        self._relayout()
        # The line count may change, and with ``height: auto`` so does the widget's height.
        self.refresh(layout=True)

    def _layout_lines(self, width: int, height: int | None) -> list[Line]:
        if self.topology is None:
            return [(Span(WAITING, "dim"),)]
        return layout_topology(self.topology, width, height)

    def _relayout(self) -> None:
        region = self.scrollable_content_region
        if not region.width:
            return
        self.lines = self._layout_lines(region.width, region.height)
        self.virtual_size = Size(region.width, len(self.lines))

    def _height_limit(self, container: Size, viewport: Size) -> int:
        """The most lines this widget will be given: its ``max-height`` (or the container)."""
        limit = container.height
        max_height = self.styles.max_height
        if max_height is not None:
            box = max_height.resolve(container + self.styles.gutter.totals, viewport)
            limit = min(limit, int(box) - self.styles.gutter.height)
        return max(limit, 1)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """With ``height: auto``: the lines of a layout that fits the height we may take."""
        self.lines = self._layout_lines(width, self._height_limit(container, viewport))
        return len(self.lines)

    def on_resize(self) -> None:
        """The summary depends on the room: lay the grid out again for the new size."""
        self._relayout()

    # --- keys -------------------------------------------------------------------------------

    def action_cycle_colour(self) -> None:
        """Colour by the next dimension that has groups: TP → PP → CP → DP → TP."""
        self.colour_by = next_colour_by(self.colour_by, self.topology)

    def action_cursor_down(self) -> None:
        self.scroll_to(y=self.scroll_y + 1, animate=False)

    def action_cursor_up(self) -> None:
        self.scroll_to(y=self.scroll_y - 1, animate=False)

    def action_first(self) -> None:
        self.scroll_to(y=0, animate=False)

    def action_last(self) -> None:
        self.scroll_to(y=self.max_scroll_y, animate=False)

    # --- painting ---------------------------------------------------------------------------

    def _group_palette(self) -> list[Color]:
        """The theme's group colours, recomputed only when the theme's colours change."""
        variables = self.app.theme_variables
        key = tuple(variables.get(name, "") for name in _THEME_COLOURS)
        if key != self._palette_key:
            self._palette_key, self._palette = key, group_palette(variables)
        return self._palette

    def _span_style(self, span: Span, palette: list[Color]) -> Style:
        if span.kind == "cell" and span.group is not None:
            return group_style(span.group, palette)
        if span.kind == "text":
            return Style()
        # Whole, not partial: $text-muted is an "auto" colour, worked out against the ground
        # (a partial style leaves it white, unreadable in a light theme).
        return self.get_component_rich_style(f"topology-grid--{span.kind}")

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        index = y + self.scroll_offset.y
        if index >= len(self.lines):
            return Strip.blank(width, base)
        palette = self._group_palette()
        segments = [Segment(s.text, base + self._span_style(s, palette)) for s in self.lines[index]]
        return Strip(segments).adjust_cell_length(width, base)

    # --- hover ------------------------------------------------------------------------------

    def cell_at(self, x: int, y: int) -> Cell | None:
        """The slot drawn at content offset (``x``, ``y``) of the whole (unscrolled) grid."""
        if not 0 <= y < len(self.lines):
            return None
        left = 0
        for span in self.lines[y]:
            if left <= x < left + len(span.text):
                return span.cell
            left += len(span.text)
        return None

    def on_mouse_move(self, event: events.MouseMove) -> None:
        """Tell what the hovered cell is: a grid of numbers cannot show every coordinate."""
        offset = event.get_content_offset(self)
        cell = None
        if offset is not None and self.topology is not None:
            cell = self.cell_at(offset.x + self.scroll_offset.x, offset.y + self.scroll_offset.y)
        tooltip = describe_cell(self.topology, cell) if cell and self.topology else None
        if tooltip != self.tooltip:  # setting it, even unchanged, restarts the tooltip timer
            self.tooltip = tooltip
