"""Snapshots of the whole ezpz-tui screen on a fixture Polaris job, at 120x40 and 80x24.

What makes them repeatable (docs/pitfalls.md): a fixture allocation (PBS, 2 hosts x 4 A100,
job id, walltime read 12m34s before a frozen clock), fixed doctor checks (one warning, one
error), three fixture runs (succeeded, failed on one rank, stopped), a fixed terminal size, every
worker finished before the picture, no notification (the config directory is empty) and no
blinking cursor (focus is never left in a text field, and blinking is off where one is shown).

Paths the launcher preview prints must not depend on the machine: the outputs directory and the
job's nodefile live in a fixed directory (held under a lock while a test uses it, since other
test sessions may run at the same time), ``mpiexec`` is a stand-in there (never run: snapshots
launch nothing) and the interpreter is called ``python``.
"""

from __future__ import annotations

import fcntl
import shutil
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from ezpz_tui import config
from ezpz_tui.core.checking.check import Check
from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.ui.app import EzpzApp
from ezpz_tui.ui.main.regions import RUN_VIEW_MIN
from ezpz_tui.ui.screens.failure import FailureScreen
from ezpz_tui.ui.screens.help import HelpScreen
from ezpz_tui.ui.widgets.launch_form import LaunchForm
from ezpz_tui.ui.widgets.logview import LogView
from ezpz_tui.ui.widgets.metrics import MetricsView
from ezpz_tui.ui.widgets.panels import SummaryBar
from ezpz_tui.ui.widgets.ranks import RankList
from ezpz_tui.ui.widgets.runs import RunsPanel
from ezpz_tui.ui.widgets.topology import TopologyGrid
from tests.fixtures.runs import POLARIS_HOSTS, make_run
from tests.pilots import painted, started, text_of, until, workers_done

SNAP_ROOT = Path("/tmp/ezpz-tui-snapshots")
OUTPUTS = SNAP_ROOT / "outputs"
NODEFILE = SNAP_ROOT / "aux" / "4242424.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"
FIXED = 1795352400.0  # the frozen "now"
JOB = "4242424.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"

POLARIS = Allocation(
    scheduler="PBS",
    job_id=JOB,
    machine="Polaris",
    hosts=POLARIS_HOSTS,
    accelerators_per_host=4,
    accelerator_kind="cuda",
    accelerator_source="machine layout (Polaris)",
    walltime_left_s=3600.0,
    walltime_checked_at=FIXED - 754.0,
    nodefile=str(NODEFILE),
    cpus_per_host=64,
)

CHECKS = [
    Check("python", "ok", "3.12.8 in /home/user/venv"),
    Check("torch", "ok", "2.6.0+cu124, 4 cuda devices, nccl"),
    Check(
        "mpi4py",
        "warning",
        "mpi4py 4.0.1 was built against MPICH 4.2; the job runs cray-mpich 8.1",
        "pip install --no-binary mpi4py --force-reinstall mpi4py",
    ),
    Check("launcher", "ok", "mpiexec (PALS) on PATH"),
    Check(
        "outputs",
        "error",
        "outputs/ is on tmpfs: other nodes cannot see the rank logs",
        "set EZPZ_OUTPUTS to a directory on the shared filesystem",
    ),
    Check("walltime", "ok", "47 min left"),
]

SUCCEEDED = "20261122-101500-000-tp1pp1cp1"
FAILED = "20261122-102000-000-tp2pp1cp1"
STOPPED = "20261122-103000-000-tp2pp2cp1"

Snap = Callable[..., bool]
SIZES = pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
WIDE, SMALL = (120, 40), (80, 24)


FIXTURE_RUNS = [
    # run id, state, exit code, sizes, minutes before "now", more
    (SUCCEEDED, "succeeded", 0, {"tp": 1}, 45, {}),
    (FAILED, "failed", 1, {"tp": 2}, 40, {"parent": SUCCEEDED, "failing_rank": 3}),
    (STOPPED, "stopped", 130, {"tp": 2, "pp": 2}, 30, {}),
]


def make_fixture_runs(outputs: Path) -> None:
    for run_id, state, code, sizes, minutes, more in FIXTURE_RUNS:
        make_run(
            outputs,
            run_id=run_id,
            state=state,
            exit_code=code,
            sizes=sizes,
            ranks=8,
            steps=40,
            created=FIXED - 60 * minutes,
            **more,
        )


@pytest.fixture
def polaris(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[EzpzApp]:
    """The app on the fixture job, with the fixed directory to itself while the test runs."""
    SNAP_ROOT.mkdir(parents=True, exist_ok=True)
    with open(SNAP_ROOT / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.rmtree(OUTPUTS, ignore_errors=True)
        make_fixture_runs(OUTPUTS)
        NODEFILE.parent.mkdir(exist_ok=True)
        NODEFILE.write_text("".join(f"{host}\n" for host in POLARIS_HOSTS))
        bin_dir = SNAP_ROOT / "bin"
        bin_dir.mkdir(exist_ok=True)
        stand_in = bin_dir / "mpiexec"
        stand_in.write_text("#!/bin/sh\necho 'a stand-in for PALS mpiexec' >&2\nexit 1\n")
        stand_in.chmod(0o755)
        monkeypatch.setenv("PATH", str(bin_dir))
        monkeypatch.setenv(config.ENV_CONFIG_DIR, str(tmp_path / "config"))
        monkeypatch.setattr(sys, "executable", "python")  # the demo command's interpreter
        yield EzpzApp(outputs=OUTPUTS, alloc=POLARIS, clock=lambda: FIXED, checks=CHECKS)


async def settle(pilot: Pilot[None]) -> None:
    """Wait until every worker has reported and the screen has caught up."""
    await started(pilot)
    for _ in range(3):
        await workers_done(pilot)
        await pilot.pause()
    await painted(pilot)


async def start(pilot: Pilot[None]) -> None:
    """The state after start-up, with the interpreter path out of the launcher preview."""
    app = pilot.app
    await started(pilot)
    assert isinstance(app, EzpzApp) and app.main.session is not None
    await settle(pilot)
    app.main.session.python = "python"
    form = app.query_one(LaunchForm)
    form.post_message(LaunchForm.Changed(form.plan if form.can_launch else None, form.problems))
    for field in app.query(Input):
        field.cursor_blink = False
    await settle(pilot)


async def set_field(pilot: Pilot[None], field: str, value: str) -> None:
    """Type ``value`` into a launch form field the way a person does, then leave the field."""
    pilot.app.query_one(f"#{field}", Input).focus()  # selects the whole value
    await pilot.pause()
    await pilot.press(*value, "escape")
    await settle(pilot)


def run_before(*steps: Callable[[Pilot[None]], Awaitable[None]]) -> Callable:
    async def before(pilot: Pilot[None]) -> None:
        await start(pilot)
        for step in steps:
            await step(pilot)
        await settle(pilot)

    return before


@SIZES
def test_start_screen(snap_compare: Snap, polaris: EzpzApp, size: tuple[int, int]) -> None:
    async def check(pilot: Pilot[None]) -> None:
        assert len(pilot.app.query_one(RunsPanel).runs) == 3

    assert snap_compare(polaris, terminal_size=size, run_before=run_before(check))


def test_launch_form_with_invalid_tp(snap_compare: Snap, polaris: EzpzApp) -> None:
    """At 80x24, where the form has the least room: the problem sentence and the marked
    fields must still show."""

    async def invalid_tp(pilot: Pilot[None]) -> None:
        await set_field(pilot, "tp", "3")
        assert pilot.app.query_one("#tp", Input).has_class("-invalid")

    assert snap_compare(polaris, terminal_size=SMALL, run_before=run_before(invalid_tp))


def test_launch_form_unfolded(snap_compare: Snap, polaris: EzpzApp) -> None:
    """``za`` on the form: the rarely used fields in rows under the command, their values (a
    plan's staging and env) in them, the preview below."""

    async def unfold(pilot: Pilot[None]) -> None:
        await set_field(pilot, "command", "python train.py")
        await pilot.press("z", "a")
        await settle(pilot)
        await set_field(pilot, "env", "NCCL_DEBUG=INFO")
        assert pilot.app.query_one(LaunchForm).more

    assert snap_compare(polaris, terminal_size=(120, 40), run_before=run_before(unfold))


async def open_failed(pilot: Pilot[None]) -> None:
    """L g ] Enter: the failed run, followed until its rank list and first failure show."""
    await pilot.press("L", "g", "]", "enter")
    await settle(pilot)
    header = str(pilot.app.query_one("#run-header").render())
    assert header.startswith(FAILED)
    ranks, log = pilot.app.query_one(RankList), pilot.app.query_one(LogView)

    def shown() -> bool:
        monitor = ranks.monitor
        return (
            monitor is not None
            and log.rank == 3
            and all(info.status == "failed" for info in monitor.ranks.values())
            and len(monitor.ranks) == 8
        )

    await until(pilot, shown, "the failed run followed", 10)
    main = pilot.app.main  # type: ignore[attr-defined]
    # The rows come first; every file's lines and records with the first read's end.
    await until(pilot, lambda: main.opened.first_read_ended, "the first read", 10)
    await until(pilot, lambda: main.opened.failure is not None, "why it failed", 10)
    # The failed run was relaunched from SUCCEEDED: its parent is overlaid unasked.
    runs = pilot.app.query_one(RunsPanel)
    await until(pilot, lambda: {p.name for p in runs.compared} == {SUCCEEDED}, "the parent", 10)
    # The sidebars have made room for the log (after a refresh): the log's height follows.
    center = main.query_one("#center")
    await until(pilot, lambda: center.size.width >= RUN_VIEW_MIN, "room for the log", 10)
    # Its checkpoints are read by a thread of their own, shown at the summary bar's next tick.
    bar = pilot.app.query_one(SummaryBar)
    await until(pilot, lambda: "no checkpoints" in text_of(bar), "the checkpoint gauge", 10)
    await settle(pilot)


def test_failed_run_opened(snap_compare: Snap, polaris: EzpzApp) -> None:
    """The failed run: the rank list (rank 3 failed first with exit 1, the rest killed by
    SIGTERM, each with its last line) over rank 3's log, colours parsed, the progress bar's
    rewrites collapsed."""
    assert snap_compare(polaris, terminal_size=WIDE, run_before=run_before(open_failed))


@SIZES
def test_failure_dialog(snap_compare: Snap, polaris: EzpzApp, size: tuple[int, int]) -> None:
    """``w`` on the failed run: why it failed on one screen (the first failing rank, its host
    and end, its traceback, the launcher's word, the ranks killed after it, what to do), with
    the keys to exclude the host and relaunch, scroll and close."""

    async def why(pilot: Pilot[None]) -> None:
        await pilot.press("w")
        await until(pilot, lambda: isinstance(pilot.app.screen, FailureScreen), "why", 10)

    assert snap_compare(polaris, terminal_size=size, run_before=run_before(open_failed, why))


def test_all_ranks_view_small(snap_compare: Snap, polaris: EzpzApp) -> None:
    """``a`` at 80x24: every rank's lines interleaved with a coloured rank column."""

    async def all_ranks(pilot: Pilot[None]) -> None:
        await pilot.press("a")
        assert pilot.app.query_one(LogView).rank is None

    assert snap_compare(polaris, terminal_size=SMALL, run_before=run_before(open_failed, all_ranks))


async def metrics(pilot: Pilot[None]) -> None:
    """``t`` from the Run tab, then wait for the loss plot's last throttled redraw."""
    await pilot.press("t")
    await settle(pilot)
    view = pilot.app.query_one(MetricsView)
    await until(pilot, lambda: view.current_metric() == "loss", "the loss plot", 10)
    await pilot.pause(0.6)  # one throttled redraw after the last data
    await settle(pilot)


def test_metrics_tab(snap_compare: Snap, polaris: EzpzApp) -> None:
    """``t`` from the Run tab: the failed run's loss, mean with its min/max band over 8 ranks,
    and the NaN of rank 3 flagged in the status line."""

    assert snap_compare(polaris, terminal_size=WIDE, run_before=run_before(open_failed, metrics))


def test_topology_focused_with_tp2(snap_compare: Snap, polaris: EzpzApp) -> None:
    """TP=2 typed into the form, then K: four TP groups coloured on 2 hosts x 4 GPUs."""

    async def tp2(pilot: Pilot[None]) -> None:
        await set_field(pilot, "tp", "2")
        await pilot.press("K")
        assert pilot.app.focused is pilot.app.query_one(TopologyGrid)

    assert snap_compare(polaris, terminal_size=WIDE, run_before=run_before(tp2))


def test_help_screen(snap_compare: Snap, polaris: EzpzApp) -> None:
    async def help_screen(pilot: Pilot[None]) -> None:
        await pilot.press("question_mark")
        assert isinstance(pilot.app.screen, HelpScreen)

    assert snap_compare(polaris, terminal_size=WIDE, run_before=run_before(help_screen))
