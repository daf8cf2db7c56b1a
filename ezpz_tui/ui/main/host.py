"""What the main screen's controllers may ask of it: the one interface between them.

A controller (launches, failures, comparison, sweeps, submissions) holds its own state and
decides; the screen owns the widgets, the dialogs and the workers. Everything a controller
needs from the screen is named here, so that a test can hand a controller a stand-in of a dozen
lines instead of a terminal, and so that a reader sees at once what a controller can touch.

Every method may be called from a worker thread: the screen hops to the UI thread itself.
Asking the person (a question, an error to fix, a prompt) goes through ``host.dialogs``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from textual.message import Message
    from textual.notifications import SeverityLevel

    from ezpz_tui.config import Config
    from ezpz_tui.core.launching.plan import LaunchPlan
    from ezpz_tui.core.session import Session
    from ezpz_tui.core.watching.failure import Failure
    from ezpz_tui.keymap.table import Keymap
    from ezpz_tui.ui.opened_run import OpenedRun


class Dialogs(Protocol):
    """What a controller may ask the person, or show them."""

    def confirm(
        self,
        question: str,
        on_yes: Callable[[], None],
        lines: Sequence[str] = (),
        refused: str | None = None,
    ) -> None:
        """Ask ``question`` (``lines`` shown under it); ``on_yes`` runs on a yes. ``refused``:
        why yes is refused (a failed preflight), which only the override key passes."""

    def confirm_relaunch(
        self,
        question: str,
        resumes: str,
        on_yes: Callable[[bool], None],
        lines: Sequence[str] = (),
        refused: str | None = None,
    ) -> None:
        """Ask ``question`` with where the new run starts: ``resumes`` ("resumes at step N
        from …") or fresh, one key switching; ``on_yes(resuming)`` runs on a yes. ``refused``
        as for :meth:`confirm`."""

    def show_error(self, title: str, message: str) -> None:
        """A dialog that stays until read: something must be fixed before trying again."""

    def prompt(self, prompt: str, value: str, on_answer: Callable[[str | None], None]) -> None:
        """A one-line input starting from ``value``; None when the person closed it."""

    def show_failure(self, failure: Failure, on_exclude: Callable[[], None]) -> None:
        """The failure dialog; ``on_exclude`` when the person asks to exclude and relaunch."""

    def show_lines(self, title: str, lines: list[str]) -> None:
        """A dialog of ``lines`` to read and scroll (a report: every rank's stacks)."""

    def copy_to_clipboard(self, text: str) -> None:
        """The terminal's clipboard (OSC 52): it reaches the person's machine over SSH."""


class Host(Protocol):
    """The main screen as its controllers see it."""

    keymap: Keymap
    settings: Config
    dialogs: Dialogs
    session: Session | None  # None until the allocation is read
    opened: OpenedRun | None  # the run the Run and Metrics tabs show

    @property
    def plan(self) -> LaunchPlan | None:
        """The launch form's plan; None while it has errors or no allocation is read."""

    @property
    def plan_errors(self) -> list[str]:
        """Why the form's plan cannot launch, one reason each (empty when it can)."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
    ) -> None: ...

    def post_message(self, message: Message) -> bool: ...

    def in_thread(
        self,
        work: Callable[[], None],
        group: str,
        exclusive: bool = False,
        holds_keys: bool = False,
    ) -> None:
        """Run ``work`` in a thread worker of the screen (it reports back with a message).
        ``holds_keys``: what it reports opens a dialog or a run, so the keys typed meanwhile
        wait for it and then act on what it opened."""

    def show_tab(self, pane: str) -> None:
        """Show the main column's tab ``pane`` (``tab-launch``, ``tab-run``, …)."""

    async def open_run(self, path: Path) -> None:
        """Show the run in ``path`` in the Run and Metrics tabs, followed live."""

    def refresh_runs(self) -> None:
        """List the runs again (after a launch, a stop, a submission)."""

    def refresh_comparison(self) -> None:
        """Read the Compare tab's runs again if their set changed."""

    def show_race(self, lines: list[str]) -> None:
        """A tune's leaderboard in the Compare tab (empty: none)."""

    def use_plan(self, plan: LaunchPlan) -> None:
        """Put ``plan`` on the launch form, so that the launch key starts it."""

    def refresh_bindings(self) -> None:
        """The footer asks again which keys act (the failure keys follow the opened run)."""

    def exit_app(self) -> None:
        """Quit (after the runs asked to stop have stopped)."""
