"""How the runtime arms SIGUSR1 for stack dumps, and how the wrapper hands plain scripts the
``sitecustomize`` that does it (the dumps themselves: tests/integration/test_stackdump_site.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from runtime.stackdump import SITE_DIR, add_site

SITE = str(SITE_DIR)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, SITE),
        ("/opt/lib", f"{SITE}{os.pathsep}/opt/lib"),
        (f"{os.pathsep}/opt/lib", f"{SITE}{os.pathsep}{os.pathsep}/opt/lib"),  # '' is the cwd
        (f"/a{os.pathsep}{SITE}", f"/a{os.pathsep}{SITE}"),  # already there: once is enough
    ],
)
def test_add_site_puts_ours_first_and_keeps_theirs_verbatim(
    given: str | None, expected: str
) -> None:
    env = {} if given is None else {"PYTHONPATH": given}
    add_site(env)
    assert env["PYTHONPATH"] == expected


@pytest.mark.parametrize("off", ["0", "off", "false"])
def test_add_site_opt_out(off: str) -> None:
    all_off = {"EZPZ_STACKS": off, "EZPZ_DESTROY_AT_EXIT": off, "EZPZ_FLIGHT_RECORDER": off}
    env = {**all_off, "PYTHONPATH": "/opt/lib"}
    add_site(env)
    assert env["PYTHONPATH"] == "/opt/lib"
    env = {"EZPZ_STACKS": off, "PYTHONPATH": "/opt/lib"}  # it still has the exit hook to add
    add_site(env)
    assert env["PYTHONPATH"] == f"{SITE}{os.pathsep}/opt/lib"
    env = {**all_off, "EZPZ_FLIGHT_RECORDER": "1", "PYTHONPATH": "/opt/lib"}  # the recorder
    add_site(env)
    assert env["PYTHONPATH"] == f"{SITE}{os.pathsep}/opt/lib"


def _register_in_fresh_python(prelude: str) -> str:
    code = f"{prelude}\nfrom runtime import stackdump\nprint(stackdump.register())"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


@pytest.mark.skipif(sys.platform == "win32", reason="no SIGUSR1")
def test_register_leaves_a_programs_own_handler_alone() -> None:
    assert _register_in_fresh_python("") == "True"
    own = "import signal\nsignal.signal(signal.SIGUSR1, lambda s, f: None)"
    assert _register_in_fresh_python(own) == "False"
