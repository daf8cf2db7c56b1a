"""``ezpz-tui`` pointed at outputs that cannot hold runs, and given a config.toml with typos.

Real subprocesses and real filesystems: a file, a path under a file, a read-only and a full
2 MB tmpfs. Every command answers with one line naming the path and the cause and exit status 2,
never a traceback; nothing is created.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fixtures.cli import PY, base_env, cli
from tests.fixtures.mounts import fill, make_read_only, tmpfs

COMMANDS = (["runs"], ["attach", "20261122"], ["plot", "20261122"])


def _file(tmp: Path) -> tuple[Path, str]:
    path = tmp / "out"
    path.write_text("a file")
    return path, "not a directory"


def _under_file(tmp: Path) -> tuple[Path, str]:
    (tmp / "file").write_text("a file")
    return tmp / "file" / "out", f"not a directory ({tmp / 'file'} is a file)"


@pytest.fixture(params=["file", "under-a-file", "read-only", "full"])
def bad_outputs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """An outputs path that cannot take a run, and the cause the user should read."""
    makers: dict[str, Callable[[Path], tuple[Path, str]]] = {
        "file": _file,
        "under-a-file": _under_file,
    }
    if request.param in makers:
        yield makers[request.param](tmp_path)
        return
    with tmpfs(tmp_path / "fs") as where:
        if request.param == "read-only":
            make_read_only(where)
            yield where, "read-only file system"
        else:
            fill(where)
            yield where, "no space left on device"


def test_launch_into_bad_outputs_says_where_and_why(bad_outputs: tuple[Path, str]) -> None:
    outputs, why = bad_outputs
    before = sorted(os.listdir(outputs)) if outputs.is_dir() else None
    proc = cli(["launch", "--quiet", "--", PY, "-c", "pass"], base_env(outputs))
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr == f"ezpz-tui: cannot create a run in {outputs}: {why}\n"
    assert (sorted(os.listdir(outputs)) if outputs.is_dir() else None) == before


@pytest.mark.parametrize("maker", [_file, _under_file], ids=["file", "under-a-file"])
def test_runs_attach_plot_on_a_file_say_it_is_not_a_directory(
    maker: Callable[[Path], tuple[Path, str]], tmp_path: Path
) -> None:
    outputs, why = maker(tmp_path)
    for command in COMMANDS:
        proc = cli(command, base_env(outputs))
        assert "Traceback" not in proc.stdout + proc.stderr
        assert (proc.returncode, proc.stdout) == (2, ""), command
        assert proc.stderr == f"ezpz-tui: cannot list runs in {outputs}: {why}\n", command


def test_runs_on_a_missing_outputs_dir_is_just_no_runs(tmp_path: Path) -> None:
    outputs = tmp_path / "nothing-yet"
    proc = cli(["runs"], base_env(outputs))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"no runs in {outputs}\n", "")
    assert not outputs.exists()


def test_config_typos_are_warned_on_stderr(tmp_path: Path) -> None:
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    path = config_dir / "config.toml"
    path.write_text("[launch]\nkill_on_bad_exti = false\n\n[lanch]\nppn = 2\n")
    env = {**base_env(tmp_path / "outputs"), "EZPZ_TUI_CONFIG_DIR": str(config_dir)}
    proc = cli(["launch", "--dry-run", "--", PY, "-c", "pass"], env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        f"ezpz-tui: warning: {path}: unknown key [launch] kill_on_bad_exti "
        "(did you mean kill_on_bad_exit?)",
        f"ezpz-tui: warning: {path}: unknown section [lanch] (did you mean [launch]?)",
    ]
    assert '"argv"' in proc.stdout  # the warnings change nothing else
