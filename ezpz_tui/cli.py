"""``ezpz-tui``: the TUI with no arguments, headless commands on the same core otherwise.

Every command answers bad input with one readable line and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

from ezpz_tui import __version__

EPILOG = "With no command, ezpz-tui starts the terminal UI."
RUN_HELP = "run id, unique prefix, or path to a run directory"


def _outputs_arg(p: argparse.ArgumentParser) -> None:
    help = "directory holding run directories (default: $EZPZ_OUTPUTS or ./outputs)"
    p.add_argument("--outputs", type=Path, default=None, help=help)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line, as every other error here is."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


# Each command's one-line help, and the longer description its own --help shows.
COMMANDS_HELP = {
    "info": ("the allocation: scheduler, job, hosts, accelerators", None),
    "doctor": ("check the environment (exit 1 on an error)", None),
    "launch": (
        "start a run (default command: the demo training)",
        "Start a run through the right launcher; follows rank 0's log and exits with the run's "
        "exit code. Ctrl-C stops the run cleanly.",
    ),
    "runs": ("list runs in the outputs directory", None),
    "attach": (
        "monitor a run this process did not start (running or finished), read-only",
        "Open the TUI on RUN: its ranks, logs and metrics, followed live. Nothing can stop the "
        "run from there. Works on ezpz's own run directories too.",
    ),
    "plot": ("plot a run's metric in the terminal", None),
    "why": (
        "why a run failed: first failing rank, its end, last lines, launcher messages, advice",
        "Explain RUN's failure on one screen: the first rank that failed on its own and its "
        "host, its exit code or signal and what that usually means, its traceback or last "
        "lines, what the launcher said, which ranks were killed as a consequence, and what to "
        "do. A host a node fault names is added to bad_hosts.txt in the outputs directory.",
    ),
}


def _command(sub: Any, name: str, *, json: bool = False) -> argparse.ArgumentParser:
    help, description = COMMANDS_HELP[name]
    p = sub.add_parser(name, help=help, description=description)
    if json:
        p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def build_parser() -> argparse.ArgumentParser:
    from ezpz_tui.core.launching.plan import LAUNCHERS

    parser = _Parser(
        prog="ezpz-tui",
        description="See the allocation, launch distributed PyTorch, watch every rank.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"ezpz-tui {__version__}")
    _outputs_arg(parser)
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND")
    _command(sub, "info", json=True)
    _outputs_arg(_command(sub, "doctor", json=True))
    p = _command(sub, "launch")
    p.add_argument("-n", "--nodes", type=_positive, help="nodes to use (default: all)")
    p.add_argument("--ppn", type=_positive, help="ranks per node (default: one per accelerator)")
    for size, words in (("tp", "tensor"), ("pp", "pipeline"), ("cp", "context")):
        p.add_argument(f"--{size}", type=_positive, default=1, help=f"{words} parallel size")
    p.add_argument("--launcher", choices=LAUNCHERS, default="auto")
    p.add_argument(
        "--exclude", action="append", default=[], metavar="HOST", help="skip a host (repeatable)"
    )
    p.add_argument(
        "--env", action="append", default=[], metavar="K=V", help="extra rank env (repeatable)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the launch as JSON, start nothing")
    p.add_argument("--quiet", action="store_true", help="do not follow rank 0's log")
    p.add_argument(
        "--retries",
        type=int,
        default=0,
        metavar="N",
        help="after a node fault, exclude the host and relaunch, at most N times (default: 0)",
    )
    p.add_argument(
        "--no-exclude-bad",
        dest="exclude_bad",
        action="store_false",
        help="use the hosts listed in the outputs directory's bad_hosts.txt too",
    )
    _outputs_arg(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command for each rank")
    _outputs_arg(_command(sub, "runs", json=True))
    p = _command(sub, "attach")
    p.add_argument("run", help=RUN_HELP)
    _outputs_arg(p)
    p = _command(sub, "plot")
    p.add_argument("run", help=RUN_HELP)
    p.add_argument("--metric", default="loss", help="metric name (default: loss)")
    _outputs_arg(p)
    p = _command(sub, "why", json=True)
    p.add_argument("run", help=RUN_HELP)
    _outputs_arg(p)
    return parser


def _fail(message: str) -> int:
    print(f"ezpz-tui: {message}", file=sys.stderr)
    return 2


def _outputs(args: argparse.Namespace) -> Path:
    from ezpz_tui.core.session import default_outputs

    return args.outputs or default_outputs()


def cmd_info(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launching.allocation import detect_allocation, format_duration

    alloc = detect_allocation()
    data = asdict(alloc)
    data["walltime_left_s"] = alloc.walltime_left()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    more = " ..." if len(alloc.hosts) > 8 else ""
    kind = f"{alloc.accelerator_kind} per host ({alloc.accelerator_source})"
    rows = {
        "scheduler": alloc.scheduler,
        "job": alloc.job_id or "-",
        "machine": alloc.machine,
        "hosts": f"{len(alloc.hosts)}: {', '.join(alloc.hosts[:8])}{more}",
        "accelerators": f"{alloc.accelerators_per_host} {kind}",
        "cpus per host": alloc.cpus_per_host,
        "walltime left": format_duration(data["walltime_left_s"]),
    }
    for key, value in rows.items():
        print(f"{key:>14}  {value}")
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from ezpz_tui.core.checking.doctor import run_checks, worst_level
    from ezpz_tui.core.launching.allocation import detect_allocation

    alloc = detect_allocation()
    checks = run_checks(alloc, outputs=_outputs(args))
    if args.json:
        print(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        marks = {"ok": "ok  ", "warning": "warn", "error": "FAIL"}
        for c in checks:
            print(f"[{marks.get(c.level, c.level)}] {c.name}: {c.reason}")
            if c.level != "ok" and c.remedy:
                print(f"       -> {c.remedy}")
    return 1 if worst_level(checks) == "error" else 0


def _plan_from_args(args: argparse.Namespace) -> Any:
    from ezpz_tui.core.launching.plan import LaunchPlan, demo_command

    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    env = []
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--env takes K=V, got {item!r}")
        env.append((key, value))
    return LaunchPlan(
        nodes=args.nodes,
        exclude=tuple(args.exclude),
        ppn=args.ppn,
        tp=args.tp,
        pp=args.pp,
        cp=args.cp,
        launcher=args.launcher,
        command=tuple(command) or demo_command(),
        env=tuple(env),
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
    """The launch as JSON, exactly what would run; exit 2 when the plan has errors."""
    preview = session.preview(plan)
    out: dict[str, Any] = {"problems": [asdict(p) for p in preview.problems]}
    launch = preview.command
    if launch is not None:
        out.update(
            argv=launch.argv,
            env=launch.env,
            launcher=launch.launcher,
            hostfile=str(launch.hostfile) if launch.hostfile else None,
            hostfile_hosts=preview.hostfile_hosts,
            notes=launch.notes,
            rank_env=_rank_env(launch),
            world_size=plan.world_size(session.alloc),
            sizes={"tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "dp": plan.dp(session.alloc)},
        )
    print(json.dumps(out, indent=2))
    return 0 if launch is not None else 2


def cmd_launch(args: argparse.Namespace) -> int:
    from ezpz_tui.config import load_config
    from ezpz_tui.core.launching.allocation import detect_allocation
    from ezpz_tui.core.launching.outputs import RunStoreError, launch_error
    from ezpz_tui.core.launching.plan import LaunchRefused
    from ezpz_tui.core.launching.supervisor import Supervisor
    from ezpz_tui.core.session import Session

    settings, warnings = load_config()
    for warning in warnings:
        print(f"ezpz-tui: warning: {warning}", file=sys.stderr)

    try:
        plan = _plan_from_args(args)
    except ValueError as exc:
        return _fail(str(exc))
    if args.retries < 0:
        return _fail(f"--retries must be 0 or more, not {args.retries}")
    supervisor = Supervisor(kill_on_bad_exit=settings.kill_on_bad_exit)
    session = Session(detect_allocation(), _outputs(args), supervisor, exclude_bad=args.exclude_bad)
    if args.dry_run:
        return _dry_run(session, plan)
    try:
        handle = session.launch(plan)
    except LaunchRefused as exc:
        for problem in exc.problems:
            print(f"ezpz-tui: {problem.message}", file=sys.stderr)
        return 2
    except (OSError, RunStoreError) as exc:  # the outputs directory: a file, read-only, full
        return _fail(launch_error(session.store.outputs, exc))
    except ValueError as exc:
        return _fail(str(exc))
    print(f"ezpz-tui: run {handle.run_dir}", file=sys.stderr)
    code = _follow(handle, quiet=args.quiet)
    if not args.retries or handle.state.state != "failed":
        return code
    from ezpz_tui.core.launching.failover import retry_after_node_faults

    return retry_after_node_faults(
        lambda plan, parent: session.launch(plan, parent=parent),
        lambda handle: _follow(handle, quiet=args.quiet),
        handle,
        code,
        plan,
        session.alloc,
        args.retries,
        lambda line: print(f"ezpz-tui: {line}", file=sys.stderr),
    )


def _follow(handle: Any, quiet: bool) -> int:
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
                _say(f"\nezpz-tui: stopping the run ({signal.Signals(stop_requested[0]).name}) ...")
                result = handle.stop()
                out.copy(log, offset)
                state = "clean" if result.clean else f"left {result.remaining}"
                _say(f"ezpz-tui: stopped ({state}) after {result.elapsed_s:.1f}s")
                return 128 + stop_requested[0]
            if code is not None:
                break
    out.copy(log, offset)
    return _report_end(handle)


def _say(message: str) -> None:
    """A line on stderr that never raises: the terminal may be gone (SIGHUP) or stderr full."""
    with contextlib.suppress(OSError, ValueError):
        print(message, file=sys.stderr, flush=True)


class _Out:
    """Rank 0's log copied to stdout until stdout refuses (``| head -1``, ``> /dev/full``):
    then the copying stops and stdout points at /dev/null, so Python's own flush at exit cannot
    fail either, and the run goes on being supervised."""

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
            try:
                sys.stdout.write(data.decode("utf-8", errors="replace"))
                sys.stdout.flush()
            except (OSError, ValueError) as exc:
                self._stop_printing(exc)
        return offset + len(data)

    def _stop_printing(self, exc: BaseException) -> None:
        self.on = False
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        why = getattr(exc, "strerror", None) or type(exc).__name__
        _say(f"ezpz-tui: stdout refused rank 0's log ({why}); the run goes on, followed quietly")


def _report_end(handle: Any) -> int:
    """The run's exit status, with its failed and killed ranks and the launcher's output.

    As srun does, a run that failed exits with its first failed rank's status (128+N for a
    signal), not with whatever the launcher returned while its other ranks were stopped.
    """
    from ezpz_tui.core.launching.ending import how
    from ezpz_tui.core.launching.exit_meanings import meaning
    from runtime.rundir import LAUNCHER_LOG, RankState, RunDir, State, read_statuses

    run, state = RunDir(handle.run_dir), handle.state
    statuses = read_statuses(run.path)
    failed = [f"rank {s.rank} ({how(s)})" for s in statuses if s.state == RankState.FAILED]
    killed = [s.rank for s in statuses if s.state == RankState.KILLED]
    if failed:
        _say(f"ezpz-tui: failed ranks: {', '.join(failed)}")
    if killed:
        _say(f"ezpz-tui: killed after rank {state.failed_rank} failed: {_ranks(killed)}")
    first = next((s for s in statuses if s.rank == state.failed_rank), None)
    said = first and meaning(first.exit_code, first.signal)
    if first is not None and said:
        _say(f"ezpz-tui: rank {first.rank}'s {how(first)} usually means: {said}")
    if failed or killed:
        _say(f"ezpz-tui: rank logs in {run.logs_dir}; `ezpz-tui why {run.path.name}` explains")
    if state.state not in (State.SUCCEEDED, State.STOPPED):
        tail = _tail(run.launcher_log, 15)
        if tail:
            _say(f"ezpz-tui: {LAUNCHER_LOG} ends with:\n" + tail)
    _say(f"ezpz-tui: run {state.state} ({run.path.name})")
    if state.state == State.FAILED and first is not None:
        if first.exit_code is not None:
            return first.exit_code
        if first.signal is not None:
            return 128 + first.signal
    if state.exit_code is not None:
        return state.exit_code
    return 128 + state.signal if state.signal is not None else 1


def _ranks(ranks: list[int]) -> str:
    """``0-3,7``: a long list of ranks in a line."""
    spans: list[list[int]] = []
    for rank in sorted(ranks):
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            spans.append([rank, rank])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_bytes()[-20000:].decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def cmd_runs(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launching.outputs import OutputsError, check_listable
    from ezpz_tui.core.launching.runstore import RunStore

    store = RunStore(_outputs(args))
    try:
        check_listable(store.outputs)  # a missing directory has no runs; a file is an error
    except OutputsError as exc:
        return _fail(str(exc))
    runs = store.list_runs()
    if args.json:
        print(json.dumps([{**asdict(r), "path": str(r.path)} for r in runs], indent=2))
        return 0
    if not runs:
        print(f"no runs in {_outputs(args)}")
        return 0
    print(_runs_row(name for name, _ in RUNS_COLUMNS) + "  PARENT")
    for r in runs:
        exit_code = f"s{r.signal}" if r.signal else "" if r.exit_code is None else r.exit_code
        sizes = ("-" if x is None else x for x in (r.world_size, r.tp, r.pp, r.cp, r.dp))
        print(_runs_row([r.run_id, r.state, exit_code, *sizes]) + f"  {r.parent or ''}")
    return 0


RUNS_COLUMNS = (("RUN", "<34"), ("STATE", "<10"), ("EXIT", ">4"), ("WORLD", ">5"))
RUNS_COLUMNS += tuple((size, ">3") for size in ("TP", "PP", "CP", "DP"))


def _runs_row(cells: Iterable[Any]) -> str:
    return " ".join(f"{cell:{width}}" for cell, (_, width) in zip(cells, RUNS_COLUMNS, strict=True))


def cmd_plot(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launching.runstore import RunStore, RunStoreError
    from ezpz_tui.core.watching.metrics.one_metric import read_metric
    from ezpz_tui.terminal_plot import chart

    try:
        run_dir = RunStore(_outputs(args)).resolve(args.run)
    except RunStoreError as exc:
        return _fail(str(exc))
    series = read_metric(run_dir, args.metric)
    for note in series.notes():
        print(f"ezpz-tui: {note}", file=sys.stderr)
    if not series.values:
        return _fail(series.why_nothing(run_dir.name))
    try:
        drawn = chart(series, f"{args.metric} — {run_dir.name} ({len(series.ranks)} ranks)")
    except Exception:  # plotext's own arithmetic: overflow on spans near the float range
        low, high = series.span()
        return _fail(f"cannot draw {args.metric}: its values span {low:g} to {high:g}")
    print(drawn)
    return 0


def cmd_tui(args: argparse.Namespace) -> int:
    from ezpz_tui.ui.app import run_app

    return run_app(outputs=args.outputs)


def cmd_attach(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launching.runstore import RunStore, RunStoreError
    from ezpz_tui.ui.app import run_app
    from runtime.rundir import LOGS, RUN_TOML, RunDir

    try:
        run_dir = RunStore(_outputs(args)).resolve(args.run).resolve()
    except RunStoreError as exc:
        return _fail(str(exc))
    if not RunDir(run_dir).looks_like_run():
        return _fail(f"{run_dir} holds no run: no {RUN_TOML}, {LOGS}/ or metrics files")
    return run_app(outputs=args.outputs or run_dir.parent, attach=run_dir)


def cmd_why(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launching.failover import why_report
    from ezpz_tui.core.launching.runstore import RunStore, RunStoreError
    from runtime.rundir import LOGS, RUN_TOML, RunDir

    try:
        run_dir = RunStore(_outputs(args)).resolve(args.run).resolve()
    except RunStoreError as exc:
        return _fail(str(exc))
    if not RunDir(run_dir).looks_like_run():
        return _fail(f"{run_dir} holds no run: no {RUN_TOML}, {LOGS}/ or metrics files")
    print(why_report(run_dir, args.json, warn=lambda line: print(line, file=sys.stderr)))
    return 0


COMMANDS = {
    "info": cmd_info,
    "doctor": cmd_doctor,
    "launch": cmd_launch,
    "runs": cmd_runs,
    "plot": cmd_plot,
    "attach": cmd_attach,
    "why": cmd_why,
    None: cmd_tui,
}


def main(argv: list[str] | None = None) -> int:
    if not (sys.argv[1:] if argv is None else argv):
        # The bare TUI skips building the parser (and importing the plan module for its
        # launcher list): it is the first frame's start-up cost.
        return cmd_tui(argparse.Namespace(cmd=None, outputs=None))
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.cmd](args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # ezpz-tui runs | head
        return 0


if __name__ == "__main__":
    sys.exit(main())
