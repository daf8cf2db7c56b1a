"""``ezpz-tui``: the TUI with no arguments, headless commands on the same core otherwise.

Every command answers bad input with one readable line and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
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
    "stacks": (
        "show where every rank of a running job is (Python stacks, grouped)",
        "Ask every rank of RUN on this host to dump its Python stacks (SIGUSR1, only to ranks "
        "that catch it) and print them, ranks with the same stack folded together. Exit 2 when "
        "no rank answered.",
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
    p = _command(sub, "stacks", json=True)
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
    from ezpz_tui.core.launching.allocation import detect_allocation
    from ezpz_tui.core.launching.plan import LaunchRefused
    from ezpz_tui.core.launching.runstore import RunStoreError
    from ezpz_tui.core.session import Session

    try:
        plan = _plan_from_args(args)
    except ValueError as exc:
        return _fail(str(exc))
    session = Session(detect_allocation(), _outputs(args))
    if args.dry_run:
        return _dry_run(session, plan)
    try:
        handle = session.launch(plan)
    except LaunchRefused as exc:
        for problem in exc.problems:
            print(f"ezpz-tui: {problem.message}", file=sys.stderr)
        return 2
    except (OSError, ValueError, RunStoreError) as exc:
        return _fail(str(exc))
    print(f"ezpz-tui: run {handle.run_dir}", file=sys.stderr)
    return _follow(handle, quiet=args.quiet)


def _follow(handle: Any, quiet: bool) -> int:
    """Print rank 0's log as it grows until the run ends; Ctrl-C (or SIGTERM) stops the run."""
    from ezpz_tui.core.launching.processes import deferred_signals
    from runtime.rundir import RunDir

    log = RunDir(handle.run_dir).log(0)
    offset = 0
    with deferred_signals() as stop_requested:
        while True:
            code = handle.wait(0.2)
            if not quiet:
                offset = _print_new(log, offset)
            if stop_requested:
                print("\nezpz-tui: stopping the run ...", file=sys.stderr)
                result = handle.stop()
                if not quiet:
                    _print_new(log, offset)
                state = "clean" if result.clean else f"left {result.remaining}"
                print(f"ezpz-tui: stopped ({state}) after {result.elapsed_s:.1f}s", file=sys.stderr)
                return 130
            if code is not None:
                break
    if not quiet:
        _print_new(log, offset)
    return _report_end(handle)


def _print_new(path: Path, offset: int) -> int:
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except OSError:
        return offset
    if data:
        sys.stdout.write(data.decode("utf-8", errors="replace"))
        sys.stdout.flush()
    return offset + len(data)


def _report_end(handle: Any) -> int:
    """The run's exit status (128+N for a signal), with failing ranks and launcher output."""
    from runtime.rundir import LAUNCHER_LOG, RankState, RunDir, State, read_statuses

    run, state = RunDir(handle.run_dir), handle.state
    failed = [
        f"rank {status.rank} ({status.signal_name or f'exit {status.exit_code}'})"
        for status in read_statuses(run.path)
        if status.state == RankState.FAILED
    ]
    if failed:
        print(f"ezpz-tui: failed ranks: {', '.join(failed)}", file=sys.stderr)
        print(f"ezpz-tui: rank logs in {run.logs_dir}", file=sys.stderr)
    if state.state != State.SUCCEEDED:
        tail = _tail(run.launcher_log, 15)
        if tail:
            print(f"ezpz-tui: {LAUNCHER_LOG} ends with:\n" + tail, file=sys.stderr)
    print(f"ezpz-tui: run {state.state} ({run.path.name})", file=sys.stderr)
    if state.exit_code is not None:
        return state.exit_code
    return 128 + state.signal if state.signal is not None else 1


def _tail(path: Path, lines: int) -> str:
    try:
        text = path.read_bytes()[-20000:].decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def cmd_runs(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launching.runstore import RunStore

    runs = RunStore(_outputs(args)).list_runs()
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
    from runtime.history import load_run_metrics

    try:
        run_dir = RunStore(_outputs(args)).resolve(args.run)
    except RunStoreError as exc:
        return _fail(str(exc))
    ds = load_run_metrics(run_dir)
    names = [n for n in ds.data_vars if n != "timestamp"]
    if args.metric not in names:
        known = ", ".join(names) or "none"
        return _fail(f"no metric {args.metric!r} in {run_dir.name}; metrics: {known}")
    import plotext as plt

    var = ds[args.metric]
    steps = [int(s) for s in ds["step"].values]
    plt.clear_figure()
    plt.theme("clear")  # the terminal's own colours, readable on dark and light schemes
    if var.sizes["rank"] > 1:
        plt.plot(steps, var.max("rank", skipna=True).values.tolist(), label="max", color="gray")
        plt.plot(steps, var.min("rank", skipna=True).values.tolist(), label="min", color="gray")
    plt.plot(steps, var.mean("rank", skipna=True).values.tolist(), label="mean over ranks")
    plt.title(f"{args.metric} — {run_dir.name} ({var.sizes['rank']} ranks)")
    plt.xlabel("step")
    plt.show()
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


def cmd_stacks(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launching.runstore import RunStore, RunStoreError
    from ezpz_tui.core.watching.stacks import stacks_command

    try:
        run_dir = RunStore(_outputs(args)).resolve(args.run).resolve()
    except RunStoreError as exc:
        return _fail(str(exc))
    return stacks_command(run_dir, as_json=args.json)


COMMANDS = {
    "info": cmd_info,
    "doctor": cmd_doctor,
    "launch": cmd_launch,
    "runs": cmd_runs,
    "plot": cmd_plot,
    "attach": cmd_attach,
    "stacks": cmd_stacks,
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
