"""How the exit hook is registered: once per process whoever asks, never importing torch, and
off when asked (what it does at exit, with torch: tests/integration/test_exit_hook.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from runtime import exit_hook
from runtime.stackdump import SITE_DIR

SITE = {"PYTHONPATH": str(SITE_DIR)}


def fresh_python(code: str, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess:
    """``code`` in a new interpreter with this environment (no PYTHONPATH) plus ``env``."""
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", exit_hook.ENABLE_VAR)}
    proc = subprocess.run(
        [sys.executable, *flags, "-c", code],
        env=base | env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc


PROBE = (
    "import sys, threading\n"
    "from runtime import exit_hook\n"
    "print(exit_hook.SHARED_NAME in sys.modules, exit_hook.register(), exit_hook.register(),"
    " [t.name for t in threading.enumerate()])\n"
)


def test_registered_once_by_the_site_and_again_by_no_one() -> None:
    said = fresh_python(PROBE, SITE).stdout.strip().split(maxsplit=3)
    assert said == ["True", "False", "False", "['MainThread']"]  # no thread before torch


def test_registered_once_by_the_runtime_alone() -> None:
    assert fresh_python(PROBE, {}).stdout.strip().split(maxsplit=3)[:3] == [
        "False",
        "True",
        "False",
    ]


@pytest.mark.parametrize("off", ["0", "off", "False"])
def test_turned_off(off: str) -> None:
    said = fresh_python(PROBE, SITE | {exit_hook.ENABLE_VAR: off}).stdout.strip().split(maxsplit=3)
    assert said[:3] == ["False", "False", "False"]


def test_a_script_without_torch_never_imports_it_at_exit() -> None:
    # -X importtime reports every import, those the exit functions make included.
    imports = fresh_python("import sys", SITE, "-X", "importtime").stderr
    assert "sitecustomize" in imports and "torch" not in imports


@pytest.mark.parametrize(
    ("given", "expected"), [(None, 10.0), ("2.5", 2.5), ("0", 0.0), ("-1", 10.0), ("x", 10.0)]
)
def test_the_timeout(given: str | None, expected: float) -> None:
    env = {} if given is None else {exit_hook.TIMEOUT_VAR: given}
    assert exit_hook.timeout_s(env) == expected
