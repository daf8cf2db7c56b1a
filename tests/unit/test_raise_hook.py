"""A rank's uncaught exception recorded by its own interpreter the moment it is raised: real
interpreters started with the capture wrapper's ``sitecustomize``, as a rank is (what the verdict
makes of the records: tests/unit/test_culprit.py; real ranks: tests/integration/test_culprit.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from runtime import raise_hook
from runtime.rundir import RunDir, read_raised
from runtime.stackdump import SITE_DIR


def rank_python(code: str, record: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter as the capture wrapper starts a rank's: its
    ``sitecustomize`` first on PYTHONPATH and the record's path in the environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", raise_hook.OWNER_VAR)}
    env |= {"PYTHONPATH": str(SITE_DIR), raise_hook.FILE_VAR: str(record)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_raise_is_recorded_before_the_exit_work_and_still_printed(tmp_path: Path) -> None:
    """The raise's moment, not the exit's: an atexit function that takes a second (a process
    group destroyed at exit) runs after the record is on disk."""
    record = RunDir(tmp_path).raised(1)
    record.parent.mkdir(parents=True)
    code = """
        import atexit, os, sys, time
        def slow_exit():
            time.sleep(1)
            print("exit work done at", time.time(), "record there:", os.path.exists(sys.argv[1]))
        atexit.register(slow_exit)
        def step(n):
            raise ValueError(f"bad batch at step {n}")
        step(5)
    """
    began = time.time()
    proc = rank_python(code, record, str(record))
    assert proc.returncode == 1
    # Python's own hook still printed the traceback into the rank's log.
    assert proc.stderr.rstrip().endswith("ValueError: bad batch at step 5"), proc.stderr
    assert "record there: True" in proc.stdout
    exit_work = float(proc.stdout.split("exit work done at ")[1].split()[0])
    (raised,) = read_raised(record)
    assert (raised.type, raised.message, raised.function) == (
        "ValueError",
        "bad batch at step 5",
        "step",
    )
    assert raised.where == "<string>:8"  # the raise itself, the innermost frame
    assert raised.thread is None
    assert raised.time is not None and began < raised.time < exit_work - 0.9
    assert raised.traceback[0] == "Traceback (most recent call last):"
    assert raised.traceback[-1] == "ValueError: bad batch at step 5"
    assert raised.line == "ValueError: bad batch at step 5"
    assert not list(record.parent.glob("*.tmp"))


def test_a_raise_in_a_thread_is_recorded_with_its_name(tmp_path: Path) -> None:
    record = tmp_path / "rank-00000.raised"
    code = """
        import threading
        class Late(Exception):
            pass
        def load():
            raise Late("the loader died")
        t = threading.Thread(target=load, name="loader")
        t.start()
        t.join()
        print("the main thread went on")
    """
    proc = rank_python(code, record)
    assert proc.returncode == 0 and "the main thread went on" in proc.stdout
    assert "Late: the loader died" in proc.stderr  # threading's own hook still printed it
    (raised,) = read_raised(record)
    assert (raised.type, raised.thread) == ("Late", "loader")


def test_only_the_ranks_own_process_records(tmp_path: Path) -> None:
    """A Python the rank starts (a helper expected to fail) and a child it forks (a data
    loader's worker) raise without writing the rank's record; the rank's own raise does."""
    record = tmp_path / "rank-00000.raised"
    code = """
        import os, subprocess, sys
        helper = subprocess.run([sys.executable, "-c", "raise KeyError('helper')"])
        assert helper.returncode == 1
        assert not os.path.exists(sys.argv[1]), "the helper wrote the rank's record"
        pid = os.fork()
        if pid == 0:
            try:
                raise OSError("the worker's")
            finally:
                sys.stderr.flush()
        os.waitpid(pid, 0)
        assert not os.path.exists(sys.argv[1]), "the forked worker wrote the rank's record"
        raise RuntimeError("the rank's own")
    """
    proc = rank_python(code, record, str(record))
    assert proc.returncode == 1, proc.stderr
    assert [r.line for r in read_raised(record)] == ["RuntimeError: the rank's own"]


def test_without_a_record_to_write_nothing_is_hooked(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", raise_hook.FILE_VAR)}
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; print(sys.excepthook is sys.__excepthook__)"],
        env=env | {"PYTHONPATH": str(SITE_DIR)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.strip() == "True", proc.stderr


def test_a_record_that_cannot_be_read_is_no_raise(tmp_path: Path) -> None:
    path = tmp_path / "rank-00000.raised"
    assert read_raised(path) == ()
    for text in ("{", "[]", '{"raises": 3}', '{"raises": [{"message": "no type"}, 4]}'):
        path.write_text(text)
        assert read_raised(path) == ()
    path.write_text('{"raises": [{"type": "ValueError", "message": 3, "time": "soon"}]}')
    (raised,) = read_raised(path)
    assert (raised.type, raised.message, raised.time, raised.line) == (
        "ValueError",
        "",
        None,
        "ValueError",
    )
