"""``ezpz-tui``: the TUI with no arguments, headless commands on the same core otherwise.

Every command answers bad input with one readable line and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any, NoReturn

from ezpz_tui import __version__

EPILOG = "With no command, ezpz-tui starts the terminal UI."


def _outputs_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--outputs",
        type=Path,
        default=None,
        help="directory holding run directories (default: $EZPZ_OUTPUTS or ./outputs)",
    )


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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ezpz-tui",
        description="See the allocation, launch distributed PyTorch, watch every rank.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"ezpz-tui {__version__}")
    _outputs_arg(parser)
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND")

    p = sub.add_parser("info", help="the allocation: scheduler, job, hosts, accelerators")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("doctor", help="check the environment (exit 1 on an error)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _outputs_arg(p)

    p = sub.add_parser(
        "launch",
        help="start a run (default command: the demo training)",
        description="Start a run through the right launcher; follows rank 0's log and exits "
        "with the run's exit code. Ctrl-C stops the run cleanly.",
    )
    p.add_argument("-n", "--nodes", type=_positive, help="nodes to use (default: all)")
    p.add_argument("--ppn", type=_positive, help="ranks per node (default: one per accelerator)")
    p.add_argument("--tp", type=_positive, default=1, help="tensor parallel size")
    p.add_argument("--pp", type=_positive, default=1, help="pipeline parallel size")
    p.add_argument("--cp", type=_positive, default=1, help="context parallel size")
    p.add_argument(
        "--launcher",
        choices=("auto", "mpiexec", "srun", "mpirun", "torchrun"),
        default="auto",
    )
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

    p = sub.add_parser("runs", help="list runs in the outputs directory")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _outputs_arg(p)

    p = sub.add_parser(
        "attach",
        help="monitor a run this process did not start (running or finished), read-only",
        description="Open the TUI on RUN: its ranks, logs and metrics, followed live. Nothing "
        "can stop the run from there. Works on ezpz's own run directories too.",
    )
    p.add_argument("run", help="run id, unique prefix, or path to a run directory")
    _outputs_arg(p)

    p = sub.add_parser("plot", help="plot a run's metric in the terminal")
    p.add_argument("run", help="run id, unique prefix, or path to a run directory")
    p.add_argument("--metric", default="loss", help="metric name (default: loss)")
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
    left = data["walltime_left_s"]
    rows = [
        ("scheduler", alloc.scheduler),
        ("job", alloc.job_id or "-"),
        ("machine", alloc.machine),
        (
            "hosts",
            f"{len(alloc.hosts)}: {', '.join(alloc.hosts[:8])}"
            + (" ..." if len(alloc.hosts) > 8 else ""),
        ),
        (
            "accelerators",
            f"{alloc.accelerators_per_host} {alloc.accelerator_kind} per host "
            f"({alloc.accelerator_source})",
        ),
        ("cpus per host", str(alloc.cpus_per_host)),
        ("walltime left", format_duration(left)),
    ]
    for key, value in rows:
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


def cmd_launch(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launching.allocation import detect_allocation
    from ezpz_tui.core.session import LaunchRefused, Session

    try:
        plan = _plan_from_args(args)
    except ValueError as exc:
        return _fail(str(exc))
    session = Session(detect_allocation(), _outputs(args))
    if args.dry_run:
        preview = session.preview(plan)
        out: dict[str, Any] = {"problems": [asdict(p) for p in preview.problems]}
        if preview.command is not None:
            cmd = preview.command
            out.update(
                argv=cmd.argv,
                env=cmd.env,
                launcher=cmd.launcher,
                hostfile=str(cmd.hostfile) if cmd.hostfile else None,
                hostfile_hosts=preview.hostfile_hosts,
                notes=cmd.notes,
                world_size=plan.world_size(session.alloc),
                sizes={"tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "dp": plan.dp(session.alloc)},
            )
        print(json.dumps(out, indent=2))
        return 0 if preview.command is not None else 2
    try:
        handle = session.launch(plan)
    except LaunchRefused as exc:
        for problem in exc.problems:
            print(f"ezpz-tui: {problem.message}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        return _fail(str(exc))
    print(f"ezpz-tui: run {handle.run_dir}", file=sys.stderr)
    return _follow(handle, quiet=args.quiet)


def _follow(handle: Any, quiet: bool) -> int:
    """Print rank 0's log as it grows until the run ends; Ctrl-C (or SIGTERM) stops the run."""
    from runtime.capture import log_path

    stop_requested = []

    def request_stop(signum: int, _frame: object) -> None:
        stop_requested.append(signum)

    # A handler, not KeyboardInterrupt: a Ctrl-C landing outside handle.wait() (while printing
    # the log, or during the stop itself) would otherwise leave main() with the run still alive.
    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    log = log_path(handle.run_dir, 0)
    offset = 0
    try:
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
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
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
    from runtime.capture import read_statuses

    state = handle.state
    code = state.get("exit_code")
    signum = state.get("signal")
    failed = []
    for status in read_statuses(handle.run_dir):
        if status.get("state") == "failed":
            how = status.get("signal_name") or f"exit {status.get('exit_code')}"
            failed.append(f"rank {status.get('rank')} ({how})")
    if failed:
        print(f"ezpz-tui: failed ranks: {', '.join(failed)}", file=sys.stderr)
        print(f"ezpz-tui: rank logs in {handle.run_dir / 'logs'}", file=sys.stderr)
    if state.get("state") != "succeeded":
        tail = _tail(handle.run_dir / "launcher.log", 15)
        if tail:
            print("ezpz-tui: launcher.log ends with:\n" + tail, file=sys.stderr)
    print(f"ezpz-tui: run {state.get('state')} ({handle.run_dir.name})", file=sys.stderr)
    if isinstance(code, int):
        return code
    return 128 + signum if isinstance(signum, int) else 1


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
    print(
        f"{'RUN':<34} {'STATE':<10} {'EXIT':>4} {'WORLD':>5} {'TP':>3} {'PP':>3} {'CP':>3} "
        f"{'DP':>3}  PARENT"
    )
    for r in runs:
        exit_code = "" if r.exit_code is None else str(r.exit_code)
        if r.signal:
            exit_code = f"s{r.signal}"
        cells = [_cell(x) for x in (r.world_size, r.tp, r.pp, r.cp, r.dp)]
        print(
            f"{r.run_id:<34} {r.state:<10} {exit_code:>4} {cells[0]:>5} {cells[1]:>3} "
            f"{cells[2]:>3} {cells[3]:>3} {cells[4]:>3}  {r.parent or ''}"
        )
    return 0


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


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

    return run_app(outputs=_outputs(args))


def cmd_attach(args: argparse.Namespace) -> int:
    from ezpz_tui.core.launching.runstore import RunStore, RunStoreError
    from ezpz_tui.ui.app import run_app

    try:
        run_dir = RunStore(_outputs(args)).resolve(args.run).resolve()
    except RunStoreError as exc:
        return _fail(str(exc))
    if not any((run_dir / name).exists() for name in ("run.toml", "logs", "metrics")) and not any(
        run_dir.glob("metrics*.jsonl")
    ):
        return _fail(f"{run_dir} holds no run: no run.toml, logs/ or metrics files")
    return run_app(outputs=args.outputs or run_dir.parent, attach=run_dir)


COMMANDS = {
    "info": cmd_info,
    "doctor": cmd_doctor,
    "launch": cmd_launch,
    "runs": cmd_runs,
    "plot": cmd_plot,
    "attach": cmd_attach,
    None: cmd_tui,
}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.cmd](args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # ezpz-tui runs | head
        return 0


if __name__ == "__main__":
    sys.exit(main())
