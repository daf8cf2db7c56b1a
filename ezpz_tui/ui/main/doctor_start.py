"""When the doctor's first run starts: after the plan's first preview is painted, and, with a
run attached, after that run's first rows (or ``wait_s``, should they never come).

The plan (or the attached run's rows) is what a person reads first, and the doctor's probes
would take the CPU its paint needs. Its own object because the screen hears of the preview and
of rows from several places (the session's start, the form, the digest, the follower, the first
read's worker) and only this decides, once, when the doctor may go.
"""

from __future__ import annotations

from collections.abc import Callable


class DoctorStart:
    """Holds the doctor's first run until the preview and the rows it waits for are shown."""

    def __init__(
        self,
        rows_shown: bool,
        start_doctor: Callable[[], None],
        after: Callable[[float, Callable[[], None]], object],
        wait_s: float,
    ) -> None:
        self.rows_shown = rows_shown  # True: no attached run to wait for
        self._waiting = False  # the doctor is wanted, once the plan (and rows) are shown
        self._start_doctor = start_doctor  # called after the next refresh
        self._after = after  # a timer: (seconds, callback)
        self._wait_s = wait_s

    def wanted(self) -> None:
        """The session has no checks of its own: the doctor runs once the plan is shown."""
        self._waiting = True

    def started(self) -> None:
        """The doctor ran (at start, or asked for): nothing is held any more."""
        self._waiting = False

    def preview_shown(self) -> None:
        """The first preview is in the form: the doctor goes, or waits for the rows."""
        if self._waiting and not self.rows_shown:
            self._after(self._wait_s, self.rows_arrived)
        elif self._waiting:
            self._waiting = False
            self._start_doctor()

    def rows_arrived(self) -> None:
        """The attached run's first rows were painted (or the wait for them ended)."""
        if not self.rows_shown:
            self.rows_shown = True
            self.preview_shown()
