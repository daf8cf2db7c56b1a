"""The run on screen's trackers, one key away: ``Y`` copies the commands that open them.

The run header names the trackers a run feeds (``core.watching.tracked``); what a user does next
is run ``tensorboard --logdir …`` or ``wandb sync …`` in another tmux pane, so the key puts
those commands, with absolute paths, on the clipboard. The clipboard is the terminal's (OSC
52), which reaches the user's own machine over SSH and through tmux with ``set-clipboard on``.
"""

from __future__ import annotations

from pathlib import Path

from textual import work

from ezpz_tui.ui.screens.sweeping import SweepControl


class TrackersControl(SweepControl):
    """``copy_trackers``: the opened run's tracker commands to the clipboard."""

    def action_copy_trackers(self) -> None:
        if self.opened is None:
            self.notify("Open a run first: its trackers' commands are copied.", timeout=4)
            return
        self._copy_trackers(self.opened.path)

    @work(thread=True, group="trackers")
    def _copy_trackers(self, run_dir: Path) -> None:
        from ezpz_tui.core.watching.tracked import tracker_outputs

        commands = [out.command for out in tracker_outputs(run_dir)]
        self.app.call_from_thread(self._copied, commands)

    def _copied(self, commands: list[str]) -> None:
        if not commands:
            self.notify(
                "This run feeds no tracker (EZPZ_TRACKERS, or the launch form's trackers field).",
                timeout=5,
            )
            return
        self.app.copy_to_clipboard("\n".join(commands))
        self.notify("Copied:\n" + "\n".join(commands), timeout=8)
