"""Moving between the main screen's regions: focus keys, sidebars, tabs and the view history.

The screen is four regions: the left sidebar (allocation, doctor), the top (topology grid), the
main column's tabs and the right sidebar (runs). ``H J K L`` focus one, ``h``/``l`` step between
the visible ones, ``z h``/``z l`` hide and show the sidebars, ``ctrl+o``/``tab`` go back and
forth through the regions visited, ``/`` searches the focused list and ``F`` shows the focused
view alone. A rank log wants :data:`RUN_VIEW_MIN` columns: while the Run, Metrics or Compare tab
shows, the runs list narrows, and on a screen still too narrow the left sidebar (the allocation
and the doctor, which serve the planning) steps aside, then the runs list; both come back with
the Launch tab, unless ``z h``/``z l`` said otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import TabbedContent

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.widget import Widget

REGIONS = ("left", "top", "main", "right")
RUN_VIEW_MIN = 80  # columns for a rank log: a traceback's lines and a step line fit
RUN_VIEW_RUNS_WIDTH = 36  # the runs list beside a run view: 80 columns left for it at 120
_SELECTORS = {"left": "#left", "top": "#topology", "main": "#main", "right": "#right"}


class ViewHistory:
    """The regions visited, as a browser's back and forward lists (``ctrl+o`` / ``tab``)."""

    def __init__(self) -> None:
        self.past: list[str] = []
        self.future: list[str] = []

    def visited(self, region: str) -> None:
        """A region took the focus: a new visit clears the forward list, as a browser does."""
        if not self.past or self.past[-1] != region:
            self.past.append(region)
            self.future.clear()

    def back(self) -> str | None:
        """The region to go back to; None at the first."""
        if len(self.past) < 2:
            return None
        self.future.append(self.past.pop())
        return self.past[-1]

    def forward(self) -> str | None:
        if not self.future:
            return None
        self.past.append(self.future.pop())
        return self.past[-1]


def sidebars_to_hide(width: int, left: int | None, right: int | None) -> list[str]:
    """Which sidebars step aside so that a run view gets :data:`RUN_VIEW_MIN` of ``width``
    columns; ``left``/``right`` are the shown sidebars' widths (None: hidden), the left one
    goes first."""
    center = width - sum(w for w in (left, right) if w is not None)
    hidden = []
    for selector, taken in (("#left", left), ("#right", right)):
        if center >= RUN_VIEW_MIN or taken is None:
            continue
        center += taken
        hidden.append(selector)
    return hidden


class Regions:
    """The region keys of ``screen``, which composes ``#left``, ``#topology``, ``#main`` (a
    ``TabbedContent``) and ``#right``."""

    def __init__(self, screen: Screen[None]) -> None:
        self.screen = screen
        self.history = ViewHistory()
        self._stepped_aside: set[str] = set()  # "#left", "#right": hidden for a run view

    def _widget(self, region: str) -> Widget:
        return self.screen.query_one(_SELECTORS[region])

    def region_of(self, widget: Widget) -> str | None:
        for region in REGIONS:
            if self._widget(region) in widget.ancestors_with_self:
                return region
        return None

    def focus(self, region: str) -> None:
        """Focus ``region``; ``main:<pane>`` (a view history entry) shows that tab first."""
        screen = self.screen
        region, _, pane_id = region.partition(":")
        if pane_id:
            tabs = screen.query_one(TabbedContent)
            if tabs.active != pane_id:
                tabs.active = pane_id
                targets = [w for w in tabs.get_pane(pane_id).query("*") if w.focusable]
                if targets:
                    # At once, not with focus(): the old pane's focused widget, hidden, would
                    # pass the focus to a sibling first, and the tabs follow the focus back.
                    screen.set_focus(targets[0])
                    return
        container = self._widget(region)
        if not container.display:
            container.display = True
        if region == "main":
            pane = screen.query_one(TabbedContent).active_pane
            targets = [w for w in (pane.query("*") if pane else []) if w.focusable]
        else:
            targets = [w for w in container.query("*") if w.focusable]
            if container.focusable:
                targets.insert(0, container)
        if targets:
            targets[0].focus()

    def focused(self, widget: Widget) -> None:
        """The view history notes each region focused, and in the main region the tab: Enter
        on the plot opens a log in the Run tab, and ctrl+o brings the plot back."""
        region = self.region_of(widget)
        if region == "main":
            region = f"main:{self.screen.query_one(TabbedContent).active}"
        if region:
            self.history.visited(region)

    def step(self, step: int) -> None:
        focused = self.screen.focused
        visible = [r for r in ("left", "main", "right") if self._widget(r).display]
        current = self.region_of(focused) if focused else None
        current = "main" if current in (None, "top") else current
        index = visible.index(current) if current in visible else 0
        self.focus(visible[max(0, min(len(visible) - 1, index + step))])

    # The history moves here, before the focus does: focused() then finds the region already
    # last and leaves the forward list alone (it clears it for any other move).

    def back(self) -> None:
        region = self.history.back()
        if region is not None:
            self.focus(region)

    def forward(self) -> None:
        region = self.history.forward()
        if region is not None:
            self.focus(region)

    def make_room_for_runs(self, run_view: bool) -> None:
        """Give a run view (``run_view``) :data:`RUN_VIEW_MIN` columns: sidebars step aside
        in turn until it has them; without a run view they come back."""
        screen = self.screen
        left, right = screen.query_one("#left"), screen.query_one("#right")
        # The runs list's own width, not a class on the screen: that would restyle every widget
        # at each tab switch.
        right.styles.width = RUN_VIEW_RUNS_WIDTH if run_view else None
        if not run_view:
            for selector in self._stepped_aside:
                screen.query_one(selector).display = True
            self._stepped_aside.clear()
            return
        # Counted, not measured: the narrowed runs list is laid out only at the next refresh.
        hide = sidebars_to_hide(
            screen.app.size.width,
            left.outer_size.width if left.display else None,
            RUN_VIEW_RUNS_WIDTH + 1 if right.display else None,
        )
        for selector in hide:
            screen.query_one(selector).display = False
            self._stepped_aside.add(selector)

    def toggle(self, selector: str) -> None:
        self._stepped_aside.discard(selector)  # the person's choice stands
        region = self.screen.query_one(selector)
        region.display = not region.display
        focused = self.screen.focused
        if not region.display and focused and region in focused.ancestors_with_self:
            self.focus("main")

    def toggle_fullscreen(self) -> None:
        """The focused view (a log, the plot, a list) alone on the screen, or back."""
        screen = self.screen
        if screen.maximized is not None:
            screen.minimize()
        elif screen.focused is not None:
            target = screen.focused
            if target.parent is not None and target.parent.id == "metrics":
                target = target.parent
            screen.maximize(target, container=False)

    def search(self) -> None:
        from ezpz_tui.ui.screens.search import SearchScreen

        target = self.screen.focused
        if target is None or not hasattr(target, "search"):
            self.screen.notify("Search works in lists: focus one first (H, L).")
            return

        def answered(term: str | None) -> None:
            if term:
                target.search(term)  # type: ignore[attr-defined]

        self.screen.app.push_screen(SearchScreen(), answered)
