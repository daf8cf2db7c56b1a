"""Plain scripts under the capture wrapper can be asked for their stacks (SIGUSR1), and the
wrapper's ``sitecustomize`` changes nothing else: real interpreters, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from runtime.stackdump import SITE_DIR

PY = sys.executable
CAPTURE = [PY, "-m", "runtime.capture", "--run-dir"]

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")

# Reports what the rank sees, then waits in a function of its own for SIGUSR1.
PROBE = textwrap.dedent(
    """
    import os, sys, time
    def caught(sig):
        mask = [l for l in open("/proc/self/status") if l.startswith("SigCgt:")][0]
        return bool(int(mask.split()[1], 16) >> (sig - 1) & 1)
    print("catches SIGUSR1:", caught(10))
    print("site dir on sys.path:", os.environ["SITE_DIR"] in map(os.path.realpath, sys.path))
    print("shadowed ran:", os.environ.get("SHADOWED_RAN", "no"), flush=True)
    def wait_here():
        open(sys.argv[1], "w").close()
        time.sleep(float(sys.argv[2]))
    wait_here()
    print("after the dump", flush=True)
    """
)


def run_probe(tmp_path: Path, env: dict[str, str], dump: bool) -> str:
    script, ready, run = tmp_path / "probe.py", tmp_path / "ready", tmp_path / "run"
    script.write_text(PROBE)
    cmd = [*CAPTURE, str(run), "--", PY, str(script), str(ready), "3" if dump else "0"]
    proc = subprocess.Popen(cmd, env={**os.environ, "SITE_DIR": str(SITE_DIR), **env})
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.02)
        if dump:
            status = (run / "status" / "b0000" / "rank-00000.json").read_text()
            pid = int(status.split('"pid": ')[1].split(",")[0])
            os.kill(pid, signal.SIGUSR1)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return (run / "logs" / "b0000" / "rank-00000.log").read_text()


def test_plain_script_dumps_its_stacks_and_lives_on(tmp_path: Path) -> None:
    text = run_probe(tmp_path, {}, dump=True)
    assert "catches SIGUSR1: True" in text
    assert "site dir on sys.path: False" in text  # taken back off before the script runs
    assert "(most recent call first):" in text
    assert ", line 11 in wait_here" in text
    assert "after the dump" in text  # SIGUSR1 did not end it


def test_the_shadowed_sitecustomize_still_runs(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['SHADOWED_RAN'] = 'yes'\n")
    text = run_probe(tmp_path, {"PYTHONPATH": str(theirs)}, dump=False)
    assert "shadowed ran: yes" in text and "catches SIGUSR1: True" in text


def test_opt_out_keeps_sigusr1_default(tmp_path: Path) -> None:
    text = run_probe(tmp_path, {"EZPZ_STACKS": "0"}, dump=False)
    assert "catches SIGUSR1: False" in text


def test_a_script_with_its_own_sigusr1_handler_keeps_it(tmp_path: Path) -> None:
    code = (
        "import signal, os, sys, time\n"
        "signal.signal(signal.SIGUSR1, lambda s, f: print('mine', flush=True))\n"
        "os.kill(os.getpid(), signal.SIGUSR1); time.sleep(0.2)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SITE_DIR)}
    proc = subprocess.run([PY, "-c", code], env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout == "mine\n"
    assert "most recent call first" not in proc.stderr
