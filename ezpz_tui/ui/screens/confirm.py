"""A yes/no question in front of every key that can lose work (stop, relaunch, quit with a run).

    def action_stop_run(self) -> None:
        def answered(yes: bool | None) -> None:
            if yes:
                self.supervisor.stop()
        self.push_screen(ConfirmScreen("Stop run 20261122-103105?"), answered)

The answer keys come from the keymap table's dialog scope (`y`/`enter` yes, `n` no, `esc` no),
and the hint under the question shows the keys in force, overrides included.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from ezpz_tui.keymap.table import DEFAULT_KEYMAP, Keymap
from ezpz_tui.ui.palette import bindings_for


class ConfirmScreen(ModalScreen[bool]):
    """Asks `question`; dismisses with True for yes and False for no or Esc."""

    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
    }
    ConfirmScreen > Vertical {
        width: auto;
        max-width: 72;
        min-width: 36;
        height: auto;
        padding: 1 2;
        border: thick $warning;
        background: $surface;
    }
    ConfirmScreen #question {
        width: auto;
        max-width: 68;
        text-style: bold;
    }
    ConfirmScreen.-detailed > Vertical {
        max-width: 104;
    }
    ConfirmScreen #details {
        width: auto;
        max-width: 100;
        margin-top: 1;
    }
    ConfirmScreen #refused {
        width: auto;
        max-width: 100;
        margin-top: 1;
        color: $error;
        text-style: bold;
    }
    ConfirmScreen #answers {
        width: auto;
        margin-top: 1;
        color: $text-muted;
    }
    """

    BINDINGS = bindings_for("dialog", only={"confirm", "cancel", "close", "override_preflight"})

    def __init__(
        self,
        question: str,
        keymap: Keymap = DEFAULT_KEYMAP,
        details: list[str] | None = None,
        refused: str | None = None,
    ) -> None:
        """`keymap` is the one in force, used only to show the right answer keys; `details`
        are lines under the question (what a relaunch changes), changes (`→`) highlighted.
        `refused`: why yes is refused (a relaunch whose preflight failed); one other key
        (`override_preflight`) says yes all the same."""
        super().__init__(classes="-detailed" if details else "")
        self._question = question
        self._keymap = keymap
        self._details = details or []
        self._refused = refused

    def compose(self) -> ComposeResult:
        yes = self._keymap["confirm"].label
        no = f"{self._keymap['cancel'].label}, {self._keymap['close'].first_label}"
        with Vertical():
            yield Static(self._question, id="question", markup=False)
            if self._details:
                yield Static(_details_text(self._details), id="details")
            yield Static(f"{yes}: yes    {no}: no", id="answers", markup=False)

    def on_mount(self) -> None:
        if self._refused is None:
            return
        keys = self._keymap
        said = (
            f"{keys['confirm'].first_label} is refused: {self._refused}. "
            f"{keys['override_preflight'].label}: relaunch anyway."
        )
        answers = self.query_one("#answers", Static)
        refusal = Static(said, id="refused", markup=False)
        answers.parent.mount(refusal, before=answers)  # type: ignore[union-attr]

    def action_confirm(self) -> None:
        """Yes, unless it is refused."""
        if self._refused is None:
            self.dismiss(True)
        else:
            self.app.bell()

    def action_override_preflight(self) -> None:
        """Yes, though the preflight failed: the person knows better (a flaky check, a fix on
        its way to the nodes)."""
        if self._refused is not None:
            self.dismiss(True)

    def action_cancel(self) -> None:
        """No."""
        self.dismiss(False)

    def action_close(self) -> None:
        """Esc counts as no: closing the question must never do the risky thing."""
        self.dismiss(False)


class QuitScreen(ConfirmScreen):
    """Quitting with live runs: stop them and quit (yes), leave them running under their
    tethers and quit (an SSH session about to drop, a laptop lid about to close), or stay.

    Dismisses with True (stop), False (stay) or :data:`LEAVE`.
    """

    LEAVE = "leave"
    BINDINGS = bindings_for("dialog", only={"confirm", "cancel", "close", "leave_running"})

    def compose(self) -> ComposeResult:
        keys = self._keymap
        stay = f"{keys['cancel'].label}, {keys['close'].first_label}"
        answers = (
            f"{keys['confirm'].label}: stop and quit    "
            f"{keys['leave_running'].label}: leave running and quit    {stay}: stay"
        )
        with Vertical():
            yield Static(self._question, id="question", markup=False)
            yield Static(answers, id="answers", markup=False)

    def action_leave_running(self) -> None:
        """Quit and let the runs go on, supervised by their tethers."""
        self.dismiss(self.LEAVE)  # type: ignore[arg-type]


class RelaunchScreen(ConfirmScreen):
    """A relaunch's question when the run it replaces has a checkpoint: the last line says
    where the new run starts ("resumes at step N from …" or "starts fresh"), and one key
    switches between the two. Dismisses with True for yes; :attr:`resuming` is the choice."""

    BINDINGS = bindings_for(
        "dialog", only={"confirm", "cancel", "close", "switch_resume", "override_preflight"}
    )

    def __init__(
        self,
        question: str,
        resumes: str,
        keymap: Keymap = DEFAULT_KEYMAP,
        details: list[str] | None = None,
        refused: str | None = None,
    ) -> None:
        super().__init__(question, keymap, details, refused)
        self._resumes = resumes
        self.resuming = True

    def compose(self) -> ComposeResult:
        keys = self._keymap
        no = f"{keys['cancel'].label}, {keys['close'].first_label}"
        with Vertical():
            yield Static(self._question, id="question", markup=False)
            if self._details:
                yield Static(_details_text(self._details), id="details")
            yield Static(self._start_line(), id="resume", markup=False)
            yield Static(
                f"{keys['confirm'].label}: yes    {keys['switch_resume'].label}: "
                f"switch    {no}: no",
                id="answers",
                markup=False,
            )

    def _start_line(self) -> str:
        return f"The new run {self._resumes if self.resuming else 'starts fresh (step 0)'}."

    def action_switch_resume(self) -> None:
        """Resume from the checkpoint, or start fresh: the other one."""
        self.resuming = not self.resuming
        self.query_one("#resume", Static).update(self._start_line())


def _details_text(lines: list[str]) -> Text:
    text = Text()
    for i, line in enumerate(lines):
        text.append(("\n" if i else "") + line, "bold" if "→" in line else "dim")
    return text
