"""The run the Run and Metrics tabs show, followed live until another opens.

Its files are read by a plain daemon thread, not a Textual worker: the thread lives as long as
the run is open, and "wait for the workers" must keep meaning "wait for the short jobs". The
thread posts each batch to the screen and waits until the screen has applied it, so batches
never pile up in the UI's queue. The first read of every file runs in a worker process
(:mod:`~ezpz_tui.core.watching.first_read`), off this process's interpreter lock; the thread
hands its parts over the same way, then follows what is new.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ezpz_tui.core.runs.record import ranks_on_disk, read_record
from ezpz_tui.core.watching.checkpoint_gauge import Gauge, OnDisk, gauge, read_on_disk
from ezpz_tui.core.watching.collectives import read_collectives
from ezpz_tui.core.watching.efficiency import PeakSettings
from ezpz_tui.core.watching.finish import total_steps
from ezpz_tui.core.watching.first_read import (
    Ending,
    FirstRead,
    FirstReadFailed,
    Part,
    Request,
    install_ending,
    install_part,
    release,
)
from ezpz_tui.core.watching.followers import RunFollower
from ezpz_tui.core.watching.goodput import Ancestry, run_ledger
from ezpz_tui.core.watching.metrics.load import rank_loader
from ezpz_tui.core.watching.monitor import RankInfo, RunMonitor, settled
from ezpz_tui.core.watching.node_follow import LiveNodes, NodeBatch
from ezpz_tui.core.watching.progress import Progress
from ezpz_tui.core.watching.shown_files import ShownFiles
from ezpz_tui.ui.digest_ahead import digest_of
from ezpz_tui.ui.messages import (
    BatchRead,
    DigestRead,
    FirstReadPart,
    Handoff,
    ParentFound,
    RanksExpected,
)
from runtime import flight
from runtime.checkpoint_dirs import RESUME_VAR
from runtime.rundir import NODE_SHARDS, RunDir, read_state

if TYPE_CHECKING:
    from textual.message_pump import MessagePump

    from ezpz_tui.config import Config
    from ezpz_tui.core.watching.failure import Failure
    from ezpz_tui.core.watching.monitor import Prepared, Settled
    from ezpz_tui.ui.widgets.metrics import MetricsView
    from ezpz_tui.ui.widgets.run_panel import RunPanel

FOLLOW_INTERVAL_S = (
    0.1  # how often the follower hands a batch to the UI (docs/pitfalls.md: 50-250 ms)
)
READ_BYTES = 1 << 20  # per file and poll
BACKLOG_BYTES_PER_LINE = 200  # a generous training log line, to start a log near its end
FIRST_READS = 512  # files read for the first time per poll: rows show before every file is read
TAKEN_POLL_S = 0.05  # how often a thread waiting for the UI looks whether it should stop
COLLECTIVES_EVERY_S = 5.0  # the ranks report their Flight Recorder progress this often
COLLECTIVES_SHARE = 10  # ... and reading them takes at most a tenth of this thread's time
COLLECTIVES_CALLS_S = 10.0  # metadata calls a second they make, for a run read from its digests
GOODPUT_EVERY_S = 5.0  # a live run's goodput is read again this often, or more seldom:
GOODPUT_SHARE = 50  # ... so that reading it takes at most a fiftieth of a core
CHECKPOINTS_EVERY_S = 5.0  # how often a live run's completion marks are read for the gauge
STALL_SHARE = 0.75  # every node digest is looked at within this share of the stall time
NODE_CALLS_S = 20.0  # metadata calls a second a live run read from its node digests makes at most
PART_RANKS = 256  # a batch of more ranks' rows is applied in parts, keys answered between
ALL_VIEW_RANKS = 64  # a live run's all-ranks view read from its node digests: these ranks' logs
DIGEST_WAIT_S = 120.0  # how long an ended run's digest.json is waited for (its finalizer's)
DIGEST_LOOK_S = 1.0  # ... looked for this often
NODES_AFTER_RANKS = ALL_VIEW_RANKS  # a live run of more ranks read from its files moves to its
NODES_LOOK_S = 5.0  # node digests once they appear (one is looked for this often)


class OpenedRun:
    """``path`` shown in ``run_panel`` and ``metrics``; :meth:`start` follows it for
    ``screen``, which hands the thread's messages back to :meth:`expect_ranks` and
    :meth:`apply`."""

    def __init__(
        self,
        path: Path,
        settings: Config,
        screen: MessagePump,
        run_panel: RunPanel,
        metrics: MetricsView,
    ) -> None:
        self.path = path
        self.settings = settings
        self.state: str | None = None  # as last read from disk, for runs not started here
        self.progress = Progress()
        self.total_steps: int | None = None  # from the recorded command's --steps
        self.monitor = RunMonitor(
            path,
            stall_after=settings.stall_after,
            slow_factor=settings.slow_factor,
            peaks=PeakSettings(settings.peak_tflops, settings.peak_dtype, probe=False),
        )
        self._screen = screen
        self._app = screen.app
        self._run_panel = run_panel
        self._metrics = metrics
        self._stop = threading.Event()
        self.follower: RunFollower | None = None  # once the thread made it (benches read it)
        self.first_read_pid: int | None = None  # the worker process of the first read
        self.first_read_ended = False  # its ending was shown
        self.shown_files: ShownFiles | None = None  # a finished run's, opened from its digest
        self.live_nodes: LiveNodes | None = None  # a live run's, followed by its node digests
        # Why it failed (read in a worker once it is seen failed), and whether the person was
        # watching it live (or this process started it): only then does the why open by itself.
        self.failure: Failure | None = None
        self.explaining = False
        self.watched = False
        # The productive share of its wall time (the summary bar's), read in a worker when
        # the run opens and again while it is live (:meth:`goodput_due`).
        self.goodput: float | None = None
        self._ancestry = Ancestry()  # its ended parents' steps, read once
        self._goodput_next: float | None = 0.0  # monotonic; None while one is read
        self._goodput_final = False  # read after the run's end was seen
        self.checkpoints: OnDisk | None = None  # what the gauge reads, until the first look

    def start(self, read_only: bool) -> None:
        self._run_panel.open(self.monitor, read_only=read_only)
        self._metrics.set_run(self.path.name, self.path)
        context = contextvars.copy_context()
        name = f"follow {self.path.name}"
        threading.Thread(target=context.run, args=(self._read,), name=name, daemon=True).start()
        name = f"collectives {self.path.name}"
        threading.Thread(target=self._watch_collectives, name=name, daemon=True).start()
        name = f"checkpoints {self.path.name}"
        threading.Thread(target=self._watch_checkpoints, name=name, daemon=True).start()

    def stop(self) -> None:
        self._stop.set()
        if self.first_read_pid is not None:
            release()

    def expect_ranks(self, world: int) -> None:
        self.monitor.expect_ranks(world)
        self._run_panel.ranks.update_rows()

    def settle(self, found: Settled) -> None:
        """Show the finished run as its digest has it (from :meth:`_from_digest`): the rank
        rows, the summary bar's step, loss and rate, the plot's band and last values."""
        from ezpz_tui.core.watching.metrics.load import own_file_loader  # numpy: not at start
        from ezpz_tui.core.watching.metrics.store import MetricStore

        digested = found.digested
        self.monitor.settle(found)
        self._run_panel.ranks.update_rows(wait=False)  # 131,072 rows sorted in a thread
        loader = own_file_loader(self.path)
        self._metrics.adopt_store(MetricStore.settled(digested.metrics, loader, digested.records))
        self.progress = Progress(digested.step, digested.loss, digested.steps_per_s)

    def apply(self, prepared: Prepared, now: float) -> bool:
        """Show one batch; True when the summary may have changed: new records move the
        progress (step, loss, rate) and may make a rank slow."""
        changes = self.monitor.apply(prepared, now)
        batch = prepared.batch
        lowest = min(batch.records, default=None)
        if isinstance(batch, NodeBatch):  # when its ranks last stepped, as their digests say
            ranks = self.monitor.ranks
            for rank, when in batch.activity.items():
                info = ranks.get(rank)
                if info is not None and (info.last_activity or 0.0) < when:
                    self.monitor.mark_active(info, when)
            lowest = batch.lead if batch.lead in batch.records else None
        self._run_panel.apply(changes)
        if not (batch.records or batch.metric_restarts):
            return False
        self._metrics.add_records(batch.records, batch.metric_restarts)
        if lowest is None:
            return bool(batch.records)
        self.progress.update(batch.records[lowest])
        return True

    def goodput_due(self, now: float) -> bool:
        """Whether to read the goodput again (``now``: monotonic): at once when the run
        opens, then while it is live, spaced so the reads take at most a fiftieth of the time,
        and once after its end is seen (its figures then stay as they are)."""
        due = self._goodput_next
        if due is None or now < due or self._goodput_final:
            return False
        run = self.monitor.run_state
        self._goodput_final = run is not None and not run.live
        self._goodput_next = None
        return True

    def read_goodput(self, stall_after: float) -> float | None:
        """The goodput as of now (in a worker: reads the run's and its parents' files); None
        when it cannot be had (a bug must not take the UI down)."""
        start = time.monotonic()
        try:
            return run_ledger(self.path, stall_after=stall_after, ancestry=self._ancestry).goodput
        except Exception:
            return None
        finally:
            took = time.monotonic() - start
            self._goodput_next = time.monotonic() + max(GOODPUT_EVERY_S, GOODPUT_SHARE * took)

    def _watch_collectives(self) -> None:
        """Read the ranks' Flight Recorder files (:mod:`runtime.flight`) while the run is live,
        and once after its end (what its summary recorded, where it has one): who arrives last
        is ``slow`` in the rank list, the summary bar and the heatmap (counted in the summary
        bar once the run has ended), a rank that never entered the collective the others wait
        in is marked ``?`` and named in a notification. When the run turns ``hung`` every rank
        is asked to write its entries at once. The progress comes from the node digests (a
        rank's file only where none covers it: an older run's files take a second or two at
        1,024 ranks), and the looks are spaced to keep them under a tenth of the time."""
        monitor, run_dir = self.monitor, RunDir(self.path)
        flight_dir = run_dir.flight_dir
        said, asked, wait = None, False, COLLECTIVES_EVERY_S
        while not self._stop.wait(wait):
            run, now = monitor.run_state, time.time()
            live = run is None or run.live
            if live and not flight_dir.is_dir():  # an ended run's summary may hold its verdicts
                continue
            if live and not asked and monitor.hung(now) is not None:
                asked = True
                for fifo, _ in run_dir.flight_requests():  # every block's, or an older run's
                    flight.ask(str(fifo))
                if self._stop.wait(1.0):  # a moment for the ranks to write
                    return
            start = time.monotonic()
            try:
                reading = read_collectives(self.path, live, time.time())
            except Exception:  # a bug must not take the UI down: the next look may read
                continue
            wait = max(COLLECTIVES_EVERY_S, COLLECTIVES_SHARE * (time.monotonic() - start))
            if self.live_nodes is not None:  # each look lists nodes/ and reads every digest
                calls = 2 * (NODE_SHARDS + 1 + self.live_nodes.node_count)
                wait = max(wait, calls / COLLECTIVES_CALLS_S)
            monitor.collectives = reading
            headline = reading.verdict.headline() if reading.verdict else None
            with contextlib.suppress(RuntimeError):  # the app may be closing
                self._app.call_from_thread(self._run_panel.ranks.update_rows)
                if headline and headline != said:
                    self._app.call_from_thread(
                        self._app.notify, f"Collectives: {headline}", severity="warning", timeout=30
                    )
            said = headline
            if not live:
                return

    def _watch_checkpoints(self) -> None:
        """Read the run's checkpoints for the summary bar's gauge: at once, every few seconds
        while the run is live and once after its end. The read rate is measured once."""
        wait = 0.0
        while not self._stop.wait(wait):
            run = self.monitor.run_state
            try:
                rate = self.checkpoints.read_mb_s if self.checkpoints else None
                self.checkpoints = read_on_disk(self.path, rate)
            except Exception:  # a bug must not take the UI down: the next look may read
                pass
            if run is not None and not run.live:
                return
            wait = CHECKPOINTS_EVERY_S

    def checkpoint_gauge(self, now: float, max_age_s: float) -> Gauge | None:
        """The gauge as of ``now`` (an ended run's: as of its end), None before the first
        look at its checkpoints."""
        disk = self.checkpoints
        if disk is None:
            return None
        run, step_s = self.monitor.run_state, self.monitor.steps.median
        if step_s is None and self.progress.steps_per_s:
            step_s = 1 / self.progress.steps_per_s
        as_of = run.end if run is not None and not run.live and run.end is not None else now
        step = self.progress.step
        return gauge(disk, step=step, step_s=step_s, as_of=as_of, max_age_s=max_age_s)

    def _handed_over(self, message: Handoff) -> bool:
        """Post ``message`` and wait until the screen took it; False when it never will."""
        if not self._screen.post_message(message):
            return False
        while not message.taken.wait(TAKEN_POLL_S):
            if self._stop.is_set():
                return False
        return True

    def _request(self, world: int | None) -> Request:
        """How this run is followed: by the first read's worker, then by this process."""
        monitor = self.monitor
        return Request(
            str(monitor.run_dir),
            world,
            monitor.shown,
            monitor.keep_per_rank,
            monitor.keep_all,
            monitor.steps.slow_factor,
            READ_BYTES,
            monitor.keep_per_rank * BACKLOG_BYTES_PER_LINE,
            self.settings.stats_per_second,
            self.settings.slowest,
            FIRST_READS,
        )

    def _read_first(self, request: Request) -> dict[str, tuple[int, int]] | None:
        """Read every file once in a worker process (:mod:`~ezpz_tui.core.watching.first_read`),
        off this process's interpreter lock, handing each part to the screen as it comes. Where
        the follower goes on from; ``{}`` (from the start, in this process) when the worker
        failed, which a notification says; None when nothing is left to follow: the run had
        ended and was read whole, or it was closed meanwhile."""
        name = self.path.name
        adopted: set[int] = set()
        try:
            reader = FirstRead(request)
        except OSError as exc:
            failed = f"{exc.strerror or exc}"
        else:
            self.first_read_pid = reader.pid
            pending: Part | None = None
            handed = -FOLLOW_INTERVAL_S
            try:
                for item in reader.items(self._stop):
                    if isinstance(item, Part):  # parts that come quicker are shown together
                        adopted.update(item.ranks)
                        if pending is not None:
                            pending.merge(item)
                        pending = pending or item
                        if time.monotonic() - handed < FOLLOW_INTERVAL_S:
                            continue
                    for shown in (pending, item) if isinstance(item, Ending) else (pending,):
                        if shown is not None and not self._handed_over(FirstReadPart(self, shown)):
                            return None
                    pending, handed = None, time.monotonic()
                    if isinstance(item, Ending):
                        return None if item.finished else item.resume
                return None  # closed meanwhile
            except FirstReadFailed as exc:
                failed = str(exc)
            finally:
                reader.close()
        # What the worker sent is dropped: this process reads every file again.
        blank = Part({r: RankInfo(r) for r in adopted}, {r: deque() for r in adopted}, {}, {})
        if adopted and not self._handed_over(FirstReadPart(self, blank)):
            return None
        message = f"Reading {name} in a worker process failed ({failed}): reading it here"
        with contextlib.suppress(RuntimeError):  # the app may be closing
            self._app.call_from_thread(self._app.notify, message, severity="warning", timeout=30)
        return {}

    def adopt(self, item: Part | Ending, now: float) -> None:
        """Show what the first read's worker sent (on the UI thread): dictionaries taken over,
        no per-record work; ``now`` is when its ranks were last active."""
        if isinstance(item, Part):
            self._run_panel.apply(install_part(self.monitor, item, now))
            if item.progress is not None:
                self.progress = item.progress
            return
        self._run_panel.apply(install_ending(self.monitor, item))
        item.store.attach(rank_loader(self.path))
        self._metrics.adopt_store(item.store)
        self.first_read_ended = True

    def _read(self) -> None:
        """The run from its digest when it has ended and has one; a live run from its node
        digests while it has them, then (once it ended) from its digest; else from its files."""
        record, _ = read_record(self.monitor.run_dir)
        plan = record.get("plan")
        command = plan.get("command") if isinstance(plan, dict) else None
        if isinstance(command, list) and all(isinstance(w, str) for w in command):
            self.total_steps = total_steps(command)
        self._find_parent(record)
        if self._from_digest(record):
            return
        if not self._follow_nodes(record):
            # A run opened before its ranks reported (one this app launched) is read from its
            # files until its node digests appear; then from them, as one attached later is.
            if not self._follow(record):
                return
            self._follow_nodes(record)  # or the run ended meanwhile: its digest.json, below
        if self._stop.is_set() or self._digest_after_end(record):
            return
        self._follow(record)

    def _follow_nodes(self, record: Mapping[str, Any]) -> bool:
        """Follow a live run through its node digests (:class:`LiveNodes`): every rank's row,
        the summary bar, telemetry and the plot's band from one file a node, only the shown
        ranks' own files (and rank 0's series) beside them. Until the run ends or is closed:
        True then; False, having shown nothing, for an ended run or one without node digests
        (an older run, ``EZPZ_NODE_DIGEST_S=0``), which its files tell instead."""
        monitor, stop = self.monitor, self._stop
        if not read_state(monitor.run_dir).live:
            return False
        sizes = record.get("sizes", {}) if isinstance(record.get("sizes"), dict) else {}
        world = sizes.get("world_size")
        expected = isinstance(world, int) and 0 < world <= 1 << 20
        nodes = LiveNodes(
            monitor.run_dir,
            self._live_focus,
            log_backlog=monitor.keep_per_rank * BACKLOG_BYTES_PER_LINE,
            plotted=lambda: (self._metrics.rank,),  # the rank the plot draws: its new records
            read_bytes=READ_BYTES,
            # the idle budget: what the follower needs for every rank's files is not needed here
            stats_per_second=min(self.settings.stats_per_second, NODE_CALLS_S),
            # a rank's row must not look stalled only because its digest was not looked at
            slowest=min(self.settings.slowest, monitor.stall_after * STALL_SHARE),
            world=world if expected else None,
        )
        if not nodes.has_digests():
            return False
        self.live_nodes = nodes
        try:
            if expected and not self._handed_over(RanksExpected(self, world)):
                return True
            for batch in nodes.watch(stop, interval_s=FOLLOW_INTERVAL_S):
                for note in batch.notes:  # a node's writer is gone: said once, and beside its logs
                    self._app.call_from_thread(
                        self._app.notify, note, severity="warning", timeout=30
                    )
                for part in batch.parts(PART_RANKS):
                    prepared = monitor.prepare(part)
                    if stop.is_set() or not self._handed_over(BatchRead(self, prepared)):
                        return True
        except RuntimeError:  # the app's loop closed while a batch was on its way
            stop.set()
        except Exception as exc:  # a bug must not take the UI down: its files tell instead
            message = f"Reading {monitor.run_dir.name}'s node digests failed ({exc!r}): " + (
                "reading its files"
            )
            with contextlib.suppress(RuntimeError):  # the app may be gone too
                self._app.call_from_thread(self._app.notify, message, severity="warning")
            return False
        return True

    def _live_focus(self) -> tuple[int, ...]:
        """The ranks whose own files a live run read from its node digests follows: the rank on
        screen and the launcher; in the all-ranks view, the first :data:`ALL_VIEW_RANKS` too
        (their lines interleaved, as a small run shows every rank's)."""
        monitor = self.monitor
        if monitor.shown is not None:
            return monitor.shown_ranks()
        return (*monitor.shown_ranks(), *range(min(len(monitor.ranks), ALL_VIEW_RANKS)))

    def _digest_after_end(self, record: Mapping[str, Any]) -> bool:
        """The run followed by its node digests has ended: show it from the ``digest.json``
        its finalizer writes (waited for, a stat a second); False when none came in time."""
        digest_json = RunDir(self.monitor.run_dir).digest_json
        deadline = time.monotonic() + DIGEST_WAIT_S
        while not digest_json.is_file():
            if self._stop.wait(DIGEST_LOOK_S):
                return True
            if time.monotonic() > deadline:
                return False
        return self._from_digest(record, again=True)  # False: not readable, or of another run

    def _from_digest(self, record: Mapping[str, Any], again: bool = False) -> bool:
        """Open a finished run from its ``digest.json`` (read ahead while the app started, when
        attached: :mod:`~ezpz_tui.ui.digest_ahead`; a large one in a child interpreter), then read
        only the files of the ranks shown (:class:`ShownFiles`: rank 0's log and the
        launcher's at first, another rank's when a person opens it; its series when plotted).
        False, having shown nothing, for a live run or one without a readable digest.
        ``again``: the run was shown live before, so the shown ranks' logs start over."""
        run_dir = self.monitor.run_dir
        state, digested = digest_of(run_dir)
        if digested is None or self._stop.is_set():
            return False
        sizes = record.get("sizes", {}) if isinstance(record.get("sizes"), dict) else {}
        if sizes.get("world_size", digested.world) != digested.world:
            return False  # a digest of another run of this name (copied, grown since)
        try:
            if not self._handed_over(DigestRead(self, settled(digested, state))):
                return True
            files = self.shown_files = ShownFiles(
                run_dir,
                self.monitor.shown_ranks,
                log_backlog=self.monitor.keep_per_rank * BACKLOG_BYTES_PER_LINE,
                read_bytes=READ_BYTES,
            )
            for batch in files.watch(self._stop, interval_s=FOLLOW_INTERVAL_S):
                if again:  # what the live follower showed of these logs is read again whole
                    batch.log_restarts.update(lines.rank for lines in batch.logs)
                prepared = self.monitor.prepare(batch)
                if self._stop.is_set() or not self._handed_over(BatchRead(self, prepared)):
                    break
        except RuntimeError:  # the app's loop closed while a batch was on its way
            self._stop.set()
        return True

    def _find_parent(self, record: Mapping[str, Any]) -> None:
        """Say the run's parent (a relaunch's) to the screen, which overlays its curve."""
        parent, run_dir = record.get("parent"), self.monitor.run_dir
        if isinstance(parent, str) and RunDir(run_dir.parent / parent).run_toml.is_file():
            plan = record.get("plan")
            env = plan.get("env") if isinstance(plan, dict) else None
            resumed = isinstance(env, dict) and RESUME_VAR in env
            self._screen.post_message(ParentFound(self, run_dir.parent / parent, resumed))

    def _follow(self, record: Mapping[str, Any]) -> bool:
        """Read the run from its files until it ends or is closed (False), or until the node
        digests of a live run of more than :data:`NODES_AFTER_RANKS` ranks appear (True)."""
        monitor, stop = self.monitor, self._stop
        # The plan says how many ranks there are; a run with no readable record (ezpz's own, a
        # run.toml half copied) lists those its files show, and more as they appear.
        sizes = record.get("sizes", {}) if isinstance(record.get("sizes"), dict) else {}
        world = sizes.get("world_size")
        if not isinstance(world, int):
            world = ranks_on_disk(monitor.run_dir)
        try:
            expected = isinstance(world, int) and 0 < world <= 1 << 20
            if expected and not self._handed_over(RanksExpected(self, world)):
                return False
            # Existing logs start near their ends (older lines are read back on demand), one
            # poll reads at most READ_BYTES of a file and FIRST_READS files for the first
            # time, the rank on screen first: opening a 16,384-rank run with hours of logs
            # must not read gigabytes before the first frame. Then the files are looked at
            # within the [follow] budget of filesystem calls.
            request = self._request(world if expected else None)
            resume = self._read_first(request)
            if resume is None:  # nothing left to follow
                return False
            follower = self.follower = request.follower(monitor.shown_ranks, resume)
            nodes = _NodesAppear(monitor, world if expected else 0)
            for batch in follower.watch(stop, interval_s=FOLLOW_INTERVAL_S):
                prepared = monitor.prepare(batch)
                if stop.is_set() or not self._handed_over(BatchRead(self, prepared)):
                    break
                if nodes.appeared():
                    self.follower = None
                    return True
        except RuntimeError:  # the app's loop closed while a batch was on its way
            stop.set()
        except Exception as exc:  # a bug must not take the UI down: say so and stop following
            message = f"Stopped following {monitor.run_dir.name}: {exc!r}"
            with contextlib.suppress(RuntimeError):  # the app may be gone too
                self._app.notify(message, severity="error", timeout=30)
        return False


class _NodesAppear:
    """Whether a live run read from its files has node digests now: rank 0's node's digest
    looked for (one stat) every :data:`NODES_LOOK_S`, for a run of more ranks than the
    all-ranks view shows (a smaller one is read whole from its files, as it always was)."""

    def __init__(self, monitor: RunMonitor, world: int) -> None:
        self._monitor = monitor
        self._wanted = world > NODES_AFTER_RANKS
        self._next = time.monotonic() + NODES_LOOK_S

    def appeared(self) -> bool:
        now = time.monotonic()
        if not self._wanted or now < self._next:
            return False
        self._next = now + NODES_LOOK_S
        monitor = self._monitor
        first = monitor.ranks.get(0)
        if first is None or not first.host or not read_state(monitor.run_dir).live:
            return False
        return RunDir(monitor.run_dir).node_digest(first.host).is_file()
