"""The tmux driver shared by ``tui_bench.py`` and ``monitor_bench.py``.

Both time ``ezpz-tui`` in a real terminal: a private tmux server on its own ``-L`` socket (no user
config), apps started in sessions of a fixed pane size, keys sent with ``send-keys`` and the
screen read back with ``capture-pane -p``. One copy here, so the two benches measure through the
same code (the capture timing, the tmux/tmux#311 workaround in ``close``) and print the same
header. Imported as a sibling
(``from _tmux import ...``): a script's own directory is first on ``sys.path`` when it is run as
``python bench/NAME.py``. Not a bench itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from _common import PY, with_repo_path

EZPZ_TUI = Path(PY).parent / "ezpz-tui"


class Tmux:
    """A private tmux server (``-L <prefix>-<pid>``, no user config) kept alive between
    sessions, so its start-up is not timed; sessions get ``width`` x ``height`` panes."""

    def __init__(
        self,
        root: Path,
        env: dict[str, str],
        width: int = 120,
        height: int = 40,
        prefix: str = "ezpz-bench",
    ) -> None:
        self.socket = f"{prefix}-{os.getpid()}"
        self.conf = root / "tmux.conf"
        self.conf.write_text("set -g exit-empty off\nset -g default-terminal xterm-256color\n")
        self.env = env
        self.cwd = root
        self.width, self.height = width, height
        self.poll_s: list[float] = []
        self.tmux("start-server")

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tmux", "-L", self.socket, "-f", str(self.conf), *args],
            env=self.env,
            capture_output=True,
            text=True,
            check=check,
            timeout=30,
        )

    def new(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        """Start ``argv`` in a new session, with ``env`` added to its environment."""
        extra = [f"-e{k}={v}" for k, v in (env or {}).items()]
        size = ["-x", str(self.width), "-y", str(self.height)]
        self.tmux("new-session", "-d", "-s", name, *size, "-c", str(self.cwd), *extra, *argv)

    def pane_pid(self, name: str) -> int:
        """The pid of the process in the session's pane."""
        return int(self.tmux("display-message", "-p", "-t", name, "#{pane_pid}").stdout)

    def alive(self, name: str) -> bool:
        return self.tmux("has-session", "-t", name, check=False).returncode == 0

    def key(self, name: str, key: str) -> None:
        """Send one key, no pause (for timed presses)."""
        self.tmux("send-keys", "-t", name, key)

    def keys(self, name: str, *keys: str, pause: float = 0.25) -> None:
        """Send ``keys`` one at a time, ``pause`` seconds after each."""
        for key in keys:
            self.key(name, key)
            if pause > 0:
                time.sleep(pause)

    def type(self, name: str, text: str) -> None:
        self.tmux("send-keys", "-t", name, "-l", text)
        time.sleep(0.25)

    def screen(self, name: str) -> str:
        start = time.perf_counter()
        done = self.tmux("capture-pane", "-p", "-t", name, check=False)
        self.poll_s.append(time.perf_counter() - start)
        return done.stdout if done.returncode == 0 else ""

    def wait(
        self,
        name: str,
        ok: Callable[[str], bool],
        what: str,
        timeout: float = 60,
        interval: float = 0.1,
    ) -> str:
        """Poll until ``ok(screen)``; ``interval=0`` polls as fast as tmux answers (timed parts
        only: a busy poll takes a core from the app on a small machine)."""
        deadline = time.perf_counter() + timeout
        while True:
            screen = self.screen(name)
            if ok(screen):
                return screen
            if time.perf_counter() > deadline:
                raise RuntimeError(f"timed out waiting for {what} in {name}:\n{screen}")
            time.sleep(interval)

    def close(
        self,
        name: str,
        keys: tuple[str, ...] = ("q",),
        timeout: float = 40,
        pause: float = 0.5,
    ) -> None:
        """Quit the app with ``keys`` (``pause`` seconds after each) and wait until its session
        is gone (kill it after ``timeout`` seconds)."""
        self.keys(name, *keys, pause=pause)
        deadline = time.perf_counter() + timeout
        while self.alive(name) and time.perf_counter() < deadline:
            time.sleep(0.1)
            # A tmux built with libutempter can miss the SIGCHLD of an exited app and keep the
            # pane (tmux/tmux#311); another SIGCHLD to this server makes it reap again.
            with contextlib.suppress(ValueError, OSError):
                pid = self.tmux("display-message", "-p", "#{pid}", check=False).stdout
                os.kill(int(pid), signal.SIGCHLD)
        if self.alive(name):
            print(f"  ! {name} did not quit within {timeout:.0f}s; killing its session")
            self.tmux("kill-session", "-t", name, check=False)

    def kill_server(self) -> None:
        """Stop the server and remove its socket file (tmux leaves it behind; TMUX_TMPDIR is not
        passed on, so it is in /tmp)."""
        self.tmux("kill-server", check=False)
        Path(f"/tmp/tmux-{os.getuid()}/{self.socket}").unlink(missing_ok=True)


class PaneOutput:
    """A control-mode client of ``name``'s session (``tmux -C``, sized by nothing, read-only):
    tmux tells it of each write the app makes to its pane, so a repaint is timed when it is
    written, not at the next poll, and the screen is read only when something was written
    (a poll every 10 ms forks a tmux client each time: on 2 cores that takes the app's CPU)."""

    def __init__(self, term: Tmux, name: str) -> None:
        argv = ["tmux", "-L", term.socket, "-f", str(term.conf), "-C", "attach-session"]
        argv += ["-f", "ignore-size,read-only", "-t", name]
        self.term, self.name = term, name
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=term.env
        )
        self.writes: list[float] = []  # perf_counter of each %output of the pane
        self._new = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(b"%output"):
                with self._new:
                    self.writes.append(time.perf_counter())
                    self._new.notify_all()

    def wait(self, ok: Callable[[str], bool], since: float, timeout: float) -> float:
        """The time of the write after ``since`` (perf_counter) from which the screen
        satisfies ``ok``; the screen is read once after each batch of writes."""
        deadline = since + timeout
        seen = 0
        while time.perf_counter() < deadline:
            with self._new:
                writes = [t for t in self.writes[seen:] if t >= since]
                seen = len(self.writes)
                if not writes:
                    self._new.wait(0.05)
                    continue
            if ok(self.term.screen(self.name)):
                # Of several writes read in one look, the last: the screen read after them all
                # may owe what it shows to any of them (an upper bound, never a flattering one).
                return writes[-1]
        raise RuntimeError(f"timed out waiting in {self.name}")

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def versions() -> str | None:
    """``python V, textual V, tmux V, N CPUs`` for a bench's header; None, after printing what is
    missing, where tmux or ``ezpz-tui`` is not there."""
    if shutil.which("tmux") is None or not EZPZ_TUI.exists():
        print(f"needs tmux on PATH and {EZPZ_TUI} (pip install -e .)")
        return None
    import textual

    version = subprocess.run(["tmux", "-V"], capture_output=True, text=True).stdout.strip()
    return (
        f"python {sys.version.split()[0]}, textual {textual.__version__}, {version}, "
        f"{os.cpu_count()} CPUs"
    )


def clean_env(root: Path) -> dict[str, str]:
    """No job, no stray rank variables, config and the user cache in a scratch directory (a
    bench that needs its outputs there too passes ``EZPZ_OUTPUTS`` per session to
    ``Tmux.new``)."""
    # PYTHONDONTWRITEBYTECODE: an installed ezpz-tui has its bytecode; without it every start
    # would compile the project's modules again (a third of the start-up on 2 cores).
    drop = (
        "EZPZ_RUN_DIR",
        "EZPZ_ACCELERATORS_PER_HOST",
        "CUDA_VISIBLE_DEVICES",
        "PYTHONDONTWRITEBYTECODE",
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in drop and not k.startswith(("PBS_", "SLURM_", "TMUX"))
    }
    env.update(
        TERM="xterm-256color",
        EZPZ_TUI_CONFIG_DIR=str(root / "config"),
        XDG_CACHE_HOME=str(root / "cache"),
        PATH=os.pathsep.join([str(Path(PY).parent), env.get("PATH", "")]),
    )
    return with_repo_path(env)


def ms(seconds: float, width: int = 7) -> str:
    """``seconds`` as whole milliseconds, right-aligned in ``width`` characters."""
    return f"{seconds * 1000:{width}.0f} ms"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]
