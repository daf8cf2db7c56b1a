"""The newcomer's flow in a real terminal: ``ezpz-tui`` under tmux, driven by keys only.

Start the TUI with no arguments in a 120x40 tmux pane and wait for the allocation, the doctor's
result and the prefilled plan; make the demo run long (command field); launch with ``r``; once a
step shows, change TP from 1 to 2 in the form; relaunch with ``R`` and confirm with ``y``; check
the screen (a tp2 run running, the first one stopped) and the run directories on disk; quit with
``q`` and ``y`` and check that the TUI exited and left no rank behind.

Keys, with the form's focus order (nodes, per node, TP, PP, CP, command; the rarely used fields
are folded away below it):

    J                          focus the launch form (the main region's Launch tab)
    Tab x6, ctrl+e ctrl+u, text, Esc   replace the command, leave the field
    r                          launch
    T                          the launch opened the Run tab: back to the Launch tab (and its
                               form)
    Tab x3, ctrl+e ctrl+u, 2, Esc      TP = 2
    R, y                       relaunch, confirmed
    q, y                       quit, stopping the live run, confirmed

The tmux server has a private socket (``-L ezpz-test-<pid>``) and no user config; it is killed
in teardown, and any process left with one of the test's run directories is killed too.
The last screen is printed in teardown, so a failure shows what the terminal showed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ezpz_tui.core.runs.record import read_run_toml
from tests.envs import without_job
from tests.fixtures import required
from tests.procs import processes_of

TMUX = shutil.which("tmux")
EZPZ_TUI = Path(sys.executable).parent / "ezpz-tui"
# From J: the form's fields before the command, in focus order (nodes, per node, TP, PP, CP; the
# rarely used ones are folded away below it).
TABS_TO_COMMAND = 5 + 1
REPO = Path(__file__).resolve().parents[2]
WIDTH, HEIGHT = 120, 40
# Slow enough that the run outlives the TP edit, fast enough to show steps within seconds.
DEMO_ARGS = ("-m", "runtime.examples.train", "--sleep", "0.2", "--steps", "100000")

pytestmark = [
    pytest.mark.skipif(not EZPZ_TUI.exists(), reason=f"no {EZPZ_TUI}: pip install -e ."),
    pytest.mark.mpi,
    pytest.mark.timeout(240),
]


class Tmux:
    """One tmux server on a private socket holding one 120x40 session."""

    def __init__(self, socket: str, cwd: Path, env: dict[str, str], conf: Path) -> None:
        self.socket = socket
        self.cwd = cwd
        self.env = env
        self.conf = conf
        self.target = "ezpz"
        self.last_screen = ""

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert TMUX is not None
        return subprocess.run(
            [TMUX, "-L", self.socket, "-f", str(self.conf), *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=check,
            timeout=30,
        )

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``ezpz-tui ARGS`` run to its end beside the pane, with its environment and folder."""
        return subprocess.run(
            [str(EZPZ_TUI), *args],
            env=self.env,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start(self, argv: list[str]) -> None:
        self.tmux(
            "new-session", "-d", "-s", self.target, "-x", str(WIDTH), "-y", str(HEIGHT),
            "-c", str(self.cwd), *argv,
        )  # fmt: skip

    def keys(self, *keys: str, pause: float = 0.25) -> None:
        """Send each key (tmux key names: J, Tab, BTab, Left, C-u, Escape) and let it land."""
        for key in keys:
            self.tmux("send-keys", "-t", self.target, key)
            time.sleep(pause)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.target, "-l", text)
        time.sleep(0.25)

    def screen(self) -> str:
        done = self.tmux("capture-pane", "-p", "-t", self.target, check=False)
        if done.returncode == 0:
            self.last_screen = done.stdout
        return self.last_screen

    def exit_status(self) -> str | None:
        """``status=N signal=`` (or ``status= signal=NAME``) once the TUI's process has exited
        and tmux has reaped it (remain-on-exit keeps the pane); None while it runs.

        tmux marks the pane dead when the terminal closes, which can come before the child's exit
        status, so a dead pane without a status is still "not yet"."""
        fmt = "#{pane_dead} status=#{pane_dead_status} signal=#{pane_dead_signal}"
        done = self.tmux("display-message", "-p", "-t", self.target, fmt, check=False)
        if done.returncode != 0:
            return f"no pane: {done.stderr.strip()}"
        dead, _, status = done.stdout.strip().partition(" ")
        if dead == "1" and status == "status= signal=":
            # A tmux built with libutempter can miss the SIGCHLD and keep the TUI a zombie
            # (tmux/tmux#311); another SIGCHLD to this server makes it reap (waitpid) again.
            os.kill(self.server_pid(), signal.SIGCHLD)
            return None
        return status if dead == "1" else None

    def server_pid(self) -> int:
        return int(self.tmux("display-message", "-p", "#{pid}").stdout)

    def wait_for(self, what: str, ok: Callable[[str], bool], timeout: float = 40.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if ok(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout:.0f}s waiting for {what}:\n{screen}"
                )
            time.sleep(0.2)


def run_dirs(tmp_path: Path) -> list[Path]:
    """The run directories the TUI made, oldest first (run ids start with the time)."""
    outputs = tmp_path / "outputs"
    return sorted(p for p in outputs.iterdir() if p.is_dir()) if outputs.is_dir() else []


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    required.tmux()
    home = tmp_path / "work"
    home.mkdir()
    conf = tmp_path / "tmux.conf"
    # remain-on-exit keeps the pane after the TUI exits, so its exit status can be read.
    conf.write_text("set -g remain-on-exit on\nset -g default-terminal xterm-256color\n")
    env = without_job()
    env.update(
        TERM="xterm-256color",
        EZPZ_OUTPUTS=str(tmp_path / "outputs"),
        EZPZ_TUI_CONFIG_DIR=str(tmp_path / "config"),
        PATH=os.pathsep.join([str(EZPZ_TUI.parent), env.get("PATH", "")]),
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p),
    )
    server = Tmux(f"ezpz-test-{os.getpid()}", home, env, conf)
    try:
        yield server
    finally:
        server.screen()
        print(f"--- last screen ---\n{server.last_screen}--- end ---")
        server.tmux("kill-server", check=False)
        # tmux leaves its socket file behind; TMUX_TMPDIR is not passed on, so it is in /tmp.
        Path(f"/tmp/tmux-{os.getuid()}/{server.socket}").unlink(missing_ok=True)
        for pid in processes_of(*run_dirs(tmp_path)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _has(screen: str, *parts: str) -> bool:
    return all(part in screen for part in parts)


def _in_panel(screen: str, *parts: str) -> bool:
    """Whether the bordered middle panel holds every part, read as one string without spaces: a
    long path wraps in the launch preview at a place that depends on where the clone lives."""
    inner = (re.search(r"▕(.*?)▏", line) for line in screen.splitlines())
    text = "".join(re.sub(r"\s", "", match.group(1)) for match in inner if match)
    return all(re.sub(r"\s", "", part) in text for part in parts)


def _line_with(screen: str, *parts: str) -> str | None:
    return next((line for line in screen.splitlines() if _has(line, *parts)), None)


def _runs(screen: str, **tp_by_state: str) -> bool:
    """Whether the runs list shows, for each ``state=tpN``, a ``tpNpp1cp1`` run in that state."""
    return all(_line_with(screen, f"{tp}pp1cp1", state) for state, tp in tp_by_state.items())


def _summary(screen: str, pattern: re.Pattern[str]) -> bool:
    """Whether the summary bar (the first line) matches ``pattern``."""
    return pattern.search(screen.splitlines()[0]) is not None


def _form_ready(screen: str) -> bool:
    """The prefilled plan with its preview, and the doctor done: its result arriving while keys
    are typed into the form can move the focus (seen under load as a field skipped)."""
    return _in_panel(screen, "$", "runtime.examples.train") and bool(
        re.search(r"Doctor: \d+ ok", screen)
    )


def replace_field(tmux: Tmux, reach: list[str], text: str) -> None:
    """Reach a launch form field with the keys ``reach``, replace its text, leave it."""
    tmux.keys(*reach)
    tmux.keys("C-e", "C-u")
    tmux.type(text)
    tmux.keys("Escape", pause=1.0)  # a key within ESCDELAY would read as alt+key


def test_newcomer_flow(tmux: Tmux, tmp_path: Path) -> None:
    python = str(EZPZ_TUI.parent / "python")
    tmux.start([str(EZPZ_TUI)])

    # 1. Allocation, doctor result and the prefilled plan with its launcher preview.
    tmux.wait_for(
        "the allocation, the doctor's result and the prefilled plan",
        lambda s: (
            _has(s, "scheduler", "TP")
            and _in_panel(s, "$", "runtime.examples.train")
            and re.search(r"Doctor: \d+ ok", s) is not None
        ),
        timeout=60,
    )

    # 2. A demo that runs long enough: replace the command field (the 6th field from the form).
    command = " ".join([python, *DEMO_ARGS])
    replace_field(tmux, ["J", *["Tab"] * TABS_TO_COMMAND], command)
    # The command field shows the value's end (the preview's tail is below the fold at 36 rows).
    tmux.wait_for("the new command in its field", lambda s: "0.2 --steps 10000" in s, timeout=20)

    # 3. Launch; the runs list shows it running and the summary bar shows a step.
    tmux.keys("r")
    stepping = re.compile(r"● running\s+step \d+")
    what = "a running tp1 run with a step in the summary bar"
    tmux.wait_for(what, lambda s: _runs(s, running="tp1") and _summary(s, stepping), timeout=60)

    # 4-5. TP 1 -> 2 and relaunch in four keys, each shown before it is needed: e (footer:
    # "sizes") opens the form with the cursor on TP, + (footer: "+/- size") steps it, R (footer:
    # "relaunch") asks with the whole change, y (the dialog) answers.
    tmux.wait_for("e and R in the footer", lambda s: _has(s, "e sizes", "R relaunch"), 20)
    tmux.keys("e")
    tmux.wait_for("+ in the footer", lambda s: "+/- size" in s, timeout=20)
    tmux.keys("+")
    tmux.wait_for(
        "TP 2 in the form and the preview",
        lambda s: _has(s, "TP  2", "tp 2 pp 1 cp 1") and _in_panel(s, "EZPZ_TP 2"),
        timeout=20,
    )
    tmux.keys("R")
    tmux.wait_for(
        "the relaunch question with the change, after the new layout's preflight",
        lambda s: _has(s, "Relaunch?", "TP 1 → 2", "EZPZ_TP 1 → 2", "Preflight passed"),
        timeout=120,
    )
    tmux.keys("y")
    relaunched = re.compile(r"tp2pp1cp1.*running")
    what = "the tp2 run running (runs list and summary bar) and the tp1 run stopped"
    tmux.wait_for(
        what, lambda s: _runs(s, running="tp2", stopped="tp1") and _summary(s, relaunched), 60
    )

    # 5b. Compare (Run -> Metrics -> Compare): both runs, tokens/s for each; the parent's loss
    # on the new run's plot without being asked (Metrics, full screen for the status line).
    tmux.keys("t", "t")
    tokens = re.compile(r"tokens/s\s+[\d.]+k?\*?\s+[\d.]+k?\*?")
    tmux.wait_for(
        "both runs' tokens/s in the Compare tab",
        lambda s: _has(s, "#1", "#2", "TP ") and tokens.search(s) is not None,
        timeout=60,
    )
    tmux.keys("T", "F")
    # The demo answers a save request, so the new run continues at the step its parent saved:
    # the parent's curve and the new run's are one line, the join named in the status line
    # (a parent that never said it answers is overlaid instead, its legend in that line).
    parent_shown = re.compile(r"┆ resumed at step \d+ from 20|━ 20")
    tmux.wait_for(
        "the parent's curve on the loss plot", lambda s: parent_shown.search(s) is not None, 30
    )
    tmux.keys("F")

    # 6. On disk: two runs, the second names the first as parent and has tp=2.
    runs = run_dirs(tmp_path)
    assert [p.name[-9:] for p in runs] == ["tp1pp1cp1", "tp2pp1cp1"], runs
    first, second = runs
    meta = read_run_toml(second)
    assert meta["parent"] == first.name
    assert meta["sizes"]["tp"] == 2 and meta["plan"]["tp"] == 2
    assert meta["plan"]["command"] == [python, *DEMO_ARGS]
    first_state = json.loads((first / "state.json").read_text())
    assert first_state["state"] == "stopped", first_state
    assert not processes_of(first)

    # 7. Quit with a run alive: asked first, then the run is stopped and the TUI exits 0.
    tmux.keys("q")
    tmux.wait_for("the quit question", lambda s: "still running" in s, timeout=20)
    tmux.keys("y")
    deadline = time.monotonic() + 40
    while (status := tmux.exit_status()) is None:
        assert time.monotonic() < deadline, f"the TUI did not exit:\n{tmux.screen()}"
        time.sleep(0.2)
    assert status == "status=0 signal=", f"the TUI exited with {status!r}:\n{tmux.screen()}"
    assert not processes_of(*runs)
    second_state = json.loads((second / "state.json").read_text())
    assert second_state["state"] == "stopped", second_state


def test_a_torchrun_script_from_the_launch_form(tmux: Tmux, tmp_path: Path) -> None:
    """A script that knows only torchrun (a bare init_process_group) launched with ``r`` under
    the default launcher: the preview says what the ranks get, both ranks agree on the sum."""
    python = str(EZPZ_TUI.parent / "python")
    script = REPO / "tests" / "ranks" / "torchrun_plain.py"
    tmux.start([str(EZPZ_TUI)])
    tmux.wait_for("the prefilled plan and the doctor's result", _form_ready, 60)
    replace_field(tmux, ["J", *["Tab"] * TABS_TO_COMMAND], f"{python} {script}")
    tmux.wait_for(
        "the script and the ranks' torchrun variables in the preview",
        lambda s: _in_panel(s, "ranks/torchrun_plain.py", "Each rank gets torchrun's RANK"),
        timeout=20,
    )
    tmux.keys("r")
    tmux.wait_for(
        "the run succeeded", lambda s: _line_with(s, "tp1pp1cp1", "succeeded") is not None, 120
    )
    (run_dir,) = run_dirs(tmp_path)
    for rank in (0, 1):
        log = (run_dir / "logs" / "b0000" / f"rank-{rank:05d}.log").read_text()
        assert f"rank={rank} world=2 sum=3.0" in log, log
    tmux.wait_for("rank 0's line on screen", lambda s: "rank=0 world=2 sum=3.0" in s, 20)


def test_watch_a_live_two_rank_run(tmux: Tmux, tmp_path: Path) -> None:
    """A live 2-rank demo, launched headless, watched with ``ezpz-tui attach`` as the issue's
    newcomer does: move between ranks, read a rank's log with vim keys, search it, see the
    all-ranks view follow, watch the loss curve grow; quitting leaves the run alone."""
    python = str(EZPZ_TUI.parent / "python")
    launch = subprocess.Popen(
        [str(EZPZ_TUI), "launch", "--ppn", "2", "--quiet", "--", python, *DEMO_ARGS],
        env=tmux.env,
        cwd=tmux.cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _watch(tmux, tmp_path)
        assert launch.poll() is None, "quitting an attached TUI leaves the run running"
    finally:
        launch.send_signal(signal.SIGINT)
        launch.wait(timeout=60)
    assert not processes_of(*run_dirs(tmp_path))


def _watch(tmux: Tmux, tmp_path: Path) -> None:
    deadline = time.monotonic() + 60
    while not (runs := run_dirs(tmp_path)) or not (runs[0] / "metrics").is_dir():
        assert time.monotonic() < deadline, "the launch made no run directory"
        time.sleep(0.2)
    tmux.start([str(EZPZ_TUI), "attach", str(runs[0])])
    # The Run tab: both ranks running, rank 0's log following, the rank list focused.
    tmux.wait_for(
        "two running ranks and rank 0's log following",
        lambda s: (
            re.search(r"\s0 running", s) is not None
            and re.search(r"\s1 running", s) is not None
            and re.search(r"rank 0 · \d+ lines · following", s) is not None
        ),
        timeout=60,
    )
    # j in the rank list shows rank 1's log; its lines name rank 1.
    tmux.keys("j")
    tmux.wait_for("rank 1's log", lambda s: _has(s, "rank 1 · ", "[rank 1]"), timeout=20)
    # Enter moves to the log; k pauses following and new lines are counted.
    tmux.keys("Enter", "k")
    tmux.wait_for(
        "the paused log counting new lines",
        lambda s: re.search(r"paused \+\d+ \(G\)", s) is not None,
        timeout=30,
    )
    # / searches the log; G follows again.
    tmux.keys("/")
    tmux.type("loss")
    tmux.keys("Enter", "G")
    tmux.wait_for("following again", lambda s: _has(s, "rank 1 · ", "following"), timeout=20)
    # a: all ranks interleaved with a rank column, still following as steps arrive.
    tmux.keys("a")
    first = tmux.wait_for(
        "the all-ranks view",
        lambda s: (
            _has(s, "all ranks · ", "following")
            and re.search(r"\b0 │ ", s) is not None
            and re.search(r"\b1 │ ", s) is not None
        ),
        timeout=20,
    )

    def count(screen: str, pattern: str) -> int:
        found = re.search(pattern, screen)
        return int(found.group(1).replace(",", "")) if found else -1

    lines = count(first, r"all ranks · (\d+) lines")
    tmux.wait_for(
        "the all-ranks view growing",
        lambda s: count(s, r"all ranks · (\d+) lines") > lines,
        timeout=20,
    )
    # t: the Metrics tab plots the loss; F gives it the whole screen; the curve grows.
    tmux.keys("t", "F")
    shown = tmux.wait_for(
        "the loss plot",
        lambda s: re.search(r"loss \(\d+/\d+\) .*· [\d,]+ pts", s) is not None,
        timeout=30,
    )
    points = count(shown, r"([\d,]+) pts")
    tmux.wait_for(
        "the loss curve growing", lambda s: count(s, r"([\d,]+) pts") > points, timeout=20
    )
    # q: an attached TUI quits at once; it started nothing, so it asks nothing.
    tmux.keys("F", "q")
    deadline = time.monotonic() + 20
    while tmux.exit_status() is None:
        assert time.monotonic() < deadline, f"the TUI did not exit:\n{tmux.screen()}"
        time.sleep(0.2)


def _launch_the_long_demo(tmux: Tmux, tmp_path: Path) -> tuple[Path, int]:
    """Start the TUI, launch a long demo from its form, wait for a step: its run directory and
    the TUI's pid (the run's supervisor)."""
    tmux.start([str(EZPZ_TUI)])
    tmux.wait_for("the prefilled plan and the doctor's result", _form_ready, 60)
    demo = f"{EZPZ_TUI.parent / 'python'} {' '.join(DEMO_ARGS)}"
    replace_field(tmux, ["J", *["Tab"] * TABS_TO_COMMAND], demo)
    tmux.keys("r")
    stepping = re.compile(r"● running\s+step \d+")
    tmux.wait_for("a running run", lambda s: _summary(s, stepping), timeout=60)
    (run_dir,) = run_dirs(tmp_path)
    return run_dir, json.loads((run_dir / "state.json").read_text())["supervisor_pid"]


@pytest.mark.parametrize("how", ["SIGKILL", "the terminal closed"])
def test_a_tui_that_dies_takes_its_run_down_and_says_so(
    tmux: Tmux, tmp_path: Path, how: str
) -> None:
    """The TUI killed (SIGKILL: no handler runs) or its terminal closed (the SSH drop) with a
    run live: the run is stopped and recorded ``stopped`` with the reason, nothing is left."""
    run_dir, tui = _launch_the_long_demo(tmux, tmp_path)
    if how == "SIGKILL":
        os.kill(tui, signal.SIGKILL)
    else:
        tmux.tmux("kill-server")
    deadline = time.monotonic() + 60
    while (state := json.loads((run_dir / "state.json").read_text()))["state"] == "running":
        assert time.monotonic() < deadline, "the run outlived its TUI unsupervised"
        time.sleep(0.2)
    assert state["state"] == "stopped", state
    assert f"pid {tui}" in state["reason"] or how != "SIGKILL", state
    statuses = [json.loads(p.read_text()) for p in (run_dir / "status").glob("b0000/rank-*.json")]
    assert sorted(s["state"] for s in statuses) == ["stopped", "stopped"], statuses
    assert not processes_of(run_dir)


def test_quit_leaving_the_run_running_and_stop_it_later(tmux: Tmux, tmp_path: Path) -> None:
    """``q`` then ``l``: the TUI exits, its run goes on under its tether (heartbeat and all),
    and a later ``ezpz-tui stop RUN`` stops it as the user's stop."""
    run_dir, tui = _launch_the_long_demo(tmux, tmp_path)
    tmux.keys("q")
    tmux.wait_for("the quit question", lambda s: "leave running and quit" in s, timeout=20)
    tmux.keys("l")
    deadline = time.monotonic() + 30
    while tmux.exit_status() is None:
        assert time.monotonic() < deadline, "the TUI did not quit"
        time.sleep(0.2)
    time.sleep(2)
    state = json.loads((run_dir / "state.json").read_text())
    assert state["state"] == "running" and state["supervisor_pid"] != tui, state
    assert len(processes_of(run_dir)) >= 2  # the ranks go on
    stop = tmux.cli("stop", run_dir.name, timeout=90)
    assert stop.returncode == 0, stop.stderr
    state = json.loads((run_dir / "state.json").read_text())
    assert state["state"] == "stopped" and state["stopped_by_user"] is True, state
    statuses = [json.loads(p.read_text()) for p in (run_dir / "status").glob("b0000/rank-*.json")]
    assert sorted(s["state"] for s in statuses) == ["stopped", "stopped"], statuses
    assert not processes_of(run_dir)


SLEEPERS = "import os, time; print(f\"rank {os.environ['RANK']} up\", flush=True); time.sleep(120)"


def test_a_launch_whose_terminal_closes_records_the_hang_up(tmux: Tmux, tmp_path: Path) -> None:
    """``ezpz-tui launch`` in a terminal that goes away (tmux killed: the SSH drop): the run is
    stopped, and its history says the terminal hung up, not that the user stopped it."""
    python = str(EZPZ_TUI.parent / "python")
    tmux.start([str(EZPZ_TUI), "launch", "--ppn", "2", "--", python, "-c", SLEEPERS])
    tmux.wait_for("rank 0 up", lambda s: "rank 0 up" in s, timeout=60)
    (run_dir,) = run_dirs(tmp_path)
    launch = json.loads((run_dir / "state.json").read_text())["supervisor_pid"]
    tmux.tmux("kill-server")
    deadline = time.monotonic() + 60
    while (state := json.loads((run_dir / "state.json").read_text()))["state"] == "running":
        assert time.monotonic() < deadline, "the run's end was not recorded"
        time.sleep(0.2)
    assert state["state"] == "stopped", state
    assert state["supervisor_pid"] == launch, "the launch recorded it, not its tether"
    assert state["reason"] == "the terminal hung up (SIGHUP)", state
    assert state.get("stopped_by_user") is not True, state
    statuses = [json.loads(p.read_text()) for p in (run_dir / "status").glob("b0000/rank-*.json")]
    assert [s["cause"] for s in statuses] == ["the terminal hung up (SIGHUP)"] * 2, statuses
    assert not processes_of(run_dir)


def test_the_tui_with_stdout_closed_still_draws(tmux: Tmux) -> None:
    """``ezpz-tui >&-`` in a terminal: Textual draws on stderr and reads stdin, so the TUI
    starts as usual; ``q`` quits it with status 0."""
    tmux.start(["sh", "-c", f"exec {EZPZ_TUI} >&-"])
    drawn = re.compile(r"Doctor: \d+ ok")
    tmux.wait_for("the doctor's result and the footer", lambda s: bool(drawn.search(s)), 60)
    assert "q quit" in tmux.screen()
    tmux.keys("q")
    deadline = time.monotonic() + 30
    while (status := tmux.exit_status()) is None:
        assert time.monotonic() < deadline, "the TUI did not quit"
        time.sleep(0.2)
    assert status == "status=0 signal=", status
