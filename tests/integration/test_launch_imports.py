"""What a launch imports, and what each of its processes does before its work: issue 37's
launch cost, guarded by what loads rather than by a clock.

A ``launch`` of a trivial program cost 8.3x the launcher's own, most of it Python starting
modules nobody used: the failure analysis for a run that succeeded, ``importlib.metadata`` for
three version strings, the capture wrapper's ``tempfile``, ``socket`` and ``argparse``, the
rank's hooks ``json``, ``traceback`` and ``typing``. Each would come back silently with one
top-level import; these tests name them. ``-X importtime`` (``PYTHONPROFILEIMPORTTIME``) lists
every module a process imports on its stderr: the CLI's own on the command's, the wrapper's on
the launcher's, the rank's in the rank's log.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.fixtures.cli import REPO, base_env, run_dirs

PY = sys.executable
IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \| *(\S+)$", re.M)
# Never in a launch: the UI, and the numerical stack the finalizer (its own process) uses.
HEAVY = ("textual", "rich", "numpy", "torch", "xarray", "pandas", "ezpz_tui.ui")


def _modules(text: str) -> set[str]:
    return set(IMPORTED.findall(text))


def _under(modules: set[str], names: tuple[str, ...]) -> list[str]:
    """The modules that are one of ``names`` or inside one of them."""
    return sorted(m for m in modules if any(m == n or m.startswith(f"{n}.") for n in names))


def test_a_launch_that_succeeds_imports_only_what_it_uses(tmp_path: Path) -> None:
    env = {**base_env(tmp_path), "PATH": f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}"}
    launch = ["launch", "--quiet", "--ppn", "2", "--", PY, "-c", "pass"]
    done = subprocess.run(
        [PY, "-X", "importtime", "-m", "ezpz_tui", *launch],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (run_dir,) = run_dirs(tmp_path)
    assert json.loads((run_dir / "state.json").read_text())["state"] == "succeeded"
    modules = _modules(done.stderr)
    assert "ezpz_tui.core.launching.supervisor" in modules, "the CLI's imports were not read"
    assert _under(modules, HEAVY) == []
    unused = (
        "ezpz_tui.core.failover",  # the retries: only after a failure
        "ezpz_tui.core.watching.failure",  # why a run failed
        "ezpz_tui.core.runs.culprit",  # which rank failed first
        "importlib.metadata",  # three versions, read from their dist-info folders
        "concurrent.futures",  # the allocation's two probes at once: only a job's scheduler
        "difflib",  # a config's misspelt key
        "ezpz_tui.core.launching.staging",  # a launch that stages (hashlib, platformdirs' cache)
        "ezpz_tui.core.watching.efficiency",  # the MFU reader and its probe: the finalizer's
        "logging",  # the supervisor's warnings: a launch that goes well has none
        "hashlib",  # a kept copy's and a pack's names: staging's
    )
    assert _under(modules, unused) == []


# Run as ``python -c``: the CLI's launch, with the modules loaded at the moment it starts the
# launcher written to argv[1] (an observer on Popen; the launch itself is the real one).
_AT_LAUNCHER = """
import json, subprocess, sys
out, started = sys.argv[1], subprocess.Popen.__init__
def seen(self, args, *rest, **kw):
    if "mpiexec" in str(args[0]) and not hasattr(seen, "done"):
        seen.done = True
        with open(out, "w") as fh:
            json.dump(sorted(sys.modules), fh)
    return started(self, args, *rest, **kw)
subprocess.Popen.__init__ = seen
from ezpz_tui.cli import main
sys.exit(main(["launch", "--quiet", "--ppn", "2", "--", sys.executable, "-c", "pass"]))
"""


def test_a_launch_starts_its_launcher_before_what_only_a_started_run_uses(
    tmp_path: Path,
) -> None:
    """The ranks wait for everything the CLI loads before it starts the launcher: the other
    commands' modules, a relaunch's resume and handover, the supervisor's watch of ends and
    tracebacks, its tether, the finalizer, the peak table behind a config's ``[efficiency]``,
    none of which a launch uses before its ranks run."""
    env = {
        **base_env(tmp_path),
        "PATH": f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}",
        "EZPZ_TUI_CONFIG_DIR": str(tmp_path / "config"),  # none there: the defaults
    }
    seen = tmp_path / "at-launcher.json"
    done = subprocess.run(
        [PY, "-c", _AT_LAUNCHER, str(seen)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    modules = set(json.loads(seen.read_text()))
    assert "ezpz_tui.core.launching.supervisor" in modules, "the launcher's start was not seen"
    later = (
        "ezpz_tui.cli.comparing",  # the other commands (compare imports the most)
        "ezpz_tui.cli.sweeping",
        "ezpz_tui.cli.tuning",
        "ezpz_tui.cli.reading",
        "ezpz_tui.cli.relaunching",
        "ezpz_tui.core.launching.resuming",  # --resume-from, a relaunch's handover
        "ezpz_tui.core.launching.handover",
        "ezpz_tui.core.launching.elsewhere",
        "ezpz_tui.core.launching.finalize",  # the run's end, in a process of its own
        "ezpz_tui.core.launching.tether",  # started just after the launcher
        "ezpz_tui.core.runs.ending",  # the supervisor's watch of ends and tracebacks
        "ezpz_tui.core.watching.raised",
        "runtime.efficiency",  # a config's [efficiency], checked against the peak table
        "platformdirs",  # where the config is, which EZPZ_TUI_CONFIG_DIR said
        "tomllib",  # the run's record is written, never read back, and there is no config
    )
    assert _under(modules, later) == []


def test_the_wrapper_and_the_ranks_hooks_start_light(tmp_path: Path) -> None:
    """The wrapper is a second interpreter per rank and the hooks load in every Python process
    of the rank, so both stay off what the rank does not use."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    done = subprocess.run(
        [PY, "-m", "runtime.capture", "--run-dir", str(tmp_path), "--", PY, "-c", "pass"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    wrapper = _modules(done.stderr)
    assert "runtime.rundir" in wrapper, "the wrapper's imports were not read"
    # Its records' temporary files are made with os.open; its host named by os.uname.
    assert _under(wrapper, (*HEAVY, "ezpz_tui", "tempfile", "socket", "argparse")) == []
    # A rank that ends before the sampler's first line was due never starts the sampler.
    assert _under(wrapper, ("runtime.telemetry",)) == []
    rank = _modules((tmp_path / "logs" / "b0000" / "rank-00000.log").read_text())
    assert "sitecustomize" in rank, "the rank ran without the wrapper's hooks"
    # What only a raise, the Flight Recorder's thread or a type checker needs.
    assert _under(rank, ("json", "traceback", "typing", "select", "tokenize")) == []


def test_a_tether_told_done_exits_before_reading_its_arguments(tmp_path: Path) -> None:
    """Every launch starts a tether while its ranks start, on the same cores; a short run ends
    while it may still be starting, and the supervisor waits for it: ``done`` must wait for
    neither its argument parser nor ``site`` (a venv's ``.pth`` files) nor ``pathlib``."""
    from ezpz_tui.core.launching.finalize import FinishSettings
    from ezpz_tui.core.launching.tether import tether_argv

    argv = tether_argv(tmp_path, 1, 0, FinishSettings())
    done = subprocess.run(
        [*argv[:3], "not", "numbers"],  # the interpreter, -S, the file: nothing else is read
        env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
        input=b"done\n",
        cwd=tmp_path,
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    modules = _modules(done.stderr.decode())
    assert "signal" in modules or "_signal" in modules, "the tether's imports were not read"
    unused = ("site", "argparse", "pathlib", "typing", "contextlib", "ezpz_tui")
    assert _under(modules, unused) == []
