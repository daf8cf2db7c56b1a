"""The ``ezpz-tui`` command line: every command, option and help text."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NoReturn, cast

from ezpz_tui import __version__

EPILOG = (
    "With no command, ezpz-tui starts the terminal UI. Exit status: 0 done; 1 a failure found "
    "(a failed run, a doctor error); 2 bad usage or a bad place (no such run, an unreadable "
    "directory), said in one line; 74 done, but stdout was closed or full and the output is "
    "lost; 130 interrupted. launch exits with its run's status, whatever its stdout does."
)
RUN_HELP = "run id, unique prefix, or path to a run directory"


def _outputs_arg(p: argparse.ArgumentParser, top: bool = False) -> None:
    """``--outputs`` before the command (``top``) or after it: a command's own copy has no
    default, so ``ezpz-tui --outputs DIR runs`` keeps DIR rather than the command's None."""
    help = "directory holding run directories (default: $EZPZ_OUTPUTS or ./outputs)"
    default = None if top else argparse.SUPPRESS
    p.add_argument("--outputs", type=Path, default=default, help=help)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def _walltime(text: str) -> int:
    from ezpz_tui.core.launching.batch_script import parse_walltime

    try:
        return parse_walltime(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _rank(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rank number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is not a rank: ranks count from 0")
    return value


def _gib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of GiB") from None
    if not value > 0 or value != value:
        raise argparse.ArgumentTypeError(f"{value:g} GiB must be above 0")
    return value


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value != value:
        raise argparse.ArgumentTypeError(f"{value:g} s is too small for one step")
    return value


def _at_least_4(text: str) -> int:
    """Steps of a first race: two of warm-up, left out of the speed, and two measured."""
    value = _positive(text)
    if value < 4:
        raise argparse.ArgumentTypeError(f"{value} leaves no measured step after warm-up: 4+")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0.1 <= value <= 86400:
        raise argparse.ArgumentTypeError(f"{value:g} should be from 0.1 to 86400 seconds")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line, as every other error here is.

    A command whose ranks' command follows a positional (``relaunch RUN [options] -- CMD``)
    sets ``command_after_dashes``: what follows the first ``--`` is its ``command``, as is; an
    ``argparse.REMAINDER`` there would take the options after RUN for the command."""

    command_after_dashes = False

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")

    def parse_known_args(  # type: ignore[override]
        self, args: list[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if not self.command_after_dashes or args is None or "--" not in args:
            return super().parse_known_args(args, namespace)
        at = args.index("--")
        found, extras = super().parse_known_args(args[:at], namespace)
        found.command = args[at:]  # with its "--", as launch's REMAINDER gives it
        return found, extras


# Each command's one-line help, and the longer description its own --help shows.
COMMANDS_HELP = {
    "info": ("the allocation: scheduler, job, hosts, accelerators", None),
    "doctor": ("check the environment (exit 1 on an error)", None),
    "launch": (
        "start a run (default command: the demo training)",
        "Start a run through the right launcher; follows rank 0's log and exits with the run's "
        "exit code. Ctrl-C stops the run cleanly.",
    ),
    "relaunch": (
        "relaunch a run with other sizes, as the TUI's R: preflight, stop it, start the child",
        "Relaunch RUN with its recorded plan, the sizes and command given changed: the new "
        "layout is preflighted first (rank 0, and the last pipeline stage's first rank, run one "
        "step alone on this CPU with fake peers; a script that never calls runtime.setup() is "
        "not preflighted), then RUN is stopped through its supervisor and the child starts in "
        "RUN's outputs directory with RUN as its parent, continuing from RUN's newest "
        "checkpoint unless --fresh, and is followed as launch follows a run. The question's "
        "lines are printed and asked on a terminal (--yes answers yes). A failed preflight "
        "exits 2 with the cause and leaves RUN running. After -- : each rank's command "
        "(default: RUN's).",
    ),
    "runs": ("list runs in the outputs directory", None),
    "attach": (
        "monitor a run this process did not start (running or finished), read-only",
        "Open the TUI on RUN: its ranks, logs and metrics, followed live. Nothing can stop the "
        "run from there. Works on ezpz's own run directories too.",
    ),
    "plot": (
        "plot a run's metric in the terminal",
        "Draw RUN's metric over steps: the mean over ranks with their min and max, or one rank "
        "(--rank), beside another run's (--overlay). --json prints the series instead. Colour "
        "only to a terminal (NO_COLOR turns it off there, FORCE_COLOR on in a pipe).",
    ),
    "why": (
        "why a run failed: first failing rank, its end, last lines, launcher messages, advice",
        "Explain RUN's failure on one screen: the first rank that failed on its own and its "
        "host, its exit code or signal and what that usually means, its traceback or last "
        "lines, what the launcher said, which ranks were killed as a consequence, and what to "
        "do, and whether the host a node fault names is in the outputs directory's "
        "bad_hosts.txt (recorded once, when the run ended). With the ranks' Flight Recorder "
        "files (flight/), also the collective a live run's ranks wait in and the ranks that "
        "never entered it, or ranks that called different ops, sizes or dtypes at one "
        "collective. It writes nothing.",
    ),
    "stop": (
        "stop a run another ezpz-tui on this node supervises (left running, or launched elsewhere)",
        "Ask RUN's supervisor (a run left running when its TUI quit, or an `ezpz-tui launch` in "
        "another terminal) to stop it as Ctrl-C would, and wait until its end is recorded.",
    ),
    "stacks": (
        "show where every rank of a running job is (Python stacks, grouped)",
        "Ask every rank of RUN on this host to dump its Python stacks (SIGUSR1, only to ranks "
        "that catch it) and print them, ranks with the same stack folded together, then what "
        "the ranks' Flight Recorder says (the collective a rank never entered, with that "
        "rank's stack). Exit 2 when no rank answered.",
    ),
    "profile": (
        "profile every rank's next N steps: compute, communication, idle, top operators",
        "Ask every rank of RUN on this host that calls the runtime's step hook (History.record "
        "does) to run torch.profiler for its next --steps N steps (through its Flight Recorder "
        "FIFO), wait for them, and print each rank's split of that time into compute, "
        "communication and idle with its top operators. Traces go to RUN/profiles/bNNNN/"
        "rank-NNNNN.json (open in Perfetto). Exit 2 when no rank answered.",
    ),
    "top": (
        "every rank's CPU, memory and accelerator figures and step time, slow ranks named",
        "Print a table of RUN's ranks from their telemetry (sampled by each rank's wrapper every "
        "[telemetry] interval) and metric files: CPU % and RSS of the rank's processes, its "
        "accelerator's utilisation, memory, power and temperature, its recent step time and its "
        "arrival lag at the collectives (Flight Recorder); a running rank slower than [monitor] "
        "slow_factor times the median, or last to arrive at most collectives, is marked slow. "
        "Then the checkpoint gauge: the newest complete checkpoint's step and age, the steps "
        "and time a crash now would redo, the expected restore (the run's last load, else "
        "the checkpoint's size over a measured read rate), and a warning past [checkpoint] "
        "max_age or when a save takes longer to write than its interval. "
        "--watch N prints it again every N seconds (JSON Lines with --json).",
    ),
    "goodput": (
        "where the wall time of a run or an allocation went: productive, startup, redone...",
        "Split the wall time of RUN, or of JOB's runs (default: this job's, else the runs made "
        "outside a job), into staging, startup, productive steps, checkpoint stalls, steps "
        "redone after a restart, restart, hung, after the last step and (a job) idle between "
        "runs; goodput is the productive fraction. --json prints wall_s, goodput and the "
        "seconds of each segment.",
    ),
    "sweep": (
        "run every valid TP/PP/CP combination in turn, then compare them",
        "Run each valid combination of --tp, --pp and --cp (invalid ones are listed with the "
        "reason and skipped) one after another on the allocation, each an ordinary run whose "
        "parent is the sweep (recorded in <outputs>/sweeps/). Ctrl-C or SIGTERM stops the "
        "current run cleanly and starts no more. Ends with the compare table, fastest first. "
        "--steps reaches the built-in demo as --steps N, and --global-batch as --global-batch "
        "N (one global batch for every layout, so their losses compare); with your own "
        "command, put them in the command.",
    ),
    "tune": (
        "find the demo's fastest layout here: prune by a memory estimate, race the rest",
        "Every TP/PP/CP combination of --tp, --pp and --cp (default: every divisor of the "
        "world size; cp 1) that fits the allocation, each with a memory estimate per rank; "
        "those over --mem-limit-gb (default on a CPU: this host's available memory over its "
        "ranks) are pruned with the reason. The rest race under successive halving at one "
        "global batch: each runs --first-steps steps, the slower half is dropped, the others "
        "run twice as long, until one is left. Prints the leaderboard, the best layout and "
        "its lead over the next, the steps and time spent against an exhaustive sweep, and "
        "the command that launches it. --budget bounds the time. The built-in demo only.",
    ),
    "finalize": (
        "write a run's summary.json, digest.json, metrics.nc and report.md (as at a run's end)",
        "Write RUN's summary.json (per metric: rank 0's first, last, min, max, mean over the "
        "last 10%, the ranks' spread; step time and throughput medians; state, exit, plan), "
        "digest.json (each rank's figures in one file: what why, top and the TUI read of a "
        "finished run), metrics.nc (the rank x step dataset; xarray.open_dataset reads it) "
        "and report.md. "
        "Every run that ends gets them; this writes them again, e.g. for an ezpz run.",
    ),
    "export": (
        "write a run's metrics as one rank x step table: nc, csv or parquet",
        "Write RUN's metrics (every rank, every metric) to --output, default metrics.<format> "
        "in the run directory (csv replaces the csv tracker's rank-0 file). parquet needs "
        "pyarrow.",
    ),
    "submit": (
        "submit the plan that worked as a PBS or Slurm batch job (--dry-run prints the script)",
        "Write a batch script for RUN's plan (default: the newest run that succeeded; RUN may "
        "also be a run.toml or a plan file): the same sizes, ranks per node, launcher and its "
        "flags, extra env and command, started by `ezpz-tui launch` inside the job so each job "
        "makes a new run directory. PBS gets ALCF's directives (-l select, place=scatter, "
        "walltime, filesystems=home:eagle on Polaris or home:flare on Aurora, -q, -A); Slurm "
        "gets --nodes, --ntasks-per-node, --time, --partition, --account. Submits it with qsub "
        "or sbatch, prints the job id, and keeps the script, a record of the job and its "
        "output in <outputs>/.batch/. `ezpz-tui runs` lists the job as queued (running once the "
        "scheduler starts it) until its run directory appears, then as that run. Exit 2 for a "
        "bad walltime or node count, a plan that does not fit, or no qsub/sbatch here.",
    ),
    "compare": (
        "compare runs: speed, memory and loss side by side, fastest first",
        "Compare runs ranked by tokens/s: time to first step, median step time, samples/s and "
        "tokens/s past warm-up (the first max(2, 10%) steps of rank 0), peak memory, final, "
        "best and common-step loss, with the best value marked, and what differs in their "
        "recorded plans and launches. One RUN is compared with its relatives (the runs it "
        "was relaunched from, "
        "its sweep's runs); with no RUN, the newest run's sweep, or its relaunch chain, or "
        "else the 5 newest runs.",
    ),
}


SIZES = (("tp", "tensor"), ("pp", "pipeline"), ("cp", "context"))


def _placement_args(p: argparse.ArgumentParser) -> None:
    """Where ``launch`` and ``sweep`` put the ranks: nodes, ranks per node, launcher, hosts."""
    from ezpz_tui.core.launching.plan import LAUNCHERS

    p.add_argument("-n", "--nodes", type=_positive, help="nodes to use (default: all)")
    p.add_argument("--ppn", type=_positive, help="ranks per node (default: one per accelerator)")
    p.add_argument("--launcher", choices=LAUNCHERS, default="auto")
    p.add_argument(
        "--exclude", action="append", default=[], metavar="HOST", help="skip a host (repeatable)"
    )
    p.add_argument(
        "--env", action="append", default=[], metavar="K=V", help="extra rank env (repeatable)"
    )
    p.add_argument(
        "--launcher-arg",
        dest="launcher_args",
        action="append",
        default=[],
        metavar="ARG",
        help="a flag for the launcher itself, put before the program; it replaces a machine "
        "default of the same name (repeatable; a value starting with - needs the = form: "
        "--launcher-arg=--cpu-bind=none)",
    )


def _hosts_and_outputs(p: argparse.ArgumentParser) -> None:
    """Whether ``bad_hosts.txt`` is heeded, and the outputs directory: ``launch``, ``sweep`` and
    ``relaunch`` take both."""
    p.add_argument(
        "--no-exclude-bad",
        dest="exclude_bad",
        action="store_false",
        help="use the hosts listed in the outputs directory's bad_hosts.txt too",
    )
    _outputs_arg(p)


def _command_args(p: argparse.ArgumentParser) -> None:
    """The last options of ``launch`` and ``sweep``: bad hosts, outputs, the ranks' command."""
    _hosts_and_outputs(p)
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command for each rank")


def _sizes(text: str) -> list[int]:
    """``1,2,4``: the values a sweep tries for one size."""
    return [_positive(item.strip()) for item in text.split(",")]


class _Unread:
    """A command other than the one given: never parsed, so not built, not even its parser
    (an argparse parser each, a tenth of a launch's CLI before its launcher started). The
    command given is the only one its usage and errors name; ``ezpz-tui --help`` and a
    misspelt command build every command."""

    def add_argument(self, *_args: Any, **_kwargs: Any) -> None:
        return None

    def set_defaults(self, **_kwargs: Any) -> None:
        return None


class _Commands:
    """The subcommands, and the one given first (None: build every command's options)."""

    def __init__(self, sub: Any, only: str | None) -> None:
        self.sub = sub
        self.only = only if only in COMMANDS_HELP else None


def _command(sub: _Commands, name: str, *, json: bool = False) -> argparse.ArgumentParser:
    if sub.only is not None and name != sub.only:
        return cast(argparse.ArgumentParser, _Unread())
    help, description = COMMANDS_HELP[name]
    p = sub.sub.add_parser(name, help=help, description=description)
    if json:
        p.add_argument("--json", action="store_true", help="machine-readable output")
    return p


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; ``only``: the command given first, the only one built."""
    parser = _Parser(
        prog="ezpz-tui",
        description="See the allocation, launch distributed PyTorch, watch every rank.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"ezpz-tui {__version__}")
    _outputs_arg(parser, top=True)
    sub = _Commands(parser.add_subparsers(dest="cmd", metavar="COMMAND"), only)
    _command(sub, "info", json=True)
    _outputs_arg(_command(sub, "doctor", json=True))
    from ezpz_tui.core.launching.plan import STAGE_MODES

    p = _command(sub, "launch")
    for size, words in SIZES:
        p.add_argument(f"--{size}", type=_positive, default=1, help=f"{words} parallel size")
    _placement_args(p)
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
        "--spares",
        type=int,
        default=0,
        metavar="N",
        help="keep N usable hosts out of the run, for a retry to swap in for a failed one "
        "so that the sizes stay (default: 0)",
    )
    p.add_argument(
        "--stage",
        nargs="?",
        const="on",
        default="off",
        choices=STAGE_MODES,
        help="copy this Python's environment to each node's own disk first and run the ranks "
        "from it, removed after the run (--stage=keep: kept, and reused while unchanged)",
    )
    p.add_argument(
        "--stage-dir",
        default="",
        metavar="DIR",
        help="where each node puts the staged copy (default: $TMPDIR, else /tmp)",
    )
    p.add_argument(
        "--stage-min-nodes",
        metavar="N",
        help="go on with at least N nodes (or a fraction of them: 0.9) when staging fails on "
        "some: they are excluded and listed in bad_hosts.txt, the ranks and DP shrink "
        "(default: staging must succeed on every node)",
    )
    p.add_argument(
        "--resume-from",
        metavar="RUN",
        help="continue from RUN's newest complete checkpoint (a run id, prefix or path), or "
        "from a checkpoint folder; the ranks get it in EZPZ_RESUME_FROM",
    )
    _command_args(p)
    p = _command(sub, "relaunch")
    p.add_argument("run", help=RUN_HELP)
    for size, words in SIZES:
        p.add_argument(f"--{size}", type=_positive, help=f"{words} parallel size (default: RUN's)")
    p.add_argument("-n", "--nodes", type=_positive, help="nodes to use (default: RUN's)")
    p.add_argument("--fresh", action="store_true", help="start at step 0, not at a checkpoint")
    p.add_argument(
        "--no-preflight", action="store_true", help="relaunch without running a step first"
    )
    p.add_argument("-y", "--yes", action="store_true", help="relaunch without asking")
    p.add_argument("--quiet", action="store_true", help="do not follow the new run's log")
    _hosts_and_outputs(p)
    p.set_defaults(command=[])  # -- CMD: each rank's command (default: RUN's)
    p.command_after_dashes = True  # type: ignore[attr-defined]
    _outputs_arg(_command(sub, "runs", json=True))
    p = _command(sub, "attach")
    p.add_argument("run", help=RUN_HELP)
    _outputs_arg(p)
    p = _command(sub, "plot", json=True)
    p.add_argument("run", help=RUN_HELP)
    p.add_argument("--metric", default="loss", help="metric name (default: loss)")
    p.add_argument("--rank", type=_rank, help="only this rank's records (default: every rank)")
    p.add_argument("--overlay", metavar="RUN", help="draw another run's metric beside it")
    _outputs_arg(p)
    for name in ("why", "stacks", "stop"):
        p = _command(sub, name, json=name != "stop")
        p.add_argument("run", help=RUN_HELP)
        _outputs_arg(p)
    p = _command(sub, "profile", json=True)
    p.add_argument("run", help=RUN_HELP)
    p.add_argument("--steps", type=_positive, default=5, help="steps to profile (default: 5)")
    p.add_argument(
        "--timeout", type=_seconds, default=120, metavar="S", help="wait at most S seconds"
    )
    _outputs_arg(p)
    p = _command(sub, "top", json=True)
    p.add_argument("run", help=RUN_HELP)
    p.add_argument("--watch", type=_seconds, metavar="N", help="print again every N seconds")
    _outputs_arg(p)
    p = _command(sub, "goodput", json=True)
    p.add_argument(
        "target", nargs="?", metavar="JOB|RUN", help=f"a job id or its number, or {RUN_HELP}"
    )
    _outputs_arg(p)
    p = _command(sub, "sweep")
    for size, words in SIZES:
        p.add_argument(
            f"--{size}", type=_sizes, default=[1], metavar="N[,N...]", help=f"{words} sizes to try"
        )
    p.add_argument("--steps", type=_positive, help="steps per run (the built-in demo only)")
    p.add_argument(
        "--global-batch",
        type=_positive,
        metavar="N",
        help="sequences per step in every layout (the built-in demo only)",
    )
    _placement_args(p)
    _command_args(p)
    p = _command(sub, "tune", json=True)
    for size, words in SIZES:
        p.add_argument(f"--{size}", type=_sizes, metavar="N[,N...]", help=f"{words} sizes to try")
    p.add_argument(
        "--global-batch",
        type=_positive,
        metavar="N",
        help="sequences per step (default: 8 x ranks)",
    )
    p.add_argument(
        "--mem-limit-gb",
        type=_gib,
        metavar="GiB",
        help="prune layouts whose estimate a rank is above this (default on a CPU: see above)",
    )
    p.add_argument(
        "--first-steps",
        type=_at_least_4,
        metavar="N",
        help="steps of each layout's first race, doubled each rung (default: 6)",
    )
    p.add_argument("--budget", type=_budget, metavar="S", help="seconds the whole tune may take")
    p.add_argument(
        "--dry-run", action="store_true", help="print the layouts and estimates, run nothing"
    )
    _placement_args(p)
    _command_args(p)
    p = _command(sub, "finalize")
    p.add_argument("run", help=RUN_HELP)
    _outputs_arg(p)
    p = _command(sub, "export")
    p.add_argument("run", help=RUN_HELP)
    p.add_argument("--format", choices=("nc", "csv", "parquet"), default="nc")
    p.add_argument("-o", "--output", metavar="PATH", help="where (default: in the run directory)")
    _outputs_arg(p)
    p = _command(sub, "submit")
    p.add_argument("run", nargs="?", help=f"{RUN_HELP}, or a run.toml / plan file")
    p.add_argument("-n", "--nodes", type=_positive, help="nodes (default: as many as the run)")
    p.add_argument(
        "--walltime",
        type=_walltime,
        metavar="HH:MM:SS",
        help="walltime, HH:MM:SS or D-HH:MM:SS (default: 01:00:00)",
    )
    p.add_argument("-q", "--queue", help="queue (PBS) or partition (Slurm)")
    p.add_argument("-A", "--account", help="project to charge (ALCF: required)")
    p.add_argument(
        "--filesystems", help="PBS filesystems (default on Polaris home:eagle, Aurora home:flare)"
    )
    p.add_argument(
        "--scheduler",
        type=str.upper,
        choices=("PBS", "SLURM"),
        help="write for this scheduler (default: this job's, else the run's, else the one on PATH)",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="the job continues RUN from its newest complete checkpoint when it starts",
    )
    p.add_argument("--dry-run", action="store_true", help="print the script, submit nothing")
    _outputs_arg(p)
    p = _command(sub, "compare", json=True)
    p.add_argument("run", nargs="*", help=f"{RUN_HELP}, or a sweep id (default: see above)")
    _outputs_arg(p)
    return parser
