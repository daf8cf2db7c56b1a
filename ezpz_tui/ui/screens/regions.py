"""Moving between the main screen's regions: focus keys, sidebars, tabs and the view history.

The screen is four regions (DESIGN.md section 5): the left sidebar (allocation, doctor), the top
(topology grid), the main column's tabs and the right sidebar (runs). ``H J K L`` focus one,
``h``/``l`` step between the visible ones, ``z h``/``z l`` hide and show the sidebars,
``ctrl+o``/``tab`` go back and forth through the regions visited, ``/`` searches the focused list
and ``F`` shows the focused view alone. A rank log wants :data:`RUN_VIEW_MIN` columns: while the
Run, Metrics or Compare tab shows, the runs list narrows, and on a screen still too narrow the
left sidebar (the allocation and the doctor, which serve the planning) steps aside, then the
runs list; both come back with the Launch tab, unless ``z h``/``z l`` said otherwise.
"""

from __future__ import annotations

from textual import events
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import TabbedContent

REGIONS = ("left", "top", "main", "right")
RUN_VIEW_MIN = 80  # columns for a rank log: a traceback's lines and a step line fit
RUN_VIEW_RUNS_WIDTH = 36  # the runs list beside a run view: 80 columns left for it at 120
_SELECTORS = {"left": "#left", "top": "#topology", "main": "#main", "right": "#right"}


class RegionNavigation(Screen[None]):
    """The region keys of a screen that composes ``#left``, ``#topology``, ``#main`` (a
    ``TabbedContent``) and ``#right``."""

    def __init__(self) -> None:
        super().__init__()
        self._history: list[str] = []
        self._future: list[str] = []
        self._stepped_aside: set[str] = set()  # "#left", "#right": hidden for a run view

    def _region_widget(self, region: str) -> Widget:
        return self.query_one(_SELECTORS[region])

    def _region_of(self, widget: Widget) -> str | None:
        for region in REGIONS:
            if self._region_widget(region) in widget.ancestors_with_self:
                return region
        return None

    def _focus_region(self, region: str) -> None:
        """Focus ``region``; ``main:<pane>`` (a view history entry) shows that tab first."""
        region, _, pane_id = region.partition(":")
        if pane_id:
            tabs = self.query_one(TabbedContent)
            if tabs.active != pane_id:
                tabs.active = pane_id
                targets = [w for w in tabs.get_pane(pane_id).query("*") if w.focusable]
                if targets:
                    # At once, not with focus(): the old pane's focused widget, hidden, would
                    # pass the focus to a sibling first, and the tabs follow the focus back.
                    self.set_focus(targets[0])
                    return
        container = self._region_widget(region)
        if not container.display:
            container.display = True
        if region == "main":
            pane = self.query_one(TabbedContent).active_pane
            targets = [w for w in (pane.query("*") if pane else []) if w.focusable]
        else:
            targets = [w for w in container.query("*") if w.focusable]
            if container.focusable:
                targets.insert(0, container)
        if targets:
            targets[0].focus()

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """The view history notes each region focused, and in the main region the tab: Enter
        on the plot opens a log in the Run tab, and ctrl+o brings the plot back."""
        region = self._region_of(event.widget)
        if region == "main":
            region = f"main:{self.query_one(TabbedContent).active}"
        if region and (not self._history or self._history[-1] != region):
            self._history.append(region)
            self._future.clear()

    def action_focus_left(self) -> None:
        self._focus_region("left")

    def action_focus_main(self) -> None:
        self._focus_region("main")

    def action_focus_top(self) -> None:
        self._focus_region("top")

    def action_focus_right(self) -> None:
        self._focus_region("right")

    def _step_region(self, step: int) -> None:
        visible = [r for r in ("left", "main", "right") if self._region_widget(r).display]
        current = self._region_of(self.focused) if self.focused else None
        current = "main" if current in (None, "top") else current
        index = visible.index(current) if current in visible else 0
        self._focus_region(visible[max(0, min(len(visible) - 1, index + step))])

    def action_region_left(self) -> None:
        self._step_region(-1)

    def action_region_right(self) -> None:
        self._step_region(1)

    def action_toggle_left_sidebar(self) -> None:
        self._toggle("#left")

    def action_toggle_right_sidebar(self) -> None:
        self._toggle("#right")

    def make_room_for_runs(self, run_view: bool) -> None:
        """Give a run view (``run_view``) :data:`RUN_VIEW_MIN` columns: sidebars step aside
        in turn until it has them; without a run view they come back."""
        right = self.query_one("#right")
        # The runs list's own width, not a class on the screen: that would restyle every widget
        # at each tab switch.
        right.styles.width = RUN_VIEW_RUNS_WIDTH if run_view else None
        if not run_view:
            for selector in self._stepped_aside:
                self.query_one(selector).display = True
            self._stepped_aside.clear()
            return
        # Counted, not measured: the narrowed runs list is laid out only at the next refresh.
        sidebars = {"#left": self.query_one("#left"), "#right": right}
        widths = {"#left": sidebars["#left"].outer_size.width, "#right": RUN_VIEW_RUNS_WIDTH + 1}
        center = self.app.size.width - sum(widths[s] for s, w in sidebars.items() if w.display)
        for selector, sidebar in sidebars.items():
            if center >= RUN_VIEW_MIN or not sidebar.display:
                continue
            center += widths[selector]
            sidebar.display = False
            self._stepped_aside.add(selector)

    def _toggle(self, selector: str) -> None:
        self._stepped_aside.discard(selector)  # the person's choice stands
        region = self.query_one(selector)
        region.display = not region.display
        if not region.display and self.focused and region in self.focused.ancestors_with_self:
            self._focus_region("main")

    # The history is updated here, before the focus moves: on_descendant_focus then finds the
    # region already last and leaves the forward list alone (it clears it for any other move).

    def action_history_back(self) -> None:
        if len(self._history) > 1:
            self._future.append(self._history.pop())
            self._focus_region(self._history[-1])

    def action_history_forward(self) -> None:
        if self._future:
            self._history.append(self._future.pop())
            self._focus_region(self._history[-1])

    def action_toggle_fullscreen(self) -> None:
        """The focused view (a log, the plot, a list) alone on the screen, or back."""
        if self.maximized is not None:
            self.minimize()
        elif self.focused is not None:
            target = self.focused
            if target.parent is not None and target.parent.id == "metrics":
                target = target.parent
            self.maximize(target, container=False)

    def action_search(self) -> None:
        from ezpz_tui.ui.screens.search import SearchScreen

        target = self.focused
        if target is None or not hasattr(target, "search"):
            self.notify("Search works in lists: focus one first (H, L).")
            return

        def answered(term: str | None) -> None:
            if term:
                target.search(term)  # type: ignore[attr-defined]

        self.app.push_screen(SearchScreen(), answered)
