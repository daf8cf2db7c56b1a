"""``ezpz-tui launch --stage``: the ranks run from a copy of their environment, made before them
and removed after them, through real mpiexec with 2 ranks on this host.

The environment staged is a real venv made for these tests: the same interpreter as this one,
without packages of its own (a ``.pth`` file adds this venv's site-packages), so that a copy
takes a moment instead of the 2 GB of torch this venv holds (``bench/stage_bench.py`` copies
that one). ezpz-tui runs from it, as a user runs it from theirs: its interpreter is the ranks'.
A failed copy is a real full or read-only 2 MB tmpfs as the staging directory. Several nodes are
simulated on this machine (:mod:`tests.fixtures.nodes`): one real mpiexec job whose processes
each have their host's name and own disk, so the pack is broadcast for real.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ezpz_tui.core.comparing.facts import read_facts
from ezpz_tui.core.runs.record import read_run_toml
from ezpz_tui.core.runs.staged import stage_line
from runtime.rundir import RunDir, read_state, read_statuses
from runtime.stage import MARK, bytes_text
from runtime.stage_pack import CHUNK, manifest, size_of
from tests.fixtures.cli import REPO, base_env, cli
from tests.fixtures.mounts import fill, make_read_only, tmpfs
from tests.fixtures.nodes import node_disk, simulated_mpiexec, two_node_job
from tests.fixtures.required import strace

# A rank whose command is a bare ``python``: where it runs from, what its environment says.
BARE = (
    "python",
    "-c",
    "import os, shutil, socket, sys; print('EXE', sys.executable, 'PREFIX', sys.prefix, "
    "'VENV', os.environ.get('VIRTUAL_ENV'), 'WHICH', shutil.which('python'), "
    "'HOST', socket.gethostname(), flush=True)",
)
# The rank: where its interpreter is, then three steps of the demo in that interpreter.
RANK = (
    "import runpy, sys; print('EXE', sys.executable, 'PREFIX', sys.prefix, flush=True); "
    "sys.argv = ['train', '--steps', '3']; "
    "runpy.run_module('runtime.examples.train', run_name='__main__')"
)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real venv of this interpreter that sees this venv's packages."""
    where = tmp_path_factory.mktemp("venv") / "env"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(where)], check=True)
    purelib = Path(sysconfig.get_path("purelib", vars={"base": str(where)}))
    here = sysconfig.get_path("purelib")
    (purelib / "ezpz-test-parent.pth").write_text(f"import site; site.addsitedir({here!r})\n")
    return where


@pytest.fixture
def stage_dir(tmp_path: Path) -> Iterator[Path]:
    where = tmp_path / "node-local"
    where.mkdir()
    yield where
    shutil.rmtree(where, ignore_errors=True)  # a kept copy, or a failing test's


def _launch(
    venv: Path,
    outputs: Path,
    *flags: str,
    command: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    ppn: int = 2,
) -> subprocess.CompletedProcess[str]:
    """``ezpz-tui launch`` run from ``venv`` (the rank's command: ``command``, else the
    demo in the venv's interpreter); mpiexec is this venv's (the mpich wheel) unless ``env``
    says otherwise."""
    if env is None:
        env = base_env(outputs)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # mpi4py (this venv's, through the .pth) looks for the mpich wheel's libmpi under sys.prefix,
    # which in the test venv is not where the wheel put it: the staging nodes would not be one job.
    if (Path(sys.prefix) / "lib" / "libmpi.so").exists():
        env = {**env, "MPI4PY_LIBMPI": str(Path(sys.prefix) / "lib")}
    python = str(venv / "bin" / "python")
    argv = [python, "-m", "ezpz_tui", "launch", "--quiet", "--ppn", str(ppn), *flags]
    return subprocess.run(
        [*argv, "--", *(command or (python, "-c", RANK))],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        stdin=subprocess.DEVNULL,
    )


def _only_run(outputs: Path, before: set[Path] = frozenset()) -> Path:  # type: ignore[assignment]
    runs = [p for p in outputs.iterdir() if p.is_dir() and p not in before]
    assert len(runs) == 1, runs
    return runs[0]


def _interpreters(run: Path) -> list[tuple[str, str]]:
    """Each rank's ``sys.executable`` and ``sys.prefix``, from its log."""
    found = []
    for rank in range(2):
        words = next(
            line.split() for line in RunDir(run).log(rank).read_text().splitlines() if "EXE" in line
        )
        found.append((words[1], words[3]))
    return found


def test_a_staged_run_runs_from_the_copy_and_leaves_nothing(
    venv: Path, outputs: Path, stage_dir: Path
) -> None:
    proc = _launch(venv, outputs, "--stage", "--stage-dir", str(stage_dir))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = _only_run(outputs)
    record = json.loads(RunDir(run).stage_json.read_text())
    copy = Path(record["dest"])
    assert copy.parent == stage_dir and record["source"] == str(venv)
    for executable, prefix in _interpreters(run):
        assert executable == str(copy / "bin" / "python")
        assert prefix == str(copy)
    assert len(list(RunDir(run).metrics(0).read_text().splitlines())) == 3  # the demo ran
    assert record["reused"] is False and record["bytes"] > 0 and record["seconds"] > 0
    assert record["removed"] == {"seconds": record["removed"]["seconds"], "failure": None}
    assert list(stage_dir.iterdir()) == []  # the copy, its temp name and its lock: all gone
    assert read_facts(run).stage_s == record["seconds"]  # compare's "stage s"
    size, took = bytes_text(record["bytes"]), f"{record['seconds']:.1f}"
    assert stage_line(run) == f"staged {size} to {copy} on 1 node in {took} s, removed after"


def test_a_kept_copy_stays_and_the_next_run_reuses_it(
    venv: Path, outputs: Path, stage_dir: Path
) -> None:
    flags = ("--stage=keep", "--stage-dir", str(stage_dir))
    first = _launch(venv, outputs, *flags)
    assert first.returncode == 0, first.stdout + first.stderr
    run1 = _only_run(outputs)
    copy = Path(json.loads(RunDir(run1).stage_json.read_text())["dest"])
    made = (copy / "pyvenv.cfg").stat().st_ino

    second = _launch(venv, outputs, *flags)
    assert second.returncode == 0, second.stdout + second.stderr
    run2 = _only_run(outputs, {run1})
    record = json.loads(RunDir(run2).stage_json.read_text())
    assert record["dest"] == str(copy) and record["reused"] is True
    assert "removed" not in record
    assert (copy / "pyvenv.cfg").stat().st_ino == made  # the same copy, not a new one
    assert {exe for exe, _ in _interpreters(run2)} == {str(copy / "bin" / "python")}
    assert sorted(p.name for p in stage_dir.iterdir()) == [copy.name, f"{copy.name}.lock"]
    assert stage_line(run2) == (
        f"staged: reused the kept copy {copy} on 1 node in {record['seconds']:.1f} s, kept"
    )


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_a_failed_copy_fails_the_launch_naming_the_node_and_starts_no_rank(
    venv: Path, outputs: Path, tmp_path: Path, fault: str
) -> None:
    with tmpfs(tmp_path / "node-local") as where:
        if fault == "full":
            fill(where)
            cause = "free, the environment needs"
        else:
            make_read_only(where)
            cause = "Read-only file system"
        proc = _launch(venv, outputs, "--stage", "--stage-dir", str(where))
        left = sorted(p.name for p in where.iterdir())
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in said
    run = _only_run(outputs)
    state = read_state(run)
    assert str(state.state) == "failed" and state.launcher_pid is None
    assert state.reason is not None
    assert f"staging the environment failed on {socket.gethostname()}: " in state.reason
    assert cause in state.reason and "no rank was started" in state.reason
    assert state.reason in said  # the CLI says it too
    assert read_statuses(run) == [] and RunDir(run).logs() == []
    assert left == (["filler"] if fault == "full" else [])
    assert (stage_line(run) or "").startswith(f"staging to {where}/ezpz-stage-{run.name} on 1 node")


def _said(run: Path, rank: int) -> dict[str, str]:
    """What a :data:`BARE` rank printed: its interpreter, prefix, VIRTUAL_ENV, PATH's python."""
    line = next(
        line for line in RunDir(run).log(rank).read_text().splitlines() if line.startswith("EXE")
    )
    words = line.split()
    return dict(zip(words[::2], words[1::2], strict=True))


def test_a_bare_python_runs_from_the_copy(venv: Path, outputs: Path, stage_dir: Path) -> None:
    proc = _launch(venv, outputs, "--stage", "--stage-dir", str(stage_dir), command=BARE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = _only_run(outputs)
    copy = json.loads(RunDir(run).stage_json.read_text())["dest"]
    for rank in (0, 1):
        said = _said(run, rank)
        assert said["EXE"] == said["WHICH"] == f"{copy}/bin/python"
        assert said["PREFIX"] == said["VENV"] == copy
    assert list(stage_dir.iterdir()) == []


@pytest.mark.parametrize(
    ("flags", "why_not"),
    [
        ((), "with --stage-min-nodes the launch goes on without the nodes that failed"),
        (
            ("--stage-min-nodes", "0.9"),
            "1 of 2 nodes have their copy, fewer than the 2 --stage-min-nodes asks for",
        ),
    ],
)
def test_a_node_that_cannot_copy_fails_the_launch_naming_it(
    venv: Path, outputs: Path, stage_dir: Path, tmp_path: Path, flags: tuple[str, ...], why_not: str
) -> None:
    """Two simulated nodes (:mod:`tests.fixtures.nodes`), vm2's disk full."""
    env = two_node_job(tmp_path, outputs, stage_dir, full="vm2")
    staging = ("--stage", "--stage-dir", str(stage_dir), *flags)
    proc = _launch(venv, outputs, *staging, command=BARE, env=env, ppn=1)
    said = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in said, said
    run = _only_run(outputs)
    state = read_state(run)
    assert str(state.state) == "failed" and state.reason is not None
    assert state.reason == (
        f"staging the environment failed on vm2: {stage_dir} has 0 B free, the environment "
        f"needs {bytes_text(json.loads(RunDir(run).stage_json.read_text())['bytes'])}; "
        f"no rank was started ({why_not})"
    )
    assert state.reason in said
    assert read_statuses(run) == [] and list(stage_dir.iterdir()) == []  # vm1's copy removed
    assert not (outputs / "bad_hosts.txt").exists()


def test_with_stage_min_nodes_the_launch_goes_on_without_the_node_that_cannot_copy(
    venv: Path, outputs: Path, stage_dir: Path, tmp_path: Path
) -> None:
    env = two_node_job(tmp_path, outputs, stage_dir, full="vm2")
    staging = ("--stage", "--stage-dir", str(stage_dir), "--stage-min-nodes", "1")
    proc = _launch(venv, outputs, *staging, command=BARE, env=env, ppn=1)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Traceback" not in said, said
    run = _only_run(outputs)
    record = json.loads(RunDir(run).stage_json.read_text())
    why = f"{stage_dir} has 0 B free, the environment needs {bytes_text(record['bytes'])}"
    line = f"staging failed on vm2: {why}; going on with 1 of 2 nodes: 2 → 1 ranks, DP 2 → 1"
    assert f"ezpz-tui: {line}\n" in proc.stderr
    assert f"ezpz-tui: {line}\n" in RunDir(run).launcher_log.read_text()
    # The run records the smaller plan it ran, and vm2 as a bad host with the reason.
    toml = read_run_toml(run)
    assert toml["hosts"] == ["vm1"] and toml["plan"]["exclude"] == ["vm2"]
    assert toml["sizes"]["world_size"] == 1 and toml["plan"]["stage_min_nodes"] == 1
    assert toml["stage_excluded"] == {"vm2": why}
    assert RunDir(run).hostfile.read_text() == "vm1\n"
    [listed] = (outputs / "bad_hosts.txt").read_text().splitlines()
    assert listed.startswith("vm2  # ") and listed.endswith(f"run {run.name}: staging: {why}")
    # The one rank ran on vm1, from vm1's copy, which is removed after.
    [status] = read_statuses(run)
    assert status.host == "vm1" and str(status.state) == "succeeded"
    rank = _said(run, 0)
    assert rank["HOST"] == "vm1" and rank["EXE"] == f"{record['dest']}/bin/python"
    assert rank["WHICH"] == rank["EXE"] and rank["VENV"] == record["dest"]
    assert record["excluded"] == {"vm2": why} and list(record["nodes"]) == ["vm1"]
    assert record["hosts"] == ["vm1"] and record["failure"] is None
    assert record["removed"]["failure"] is None and list(stage_dir.iterdir()) == []
    assert (stage_line(run) or "").endswith(
        "on 1 node in {:.1f} s, without vm2 (its copy failed: excluded), removed after".format(
            record["seconds"]
        )
    )


def _interruptible() -> None:
    """The launch as a terminal's foreground job, which Ctrl-C reaches: a suite run as a
    background job of a shell without job control has SIGINT ignored, and a child inherits
    that (Python then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("how", ["ctrl-c", "ezpz-tui stop"])
def test_a_stop_while_staging_stops_the_launch_and_removes_the_copy(
    tmp_path: Path, outputs: Path, stage_dir: Path, how: str
) -> None:
    """Ctrl-C, or ``ezpz-tui stop RUN`` from another terminal (SIGTERM to the launch), while the
    copy is under way: a venv with 1 GiB more to copy (a sparse file, written whole by the
    copy) gives it the time."""
    big = tmp_path / "big-venv"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(big)], check=True)
    with (big / "ballast.bin").open("wb") as fh:
        fh.truncate(2**30)
    env = base_env(outputs)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    argv = [str(big / "bin" / "python"), "-m", "ezpz_tui", "launch", "--quiet", "--ppn", "2"]
    argv += ["--stage", "--stage-dir", str(stage_dir), "--", "true"]
    env["PYTHONPATH"] = sysconfig.get_path("purelib")  # ezpz_tui, for the big venv's Python
    proc = subprocess.Popen(
        argv,
        env=env,
        cwd=REPO,
        start_new_session=True,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=_interruptible,
    )
    try:
        deadline = time.monotonic() + 120
        while not list(stage_dir.glob("*.tmp-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(stage_dir.glob("*.tmp-*")), "the copy never started"
        if how == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)  # the terminal signals the whole group
        else:
            stopped = cli(["stop", _only_run(outputs).name], base_env(outputs))
            assert stopped.returncode == 0, stopped.stdout + stopped.stderr
            assert "run stopped" in stopped.stderr
        said, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and "Traceback" not in said, said
    run = _only_run(outputs)
    state = read_state(run)
    assert str(state.state) == "stopped" and state.stopped_by_user and state.launcher_pid is None
    assert read_statuses(run) == [] and list(stage_dir.iterdir()) == []
    assert "stopped while staging the environment" in RunDir(run).launcher_log.read_text()


def test_a_run_left_to_its_tether_has_its_copy_removed_at_its_end(
    venv: Path, outputs: Path, stage_dir: Path
) -> None:
    """The TUI quit with "leave running": the tether records the end, then removes the copy."""
    from ezpz_tui.core.launching.allocation import detect_allocation
    from ezpz_tui.core.launching.plan import LaunchPlan
    from ezpz_tui.core.session import Session

    python = str(venv / "bin" / "python")
    here = str(Path(sys.executable).parent)  # mpiexec: the mpich wheel's
    session = Session(
        detect_allocation(), outputs, python=python, which=lambda n: shutil.which(n, path=here)
    )
    up = "import time; print('up', flush=True); time.sleep(3)"
    plan = LaunchPlan(ppn=2, command=(python, "-c", up), stage="on", stage_dir=str(stage_dir))
    session.launch(plan)
    handle = session.current
    assert handle is not None and str(handle.poll()) == "running", handle and handle.state
    run = handle.run_dir
    copy = Path(json.loads(RunDir(run).stage_json.read_text())["dest"])
    assert copy.is_dir()
    deadline = time.monotonic() + 60
    while not all("up" in _text(RunDir(run).log(r)) for r in (0, 1)):
        assert time.monotonic() < deadline, "the ranks never started"
        time.sleep(0.1)
    assert handle.detach()
    # The copy is gone from the node before the tether records its removal in stage.json.
    while read_state(run).live or "removed" not in json.loads(RunDir(run).stage_json.read_text()):
        assert time.monotonic() < deadline + 60, (read_state(run), list(stage_dir.iterdir()))
        time.sleep(0.1)
    assert list(stage_dir.iterdir()) == []
    state = read_state(run)
    assert str(state.state) == "succeeded" and state.supervisor_pid != os.getpid()
    assert json.loads(RunDir(run).stage_json.read_text())["removed"]["failure"] is None


def _text(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def _source_reads(traces: Path, source: Path) -> tuple[dict[str, set[str]], int]:
    """What the traces (``strace -ff -y``, one file a process) say of ``source``: each file
    under it opened, with the processes that opened it, and the bytes read from its files."""
    opened: dict[str, set[str]] = {}
    read = 0
    inside = f"{source}/"
    for trace in traces.iterdir():
        for line in trace.read_text(errors="replace").splitlines():
            got = re.match(r"^read\(\d+<(.*?)>, .*\) = (\d+)$", line)
            if got and got.group(1).startswith(inside):
                read += int(got.group(2))
            got = re.match(r"^openat\(.*\) = \d+<(.*?)>$", line)
            if got and got.group(1).startswith(inside) and "O_DIRECTORY" not in line:
                opened.setdefault(got.group(1)[len(inside) :], set()).add(trace.name)
    return opened, read


def test_nodes_get_identical_copies_from_one_read_of_the_source(tmp_path: Path) -> None:
    """``runtime.stage copy`` on three simulated nodes, every process of it traced: each file of
    the source is read by one process (the first node, making the pack), once; with the pack
    kept, by none; and every node's copy is the source, byte for byte. The source is a venv
    with 300 files more, one of them several pieces of the broadcast long."""
    tracer = strace()
    venv = tmp_path / "env"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    package = Path(sysconfig.get_path("purelib", vars={"base": str(venv)})) / "pkg"
    for index in range(300):
        (package / f"sub{index % 7}").mkdir(parents=True, exist_ok=True)
        (package / f"sub{index % 7}" / f"m{index}.py").write_bytes(os.urandom(index * 37))
    (package / "weights.bin").write_bytes(os.urandom(CHUNK * 2 + 12345))
    stage_dir = tmp_path / "node-local"
    stage_dir.mkdir()
    hosts = ("vm1", "vm2", "vm3")
    env = {**os.environ, **simulated_mpiexec(tmp_path, stage_dir, hosts)}
    pack = tmp_path / "cache" / "env.tar"
    copy = [sys.executable, "-m", "runtime.stage", "copy", "--source", str(venv), "--pack"]
    copy += [str(pack), "--dest", str(stage_dir / "copy"), "--python", "bin/python"]
    want = manifest(venv)
    files = {rel for rel, entry in want.items() if entry[0] == "f"}

    def staged(traces: Path) -> dict[str, dict]:
        traces.mkdir()
        argv = [tracer, "-f", "-ff", "-qq", "-y", "-s", "0", "-e", "signal=none"]
        argv += ["-e", "trace=openat,read", "-o", str(traces / "t")]
        argv += ["mpiexec", "-f", env["PBS_NODEFILE"], "-n", "3", "-ppn", "1", *copy]
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        lines = [line for line in done.stdout.splitlines() if line.startswith(MARK)]
        answers = {a["host"]: a for a in (json.loads(line[len(MARK) :]) for line in lines)}
        assert done.returncode == 0 and sorted(answers) == list(hosts), done.stdout + done.stderr
        assert all(a["ok"] and a["spread"] == "broadcast" for a in answers.values()), answers
        for host in hosts:
            node = node_disk(tmp_path, host) / "copy"
            assert manifest(node) == want
            assert all((node / rel).read_bytes() == (venv / rel).read_bytes() for rel in files)
        return answers

    made = staged(tmp_path / "made")
    opened, read = _source_reads(tmp_path / "made", venv)
    assert {rel: len(by) for rel, by in opened.items()} == dict.fromkeys(files, 1)
    assert read == size_of(want) and len(files) > 300
    assert [h for h, a in made.items() if "pack" in a] == ["vm1"]
    assert made["vm1"]["pack"] | {"seconds": 0} == {
        "path": str(pack),
        "bytes": pack.stat().st_size,
        "built": True,
        "source_read": size_of(want),
        "seconds": 0,
    }

    reused = staged(tmp_path / "reused")
    assert _source_reads(tmp_path / "reused", venv) == ({}, 0)
    assert reused["vm1"]["pack"]["built"] is False and reused["vm1"]["pack"]["source_read"] == 0


@pytest.mark.parametrize(
    ("failing", "flags"),
    [("vm2", ()), ("vm2", ("--stage-min-nodes", "2")), ("vm1", ("--stage-min-nodes", "2"))],
)
def test_a_node_whose_unpacking_fails_is_named(
    venv: Path,
    outputs: Path,
    stage_dir: Path,
    tmp_path: Path,
    failing: str,
    flags: tuple[str, ...],
) -> None:
    """Three simulated nodes, one of which has room for the bytes but not for the files: its
    unpacking fails halfway while the broadcast goes on to the others (vm1 is the node that
    reads the pack and sends it). Without ``--stage-min-nodes`` the launch fails naming it; with
    it, the launch goes on with the two nodes whose copies are the source."""
    hosts = ("vm1", "vm2", "vm3")
    env = two_node_job(tmp_path, outputs, stage_dir, few_inodes=failing, hosts=hosts)
    staging = ("--stage=keep", "--stage-dir", str(stage_dir), *flags)
    proc = _launch(venv, outputs, *staging, command=BARE, env=env, ppn=1)
    said = proc.stdout + proc.stderr
    assert "Traceback" not in said, said
    run = _only_run(outputs)
    record = json.loads(RunDir(run).stage_json.read_text())
    assert record["spread"] == "broadcast" and record["pack"]["bytes"] > 0
    left = [h for h in hosts if h != failing]
    if not flags:
        assert proc.returncode != 0, said
        why = record["nodes"][failing]["error"]
        state = read_state(run)
        assert state.reason == (
            f"staging the environment failed on {failing}: {why}; no rank was started (with "
            "--stage-min-nodes the launch goes on without the nodes that failed)"
        )
        assert state.reason in said and read_statuses(run) == []
    else:
        assert proc.returncode == 0, said
        why = record["excluded"][failing]
        line = f"staging failed on {failing}: {why}; going on with 2 of 3 nodes: 3 → 2 ranks"
        assert f"ezpz-tui: {line}, DP 3 → 2\n" in proc.stderr
        statuses = read_statuses(run)
        assert sorted(s.host for s in statuses) == left
        assert all(str(s.state) == "succeeded" for s in statuses)
        assert {_said(run, r)["EXE"] for r in (0, 1)} == {f"{record['dest']}/bin/python"}
    assert why.startswith(f"unpacking in {stage_dir}: ") and why.endswith(
        ": No space left on device"
    )
    for host in left:  # the nodes that unpacked have the source, kept
        assert manifest(node_disk(tmp_path, host) / Path(record["dest"]).name) == manifest(venv)
