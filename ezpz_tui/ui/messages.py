"""What workers and threads tell the main screen, one typed Textual message each.

Every probe, file read and process call runs off the UI thread and reports back by posting one
of these to the screen, which handles it in an ``on_…`` method on the UI thread. Textual drops a
message posted to a screen that is closing and a closing screen still has all its widgets while
it works through its queue, so no handler needs to ask whether the app is going away.

Messages are dataclasses (Textual's ``Message`` initialises itself in ``__post_init__``), compared
by identity like any other message.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from ezpz_tui.core.comparing.compare import Comparison
    from ezpz_tui.core.comparing.sweep import SweepEvent
    from ezpz_tui.core.failover import Exclusion
    from ezpz_tui.core.launching.plan import CheckedPlan, LaunchPlan
    from ezpz_tui.core.launching.resuming import Resume
    from ezpz_tui.core.launching.supervisor import RunHandle
    from ezpz_tui.core.session import Preview, Session
    from ezpz_tui.core.watching.failure import Failure
    from ezpz_tui.core.watching.first_read import Ending, Part
    from ezpz_tui.core.watching.metrics.store import MetricStore
    from ezpz_tui.core.watching.monitor import Prepared, Settled
    from ezpz_tui.ui.opened_run import OpenedRun
    from runtime.rundir import RunState


@dataclass(eq=False)
class SessionStarted(Message):
    """The session over the job this process runs in (or this host alone), with the default
    ``plan`` and its ``preview``: the form shows them together."""

    session: Session
    plan: LaunchPlan
    preview: Preview | None


@dataclass(eq=False)
class PreviewReady(Message):
    """The launch the edited ``plan`` would make (None: it could not be computed)."""

    plan: LaunchPlan
    preview: Preview | None


@dataclass(eq=False)
class RunStateChanged(Message):
    """Posted from the supervisor's watcher thread whenever a run records a state."""

    handle: RunHandle
    state: RunState


@dataclass(eq=False)
class Launched(Message):
    """A launch (or relaunch) started: its run is to be opened."""

    handle: RunHandle


@dataclass(eq=False)
class RelaunchAsked(Message):
    """What relaunching ``handle``'s live run with ``checked`` changes (``lines``, from
    :func:`~ezpz_tui.core.launching.change.change_lines`): the question to ask first. The plan
    travels checked, so a yes launches it without checking it again."""

    handle: RunHandle
    checked: CheckedPlan
    lines: list[str]
    resume: Resume | None = None  # the relaunch's default: from the run's newest checkpoint
    preflight: list[str] = field(default_factory=list)  # its verdict's lines, when it ran
    refused: str | None = None  # why yes is refused: the preflight failed, with its cause


@dataclass(eq=False)
class RunsStopped(Message):
    """Stopping runs has finished; ``then_exit`` when the stop was the first half of a quit."""

    then_exit: bool


@dataclass(eq=False)
class OverlayLoaded(Message):
    """An earlier run's metrics, read to be overlaid on the plots; ``asked``: by the person
    (``c``), not because it is the opened run's parent."""

    path: Path
    store: MetricStore
    asked: bool


@dataclass(eq=False)
class GoodputRead(Message):
    """The productive share of the opened run ``run``'s wall time, read from its files (and
    its parents'): the summary bar's ``goodput 91%``."""

    run: OpenedRun
    goodput: float | None


@dataclass(eq=False)
class FailureExplained(Message):
    """Why the opened run ``run`` failed (None: it has not), read from its files; ``show``
    when the person asked to see it."""

    run: OpenedRun
    failure: Failure | None
    show: bool


@dataclass(eq=False)
class ExclusionPlanned(Message):
    """What "exclude host and relaunch" would do after a failure, or why it cannot: the
    person is asked before anything is written."""

    exclusion: Exclusion


@dataclass(eq=False)
class ParentFound(Message):
    """The opened run ``run`` was relaunched from the run in ``parent``: its curves belong on
    the plots without being asked for; ``resumed``: it continued from the parent's checkpoint,
    so the two are drawn as one curve."""

    run: OpenedRun
    parent: Path
    resumed: bool = False


@dataclass(eq=False)
class ComparisonReady(Message):
    """The runs of the Compare tab, read and ranked."""

    comparison: Comparison


@dataclass(eq=False)
class SweepProgress(Message):
    """A run of the TUI's sweep started, ended or was refused (``event``), or the sweep is over
    (``event`` None, ``text`` says how it went)."""

    event: SweepEvent | None
    text: str | None


@dataclass(eq=False)
class TuneProgress(Message):
    """The TUI's tune: a run started (``run``), or the leaderboard changed (``board``: its
    lines); over when ``text`` says how it went, with ``best`` the plan that launches the
    winner (None: no winner)."""

    run: Path | None
    board: list[str]
    text: str | None = None
    best: LaunchPlan | None = None


@dataclass(eq=False)
class BadHostsRead(Message):
    """The hosts the outputs directory's ``bad_hosts.txt`` lists."""

    hosts: list[str]


class Handoff(Message):
    """A message from the follower thread, which waits on ``taken`` before it reads on: what it
    reads never queues up faster than the UI applies it, and the screen lays out the change
    before the next one. The handler sets it (``done``) whatever happens."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.taken = threading.Event()

    def done(self) -> None:
        self.taken.set()


@dataclass(eq=False)
class RanksExpected(Handoff):
    """The opened run's record says how many ranks it has, before their files appear."""

    run: OpenedRun
    world: int


@dataclass(eq=False)
class DigestRead(Handoff):
    """The opened run has ended and its digest was read (in a child interpreter): every rank's
    row, the summary and the plot's band, in place of a first read of its files."""

    run: OpenedRun
    found: Settled


@dataclass(eq=False)
class BatchRead(Handoff):
    """One batch of the opened run's files, prepared off the UI thread."""

    run: OpenedRun
    prepared: Prepared


@dataclass(eq=False)
class FirstReadPart(Handoff):
    """What the opened run's first read, in a worker process, sent: a part or its ending."""

    run: OpenedRun
    item: Part | Ending


@dataclass(eq=False)
class StacksCollected(Message):
    """Every rank of ``run_dir`` on this host was asked for its stacks: the grouped answer."""

    run_dir: Path
    lines: list[str]


@dataclass(eq=False)
class StopElsewhereAsked(Message):
    """The run in ``run_dir`` is supervised by process ``pid`` here, which can be asked to stop
    it: the user is asked first."""

    run_dir: Path
    pid: int


@dataclass(eq=False)
class KeysReleased(Message):
    """A worker that held the keys typed meanwhile is done, and what it posted before this
    has been handled: the keys can act (``why`` is its hold)."""

    why: object
