"""``ezpz-tui launch``: build the launch, start it, follow rank 0 as srun would, report the end."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ezpz_tui.cli.common import fail, outputs_of, run_named, say
from ezpz_tui.cli.stdout import refused, why_refused


def plan_from_args(args: argparse.Namespace, **sizes: int) -> Any:
    """The plan the options shared by ``launch`` and ``sweep`` describe, with ``sizes`` (tp, pp,
    cp; 1 when not given); ``ValueError`` for a malformed ``--env``."""
    from ezpz_tui.core.launching.plan import LaunchPlan, demo_command, min_nodes_value

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    env = []
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--env takes K=V, got {item!r}")
        env.append((key, value))
    least = getattr(args, "stage_min_nodes", None)  # launch's only
    return LaunchPlan(
        stage_min_nodes=None if least is None else min_nodes_value(least, "--stage-min-nodes"),
        nodes=args.nodes,
        exclude=tuple(args.exclude),
        ppn=args.ppn,
        launcher=args.launcher,
        command=tuple(command) or demo_command(),
        env=tuple(env),
        launcher_args=tuple(args.launcher_args),
        spares=getattr(args, "spares", 0),  # launch's only
        stage=getattr(args, "stage", "off"),
        stage_dir=getattr(args, "stage_dir", ""),
        **sizes,
    )


def _rank_env(launch: Any) -> dict[str, Any]:
    """What every rank is given to find its place and its peers (torchrun's contract)."""
    from runtime.env import TORCHRUN_VARS

    meet = launch.rendezvous
    given_by = "torchrun" if launch.launcher == "torchrun" else "runtime.capture"
    out: dict[str, Any] = {"vars": list(TORCHRUN_VARS), "given_by": given_by}
    if meet is not None and given_by == "torchrun":
        out.update(rdzv_endpoint=meet.endpoint(), why=meet.why)
    elif meet is not None:
        out.update(MASTER_ADDR=meet.addr, MASTER_PORT=meet.port, why=meet.why)
    return out


def _dry_run(session: Any, plan: Any) -> int:
    """The launch as JSON, exactly what would run: the plan as the launch checks it (without
    the hosts of bad_hosts.txt), its sizes and its argv; exit 2 when the plan has errors."""
    preview = session.preview(plan)
    out: dict[str, Any] = {"problems": [asdict(p) for p in preview.problems]}
    launch, checked = preview.command, preview.checked
    if launch is not None and checked is not None:
        plan = checked.plan
        out.update(
            argv=launch.argv,
            env=launch.env,
            launcher=launch.launcher,
            launcher_args=plan.launcher_args,
            hostfile=str(launch.hostfile) if launch.hostfile else None,
            hostfile_hosts=preview.hostfile_hosts,
            notes=launch.notes,
            rank_env=_rank_env(launch),
            stage=asdict(launch.stage) if launch.stage else None,
            world_size=checked.world_size,
            sizes={
                "tp": plan.tp,
                "pp": plan.pp,
                "cp": plan.cp,
                "dp": plan.layout(session.alloc).dp,
            },
        )
    print(json.dumps(out, indent=2))
    return 0 if launch is not None else 2


def session_for(args: argparse.Namespace) -> Any:
    """The session ``launch`` and ``sweep`` start runs in: this allocation, the outputs
    directory, a supervisor with the user's ``config.toml`` settings (its warnings said)."""
    from ezpz_tui.config import load_config
    from ezpz_tui.core.launching.allocation import detect_allocation
    from ezpz_tui.core.launching.batch_script import SUBMISSION_VAR
    from ezpz_tui.core.launching.supervisor import Supervisor
    from ezpz_tui.core.session import Session
    from ezpz_tui.core.watching.peak_settings import PeakSettings

    settings, warnings = load_config()
    for warning in warnings:
        print(f"ezpz-tui: warning: {warning}", file=sys.stderr)
    supervisor = Supervisor(
        settings.kill_on_bad_exit,
        settings.raised_grace_s,
        settings.telemetry_s,
        settings.before_walltime_s,
        settings.flight_recorder,
        PeakSettings(settings.peak_tflops, settings.peak_dtype),
        settings.slow_factor,
        relaunch_save_s=settings.relaunch_save_s,
    )
    return Session(
        detect_allocation(),
        outputs_of(args),
        supervisor,
        exclude_bad=args.exclude_bad,
        submission=os.environ.get(SUBMISSION_VAR) or None,  # set by a batch script of submit
    )


def cmd_launch(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launch_result import NotStarted
    from runtime.rundir import State

    try:
        plan = plan_from_args(args, tp=args.tp, pp=args.pp, cp=args.cp)
    except ValueError as exc:
        return fail(str(exc))
    if args.retries < 0:
        return fail(f"--retries must be 0 or more, not {args.retries}")
    parent = None
    if args.resume_from is not None:
        resumed = _resume(args, plan)
        if isinstance(resumed, str):
            return fail(resumed)
        plan, parent = resumed
    session = session_for(args)
    if args.dry_run:
        return _dry_run(session, plan)
    with _staging_stops(plan.stage != "off"):
        result = session.launch(plan, parent=parent)
    if isinstance(result, NotStarted):
        for reason in result.reasons:
            say(f"ezpz-tui: {reason}")
        return 2
    failover = None
    while True:
        handle = result.handle
        say(f"ezpz-tui: run {handle.run_dir}")
        if handle.staging_note:
            say(f"ezpz-tui: {handle.staging_note}")
        code = follow(handle, quiet=args.quiet)
        if handle.state.state != State.FAILED:  # only a failure is retried (Failover.after)
            return code
        if failover is None:  # its failure analysis imported by a run that needs it only
            from ezpz_tui.core.failover import Failover

            failover = Failover(session, args.retries)
        step = failover.after(handle, plan)
        for line in step.said:
            say(f"ezpz-tui: {line}")
        if step.result is None or isinstance(step.result, NotStarted):
            return code
        result = step.result


@contextlib.contextmanager
def _staging_stops(staging: bool) -> Iterator[None]:
    """While a launch stages its environment (seconds to minutes, before any rank starts),
    SIGTERM (what ``ezpz-tui stop`` sends) stops it as Ctrl-C does: the run is recorded
    stopped and the copies made are removed, where dying of it would leave both behind."""
    if not staging:
        yield
        return

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _resume(args: argparse.Namespace, plan: Any) -> tuple[Any, str | None] | str:
    """``plan`` continuing from ``--resume-from``, with the run it continues as its parent
    when that run is in the same outputs directory; or why it cannot."""
    from ezpz_tui.core.launching.resuming import resume_of, with_resume
    from runtime.checkpoint_dirs import CheckpointError

    target = Path(args.resume_from).expanduser()
    if not target.exists():
        named = run_named(args, args.resume_from)
        if isinstance(named, str):
            return f"--resume-from {args.resume_from}: {named}"
        target = named
    try:
        resume = resume_of(target.absolute())
    except CheckpointError as exc:
        return str(exc)
    say(f"ezpz-tui: {resume.describe()}")
    run = resume.found.path.parent.parent  # <run>/checkpoints/step-N
    outputs = outputs_of(args).absolute()
    parent = run.name if run.parent.resolve() == outputs.resolve() else None
    return with_resume(plan, resume), parent


# Ctrl-C and SIGTERM (what `ezpz-tui stop` sends) are the user's stop; SIGHUP is the terminal
# or the SSH session going away, which nobody chose: the run's record says so.
HUNG_UP = "the terminal hung up (SIGHUP)"


def stop_reason(signum: int) -> str | None:
    """The reason a stop for signal ``signum`` records: None for the user's stop."""
    return HUNG_UP if signum == signal.SIGHUP else None


def follow(handle: Any, quiet: bool) -> int:
    """Print rank 0's log as it grows until the run ends, as srun would: Ctrl-C, SIGTERM or
    SIGHUP (the terminal closed) stop the run; a closed or full stdout stops the printing only,
    never the supervision."""
    from ezpz_tui.core.launching.processes import deferred_signals
    from runtime.rundir import RunDir

    out = _Out(quiet)
    log = RunDir(handle.run_dir).log(0)
    offset = 0
    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    with deferred_signals(stops) as stop_requested:
        while True:
            code = handle.wait(0.2)
            offset = out.copy(log, offset)
            if stop_requested:
                say(f"\nezpz-tui: stopping the run ({signal.Signals(stop_requested[0]).name}) ...")
                result = handle.stop(reason=stop_reason(stop_requested[0]))
                out.copy(log, offset)
                state = "clean" if result.clean else f"left {result.remaining}"
                say(f"ezpz-tui: stopped ({state}) after {result.elapsed_s:.1f}s")
                return 128 + stop_requested[0]
            if code is not None:
                break
    out.copy(log, offset)
    return report_end(handle)


class _Out:
    """Rank 0's log copied to stdout until stdout refuses (closed, ``| head -1``,
    ``> /dev/full``): then the copying stops, which is said once, and the run goes on being
    supervised (:mod:`ezpz_tui.cli.stdout` keeps the refusal from raising)."""

    def __init__(self, quiet: bool) -> None:
        self.on = not quiet

    def copy(self, path: Path, offset: int) -> int:
        if not self.on:
            return offset
        try:
            with path.open("rb") as fh:
                fh.seek(offset)
                data = fh.read()
        except OSError:
            return offset
        if data:
            sys.stdout.write(data.decode("utf-8", errors="replace"))
            sys.stdout.flush()
            if exc := refused():
                self._stop_printing(exc)
        return offset + len(data)

    def _stop_printing(self, exc: BaseException) -> None:
        self.on = False
        say(
            f"ezpz-tui: stdout refused rank 0's log ({why_refused(exc)}); "
            "the run goes on, followed quietly"
        )


def report_end(handle: Any) -> int:
    """The run's exit status, with its failed and killed ranks and the launcher's output.

    As srun does, a run that failed exits with its first failed rank's status (128+N for a
    signal), not with whatever the launcher returned while its other ranks were stopped.
    """
    from ezpz_tui.core.runs.ending import how
    from ezpz_tui.core.runs.exit_meanings import meaning
    from ezpz_tui.core.runs.full_disk import ended_on_full_disk, where_and_what_to_do
    from ezpz_tui.core.runs.tail import read_tail
    from ezpz_tui.core.words import rank_ranges
    from runtime.rundir import BAD_HOSTS, LAUNCHER_LOG, RankState, RunDir, State, read_statuses

    run, state = RunDir(handle.run_dir), handle.state
    statuses = read_statuses(run.path)
    failed = [f"rank {s.rank} ({how(s)})" for s in statuses if s.state == RankState.FAILED]
    killed = [s.rank for s in statuses if s.state == RankState.KILLED]
    if failed:
        say(f"ezpz-tui: failed ranks: {', '.join(failed)}")
    if killed:
        say(f"ezpz-tui: killed after rank {state.failed_rank} failed: {rank_ranges(killed)}")
    first = next((s for s in statuses if s.rank == state.failed_rank), None)
    said = first and meaning(first.exit_code, first.signal)
    if first is not None and said:
        say(f"ezpz-tui: rank {first.rank}'s {how(first)} usually means: {said}")
    if failed or killed:
        say(f"ezpz-tui: rank logs in {run.logs_dir}; `ezpz-tui why {run.path.name}` explains")
    if ended_on_full_disk(state):
        say(f"ezpz-tui: {where_and_what_to_do(run.path)}")
    if state.state not in (State.SUCCEEDED, State.STOPPED):
        tail = "\n".join(read_tail(run.launcher_log, 20000).splitlines()[-15:])
        if tail:
            say(f"ezpz-tui: {LAUNCHER_LOG} ends with:\n" + tail)
    for host in handle.bad_hosts_added:
        say(f"ezpz-tui: a node fault named {host}: added to {run.path.parent / BAD_HOSTS}")
    say(f"ezpz-tui: run {state.state} ({run.path.name})")
    if state.state == State.FAILED and first is not None:
        if first.exit_code is not None:
            return first.exit_code
        if first.signal is not None:
            return 128 + first.signal
    if state.exit_code is not None:
        return state.exit_code
    return 128 + state.signal if state.signal is not None else 1
