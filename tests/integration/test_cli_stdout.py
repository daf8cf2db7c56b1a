"""Every ``ezpz-tui`` command with its stdout closed (``>&-``) and full (``/dev/full``, as a file
on a disk that filled): no traceback, the work done, the documented exit status
(docs/architecture.md, "What stays true after a fault"): 74 where the command would have exited
0 and its output was lost, the command's own status where it failed for its own reasons, and
the run's for ``launch`` and ``sweep``, whose runs are supervised to their true end.

Real subprocesses: the shell closes fd 1 before it execs the command, as ``>&-`` does; the
launches are real, through the mpich wheel's mpiexec. The prepared outputs directory is
:func:`tests.fixtures.runs.make_run`'s finished two-rank run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path
from typing import IO

import pytest

from ezpz_tui.cli.parser import build_parser
from ezpz_tui.cli.stdout import OUTPUT_LOST
from tests.fixtures.cli import PY, REPO, base_env, cli, kill_leftovers, run_dirs
from tests.fixtures.runs import make_run

RUN = "20261126-100000-000-tp1pp1cp1"
CHATTY = "import time\nfor i in range(20):\n    print('line', i, flush=True)\n    time.sleep(0.1)"
NO_TERMINAL = "the TUI needs a terminal on stdin and stderr"

# Each command with the least it needs, and the status it exits with when stdout refuses its
# output (None: the doctor's own, 1 on an error here, else 74).
CASES: dict[str, tuple[list[str], int | None]] = {
    "info": (["info"], OUTPUT_LOST),
    "doctor": (["doctor"], None),
    "launch": (["launch", "--ppn", "2", "--", PY, "-c", CHATTY], 0),
    "launch --dry-run": (["launch", "--dry-run", "--", PY, "-c", "pass"], OUTPUT_LOST),
    "runs": (["runs"], OUTPUT_LOST),
    "attach": (["attach", RUN], 2),  # no terminal here
    "plot": (["plot", RUN], OUTPUT_LOST),
    "why": (["why", RUN], OUTPUT_LOST),
    "stacks": (["stacks", RUN], 2),  # a finished run: no rank answers
    "profile": (["profile", RUN], 2),  # a finished run: no rank answers
    "stop": (["stop", RUN], 2),  # a finished run: nothing to stop
    "top": (["top", RUN], OUTPUT_LOST),
    "top --watch": (["top", RUN, "--watch", "0.1"], OUTPUT_LOST),  # stops: nobody reads it
    "goodput": (["goodput", RUN], OUTPUT_LOST),
    "sweep": (["sweep", "--ppn", "2", "--", PY, "-c", "pass"], 0),
    "tune --dry-run": (["tune", "--dry-run", "--ppn", "2"], OUTPUT_LOST),
    "compare": (["compare"], OUTPUT_LOST),
    "finalize": (["finalize", RUN], OUTPUT_LOST),
    "export": (["export", RUN, "--format", "csv"], OUTPUT_LOST),
    "submit": (["submit", RUN, "--dry-run", "-A", "proj"], OUTPUT_LOST),
    "the TUI": ([], 2),  # no terminal here
}
RUNS = ("launch", "sweep")


def test_every_command_of_the_parser_is_tried() -> None:
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(commands.choices) == {args[0] for args, _ in CASES.values() if args}


@pytest.fixture
def outputs(tmp_path: Path) -> Path:
    out = tmp_path / "outputs"
    make_run(
        out,
        run_id=RUN,
        state="succeeded",
        exit_code=0,
        sizes={"tp": 1},
        ranks=2,
        steps=30,
        created=1_795_000_000.0,
    )
    return out


def _start(args: list[str], env: dict[str, str], how: str, full: IO[str]) -> subprocess.Popen:
    if how == "closed":  # the shell's own >&-: fd 1 is closed when Python starts
        argv = ["sh", "-c", 'exec "$@" >&-', "sh", PY, "-m", "ezpz_tui", *args]
        stdout: IO[str] | None = None
    else:
        argv, stdout = [PY, "-m", "ezpz_tui", *args], full
    return subprocess.Popen(
        argv,
        env=env,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here")
@pytest.mark.parametrize("how", ["closed", "full"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_command_whose_stdout_refuses_still_does_its_work(
    case: str, how: str, outputs: Path, request: pytest.FixtureRequest
) -> None:
    args, expected = CASES[case]
    if case in RUNS:
        request.getfixturevalue("mpiexec")  # skips without one
    env = base_env(outputs)
    if expected is None:  # the doctor's verdict on this machine, with a working stdout
        said = cli(args, env).returncode
        expected = OUTPUT_LOST if said == 0 else said
    before = set(run_dirs(outputs))
    try:
        with open("/dev/full", "w") as full:
            proc = _start(args, env, how, full)
            _out, err = proc.communicate(timeout=180)
    finally:
        kill_leftovers(outputs)
    assert "Traceback" not in err, err
    assert proc.returncode == expected, err
    why = "stdout is closed" if how == "closed" else "No space left on device"
    if expected == OUTPUT_LOST:
        assert err.endswith(
            f"ezpz-tui: stdout refused the output ({why}); the command did its work\n"
        ), err
    if case in ("attach", "the TUI"):
        assert NO_TERMINAL in err, err
    if case == "finalize":
        assert (outputs / RUN / "summary.json").is_file()
    if case == "export":
        assert (outputs / RUN / "metrics.csv").is_file()
    if case in RUNS:
        [run_dir] = sorted(set(run_dirs(outputs)) - before - {outputs / "sweeps"})
        state = json.loads((run_dir / "state.json").read_text())
        # Supervised to its true end by the command itself, not stopped by its tether.
        assert state["state"] == "succeeded" and state["exit_code"] == 0, state
        assert state["supervisor_pid"] == proc.pid and "reason" not in state, state
    if case == "launch":
        assert f"stdout refused rank 0's log ({why}); the run goes on" in err, err
