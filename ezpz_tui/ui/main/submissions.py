"""``b`` in the runs list: a finished run's plan as a batch job, the script shown before it goes.

Reading the run and asking ``qsub``/``sbatch`` wait on the disk and the scheduler, so both run
in thread workers; the question in between shows the script (its directives and the launch, the
comments left out) and nothing is submitted unless the answer is yes. The walltime, queue and
account are those of the last ``ezpz-tui submit`` into the same outputs (one hour and the
scheduler's defaults before the first). The job then appears in the runs list as ``queued``, as
``ezpz-tui submit`` would have left it. The question shows the lines that decide what runs
where; the script kept under ``<outputs>/.batch/`` is whole.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ezpz_tui.core.launching.batch_script import BatchJob
    from ezpz_tui.ui.main.host import Host

# Lines of the script the question leaves out to fit 80x24: the shell, comments, the job's
# name, where its output goes and the submission id (all kept in the script itself).
_PLUMBING = ("#!", "# ", "#PBS -N", "#PBS -j", "#PBS -o", "#SBATCH --job-name", "#SBATCH --output")
_WIDTH = 70


def essential(script: str) -> list[str]:
    """The script's directives, directory and launch, wrapped to the dialog's width."""
    lines = []
    for line in script.splitlines():
        if not line.startswith(_PLUMBING) and not line.startswith("export "):
            lines += textwrap.wrap(line, _WIDTH, subsequent_indent="    ", break_on_hyphens=False)
    return lines


class Submissions:
    """Submits the plan of a run of the runs list, after a yes."""

    def __init__(self, host: Host) -> None:
        self.host = host

    def submit(self, path: Path) -> None:
        if self.host.session is None:
            self.host.notify("The allocation is still being read; try again in a moment.")
            return
        self.host.in_thread(lambda: self._prepare(path), "submit", holds_keys=True)

    def _prepare(self, path: Path) -> None:
        from ezpz_tui.core.launching.batch_script import render
        from ezpz_tui.core.launching.submission import (
            SubmitError,
            last_request,
            plan_source,
            prepare,
        )

        session = self.host.session
        assert session is not None
        store = session.store
        try:
            source, record = plan_source(store, str(path))
            request = last_request(store.outputs)  # the queue and account used last time
            job = prepare(record, source, request, session.alloc, store.outputs)
        except SubmitError as exc:
            self.host.notify(str(exc), title="Not submitted", severity="error")
            return
        script = render(job)
        tool = "qsub" if job.scheduler == "PBS" else "sbatch"
        question = f"Submit the plan of {job.source} with {tool}?"
        send = lambda: self._submit(job, script)  # noqa: E731
        self.host.dialogs.confirm(
            question, lambda: self.host.in_thread(send, "submit"), essential(script)
        )

    def _submit(self, job: BatchJob, script: str) -> None:
        from ezpz_tui.core.launching.submission import SubmitError, submit

        try:
            done = submit(job, script)
        except SubmitError as exc:
            self.host.notify(str(exc), title="Not submitted", severity="error")
            return
        self.host.notify(f"{job.scheduler} job {done.job_id} queued ({job.submission})")
        self.host.refresh_runs()
