"""What a run records about where it came from (issue 12): the script's git commit and
whether it was dirty, the software versions, the launcher's version line."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from ezpz_tui.core.launching.provenance import (
    git_state,
    installed_version,
    launcher_version,
    provenance,
)


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    git(root, "init", "-q")
    (root / "scripts" / "train.py").write_text("print('hi')\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "first")
    return root


def test_the_scripts_repository_commit_and_dirty_flag(repo: Path, tmp_path: Path) -> None:
    head = git(repo, "rev-parse", "HEAD").strip()
    argv = ["mpiexec", "-n", "2", "--", "python", str(repo / "scripts" / "train.py")]
    facts = provenance(argv, tmp_path)  # launched from elsewhere: the script's repo counts
    assert facts["git"] == {"root": str(repo), "commit": head, "dirty": False}
    (repo / "scripts" / "train.py").write_text("print('changed')\n")
    assert git_state(repo / "scripts") == {"root": str(repo), "commit": head, "dirty": True}
    assert git_state(tmp_path) is None, "outside a repository: nothing recorded"


def test_versions_prefix_and_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOADEDMODULES", "PrgEnv-gnu/8.5.0:cudatoolkit/12.4:")
    monkeypatch.setenv("CONDA_PREFIX", "/soft/conda/2024-04")
    facts = provenance([], tmp_path)
    assert facts["torch"].startswith("2.") and facts["python"].count(".") == 2
    assert facts["modules"] == ["PrgEnv-gnu/8.5.0", "cudatoolkit/12.4"]
    assert facts["env_prefix"] == "/soft/conda/2024-04" and facts["cwd"] == str(tmp_path)


def test_the_launcher_version_line_skips_a_banner(tmp_path: Path) -> None:
    fake = tmp_path / "mpiexec"
    fake.write_text("#!/bin/sh\necho 'HYDRA build details:'\necho '    Version:   5.0.2'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert launcher_version(str(fake)) == "Version: 5.0.2"
    assert launcher_version(str(tmp_path / "missing")) is None


def test_versions_are_read_as_importlib_metadata_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The launch reads three versions from the distributions' folders, without importing
    importlib.metadata: the same answer, the first folder on sys.path winning, none for a
    distribution that is not there."""
    from importlib import metadata

    for name in ("torch", "ezpz-tui", "tomli-w", "no-such-distribution-here"):
        try:
            expected = metadata.version(name)
        except metadata.PackageNotFoundError:
            expected = None
        assert installed_version(name) == expected, name
    shadow = tmp_path / "Torch-0.0.dist-info"
    shadow.mkdir()
    (shadow / "METADATA").write_text("Metadata-Version: 2.1\nName: Torch\nVersion: 0.0.1\n\nx\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed_version("torch") == metadata.version("torch") == "0.0.1"
