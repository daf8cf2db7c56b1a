"""``ezpz-tui attach RUN`` with each j/k press timed inside the app, for keys_while_reading.py.

``python bench/_key_probe.py OUT attach RUN``: from the key's arrival at the app (its event
handed to the App by Textual's input thread) until the end of the frame whose log shows the
rank the key moved to (the frame handed to the terminal's writer). Written to ``OUT`` (ms, one
number a press, space-separated) after each press. The bench times the same presses from
outside (tmux), so the two say how much of a press's time is the app's own and how much is
the terminal's and the measuring's. Patches two of Textual's methods in this process only; not
a bench itself.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from textual import events
from textual.app import App

from ezpz_tui.cli import main
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.widgets.run_panel import RunPanel

WANTS = {"j": 1, "k": 0}  # the bench moves between ranks 0 and 1


def probe(out: Path) -> None:
    pending: list[tuple[float, int]] = []
    took: list[float] = []
    on_event, display = EzpzApp.on_event, App._display

    async def timed_event(self: EzpzApp, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded and event.key in WANTS:
            pending.append((time.perf_counter(), WANTS[event.key]))
        await on_event(self, event)

    def timed_display(self: App, screen: object, renderable: object) -> None:
        display(self, screen, renderable)  # type: ignore[arg-type]
        if pending and self.query(RunPanel) and self.query_one(RunPanel).log.rank == pending[0][1]:
            took.append(time.perf_counter() - pending.pop(0)[0])
            out.write_text(" ".join(f"{1000 * t:.1f}" for t in took))

    EzpzApp.on_event = timed_event  # type: ignore[method-assign]
    App._display = timed_display  # type: ignore[method-assign]


if __name__ == "__main__":
    probe(Path(sys.argv[1]))
    sys.exit(main(sys.argv[2:]))
