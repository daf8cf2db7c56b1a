"""The opened run's tools one key away: every rank's stacks (``S``), a profile of every rank's
next steps (``P``) and its trackers (``Y``).

``S`` asks each rank of the opened run for its Python stacks (SIGUSR1; see
:mod:`~ezpz_tui.core.watching.stacks`) and shows them grouped. ``Y`` copies the commands that
open the run's trackers (``tensorboard --logdir …``, ``wandb sync …``), with absolute paths, for
another tmux pane; the clipboard is the terminal's (OSC 52), which reaches the user's own machine
over SSH and through tmux with ``set-clipboard on``. ``P`` asks the ranks that call the step
hook to run ``torch.profiler`` for their next :data:`PROFILE_STEPS` steps
(:mod:`~ezpz_tui.core.watching.profiles`) and shows each rank's split into compute,
communication and idle with its top operators; the traces stay in the run's ``profiles/``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ezpz_tui.ui.main.host import Host


PROFILE_STEPS = 5


class RunTools:
    """``show_stacks``, ``profile_steps`` and ``copy_trackers`` over the host's opened run."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def show_stacks(self) -> None:
        opened = self.host.opened
        if opened is None:
            self.host.notify("Open a run first: its ranks are asked for their stacks.")
            return
        self.host.notify("Asking every rank for its Python stacks …")
        stacks = lambda: self._stacks(opened.path)  # noqa: E731
        self.host.in_thread(stacks, "stacks", exclusive=True, holds_keys=True)

    def _stacks(self, run_dir: Path) -> None:
        from ezpz_tui.core.watching.stacks import format_report, request_stacks

        try:
            lines = format_report(request_stacks(run_dir))
        except OSError as exc:
            lines = [f"cannot ask the ranks of {run_dir.name}: {exc.strerror or exc}"]
        self.host.dialogs.show_lines(f"Python stacks of {run_dir.name}", lines)

    def profile_steps(self) -> None:
        opened = self.host.opened
        if opened is None:
            self.host.notify("Open a run first: its ranks are asked to profile their next steps.")
            return
        self.host.notify(f"Asking every rank to profile its next {PROFILE_STEPS} steps …")
        profile = lambda: self._profile(opened.path)  # noqa: E731
        self.host.in_thread(profile, "profile", exclusive=True, holds_keys=False)

    def _profile(self, run_dir: Path) -> None:
        from ezpz_tui.core.watching.profiles import format_profile, request_profile

        try:
            lines = format_profile(request_profile(run_dir, PROFILE_STEPS))
        except OSError as exc:
            lines = [f"cannot ask the ranks of {run_dir.name}: {exc.strerror or exc}"]
        self.host.dialogs.show_lines(f"Profile of {run_dir.name}", lines)

    def copy_trackers(self) -> None:
        opened = self.host.opened
        if opened is None:
            self.host.notify("Open a run first: its trackers' commands are copied.", timeout=4)
            return
        self.host.in_thread(lambda: self._trackers(opened.path), "trackers")

    def _trackers(self, run_dir: Path) -> None:
        from ezpz_tui.core.watching.tracked import tracker_outputs

        commands = [out.command for out in tracker_outputs(run_dir)]
        if not commands:
            self.host.notify(
                "This run feeds no tracker (EZPZ_TRACKERS, or the launch form's trackers field).",
                timeout=5,
            )
            return
        self.host.dialogs.copy_to_clipboard("\n".join(commands))
        self.host.notify("Copied:\n" + "\n".join(commands), timeout=8)
