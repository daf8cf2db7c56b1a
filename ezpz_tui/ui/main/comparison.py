"""The Compare tab's runs: which ones it compares, and when to read them again.

The tab compares the opened run with its relatives (the runs it was relaunched from, the other
runs of its sweep: :func:`~ezpz_tui.core.comparing.relatives.relatives_of`) and with every run
marked with ``c`` in the runs list. It is read once in the background whenever that set of runs
changes, so the tab opens on a table already made (switching tabs restyles the screen, and a
read started only then would share the UI thread's time); while the tab shows, it is read again
with the runs list's refresh as long as a compared run is still going.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ezpz_tui.ui.messages import ComparisonReady

if TYPE_CHECKING:
    from ezpz_tui.ui.main.host import Host

COMPARE_TAB = "tab-compare"

Compared = tuple[Path | None, tuple[Path, ...]]
"""The opened run (None: none) and the runs marked with ``c``, sorted by name."""


class Comparison:
    """Decides when the comparison is read again, and reads it in a worker."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.compared_for: Compared | None = None  # the set of runs last read

    def refresh(self, wanted: Compared, visible: bool, live: bool, only_if_live: bool) -> None:
        """Read the comparison of ``wanted`` again when that set changed, or when the tab is
        ``visible`` and a run in it is still going (``live``; ``only_if_live``: only then)."""
        changed = wanted != self.compared_for
        if (changed and not only_if_live) or (visible and live):
            self.compared_for = wanted
            self.host.in_thread(lambda: self._read(*wanted), "compare", exclusive=True)

    def _read(self, opened: Path | None, marked: tuple[Path, ...]) -> None:
        from ezpz_tui.core.comparing.compare import compare
        from ezpz_tui.core.comparing.relatives import relatives_of
        from ezpz_tui.core.watching.efficiency import PeakSettings

        paths = list(relatives_of(opened).together()) if opened else []
        paths += [p for p in marked if p not in paths]
        settings = self.host.settings
        # In a worker: the CPU probe may run here (seconds, once per host and interpreter).
        peaks = PeakSettings(settings.peak_tflops, settings.peak_dtype)
        self.host.post_message(ComparisonReady(compare(paths, peaks)))
