"""``ezpz-tui launch`` and ``ezpz-tui info`` inside real ``salloc`` jobs on the local cluster.

Each test runs the CLI as salloc's command, the way a person types it in an interactive job, and
then reads what the run left on disk: ``run.toml`` (the srun argv), the rank logs, status files
and metrics. Needs ``scripts/slurm-local`` (Debian's slurm-wlm and munge, root); skipped where
they are missing. Both "nodes" are this host, so a rank's host name cannot tell them apart: the
node index Slurm gives each task (SLURM_NODEID, in the demo's describe line) and srun's own
``launching StepId=... on host nodeN`` lines do. The nodes have as many CPUs as this machine
(2 on the smallest CI box), so no test asks for more than 2 tasks per node.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ezpz_tui.core.runs.record import read_run_toml
from runtime.env import RANK_VARS, SIZE_VARS, _expand_counts, expand_nodelist
from runtime.rundir import RunDir
from tests.fixtures.runs import first_run_logged

if TYPE_CHECKING:
    from tests.fixtures.slurm import SlurmCluster

# A busy 2-core box runs other suites beside this one: allow for slow starts of torch and gloo.
pytestmark = [pytest.mark.slurm, pytest.mark.timeout(360)]

PY = sys.executable
TRAIN = [PY, "-m", "runtime.examples.train"]
LAUNCH_TIMEOUT_S = 240
# runtime.dist.DistInfo.describe(): "rank 1/2 (local 0, node 1, via pmi) on cpu with gloo; ..."
DESCRIBE = re.compile(r"rank (\d+)/(\d+) \(local (\d+), node (\d+), via (\w+)\)")
# srun --verbose names the node it starts each group of tasks on.
SRUN_LAUNCHING = re.compile(r"launching StepId=\S+ on host (\S+), (\d+) tasks?")
GRANTED = re.compile(r"Granted job allocation (\d+)")
# srun without --disable-status answers a first SIGINT with this and a status report only.
SRUN_STATUS_ONLY = "interrupt (one more within 1 sec to abort)"
# Reports which node it is on, through the same capture wrapper as any command.
WHERE = (
    "import os; print('ON', os.environ['SLURMD_NODENAME'], os.environ['SLURM_PROCID'], "
    "os.environ['SLURM_STEP_NUM_NODES'], flush=True)"
)


@dataclass
class Launch:
    proc: subprocess.CompletedProcess[str]
    outputs: Path

    @property
    def run_dirs(self) -> list[Path]:
        return _run_dirs(self.outputs)

    @property
    def run_dir(self) -> Path:
        dirs = self.run_dirs
        assert len(dirs) == 1, f"want one run directory, got {dirs}\n{self.explain()}"
        return dirs[0]

    def explain(self) -> str:
        """Everything that says why a launch went wrong, for assertion messages."""
        parts = [
            f"exit {self.proc.returncode}",
            f"--- stdout\n{self.proc.stdout[-4000:]}",
            f"--- stderr\n{self.proc.stderr[-4000:]}",
        ]
        for run_dir in self.run_dirs:
            for name in ("launcher.log", "state.json"):
                path = run_dir / name
                if path.is_file():
                    text = path.read_text("utf-8", "replace")[-3000:]
                    parts.append(f"--- {run_dir.name}/{name}\n{text}")
        return "\n".join(parts)


def _run_dirs(outputs: Path) -> list[Path]:
    return sorted(p for p in outputs.iterdir() if p.is_dir()) if outputs.is_dir() else []


def _salloc(salloc: list[str], minutes: int = 5) -> list[str]:
    return ["salloc", "--immediate=60", "-t", str(minutes), *salloc]


def _launch(
    cluster: SlurmCluster, tmp_path: Path, salloc: list[str], args: list[str], command: list[str]
) -> Launch:
    outputs = tmp_path / "outputs"
    argv = [*_salloc(salloc), PY, "-m", "ezpz_tui", "launch", *args, "--", *command]
    proc = cluster.run(
        argv, env={"EZPZ_OUTPUTS": str(outputs)}, timeout=LAUNCH_TIMEOUT_S, check=False
    )
    return Launch(proc, outputs)


def _launched_ok(launch: Launch) -> Path:
    assert launch.proc.returncode == 0, launch.explain()
    run_dir = launch.run_dir
    assert f"run succeeded ({run_dir.name})" in launch.proc.stderr, launch.explain()
    return run_dir


def _srun_argv(run_dir: Path) -> tuple[list[str], list[str]]:
    """(srun's own options, the program it starts) as run.toml recorded them."""
    argv = read_run_toml(run_dir)["launch"]["argv"]
    assert Path(argv[0]).name == "srun", argv
    cut = argv.index(PY)  # srun's options end where the rank's program begins
    return argv[1:cut], argv[cut:]


def _option(options: list[str], short: str | None, long: str) -> str | None:
    """An option's value in any spelling srun takes: -N2, -N 2, --nodes=2, --nodes 2."""
    for i, arg in enumerate(options):
        nxt = options[i + 1] if i + 1 < len(options) else None
        if arg == long or (short and arg == short):
            return nxt
        if arg.startswith(long + "="):
            return arg[len(long) + 1 :]
        if short and arg.startswith(short) and not arg.startswith("--") and len(arg) > 2:
            return arg[len(short) :]
    return None


def _nodelist(options: list[str]) -> list[str]:
    spec = _option(options, "-w", "--nodelist")
    assert spec is not None, f"srun got no node list: {options}"
    return expand_nodelist(spec)


def _describes(run_dir: Path, world: int) -> dict[int, tuple[int, int, str]]:
    """rank -> (local rank, node index, source) from each rank log's describe() line."""
    found: dict[int, tuple[int, int, str]] = {}
    for rank in range(world):
        text = (run_dir / "logs" / "b0000" / f"rank-{rank:05d}.log").read_text("utf-8", "replace")
        lines = [m for m in DESCRIBE.finditer(text) if int(m.group(1)) == rank]
        assert len(lines) == 1, f"rank {rank} log has no single describe line:\n{text[-3000:]}"
        m = lines[0]
        assert int(m.group(2)) == world, m.group(0)
        found[rank] = (int(m.group(3)), int(m.group(4)), m.group(5))
    return found


def _statuses(run_dir: Path) -> list[dict[str, Any]]:
    paths = sorted((run_dir / "status").glob("b0000/rank-*.json"))
    return [json.loads(p.read_text()) for p in paths]


def _metrics(run_dir: Path, rank: int) -> list[dict[str, Any]]:
    path = run_dir / "metrics" / "b0000" / f"rank-{rank:05d}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _launching_hosts(run_dir: Path) -> dict[str, int]:
    """host -> tasks srun says it started there (from --verbose in launcher.log)."""
    text = (run_dir / "launcher.log").read_text("utf-8", "replace")
    return {m.group(1): int(m.group(2)) for m in SRUN_LAUNCHING.finditer(text)}


# --- 1. one node, two ranks ------------------------------------------------------------------


def test_a_torchrun_script_runs_under_srun(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    """A bare init_process_group() script: srun gives it no torchrun variables, the capture
    wrapper derives them and the launch passes MASTER_ADDR/MASTER_PORT."""
    script = Path(__file__).resolve().parents[1] / "ranks" / "torchrun_plain.py"
    launch = _launch(
        slurm_cluster, tmp_path, ["-N1", "-n2"], ["--launcher", "srun"], [PY, str(script)]
    )
    run_dir = _launched_ok(launch)
    options, _program = _srun_argv(run_dir)
    export = _option(options, None, "--export") or ""
    assert "MASTER_ADDR=" in export and "MASTER_PORT=" in export, options
    for rank in (0, 1):
        log = (run_dir / "logs" / "b0000" / f"rank-{rank:05d}.log").read_text("utf-8", "replace")
        assert f"rank={rank} world=2 sum=3.0" in log, launch.explain() + log


def test_a_crashed_rank_under_srun_ends_the_job_with_every_rank_accounted_for(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    """Rank 1 exits 3 while rank 0 would sleep ten minutes: the job ends within seconds, rank 1
    is the run's cause and rank 0 was killed after it, whoever (srun or the supervisor) ended
    it first."""
    crash = (
        "import os, time; rank = int(os.environ['RANK']); print(f'rank {rank} up', flush=True)\n"
        "if rank == 1: time.sleep(1); os._exit(3)\n"
        "time.sleep(600)"
    )
    began = time.monotonic()
    launch = _launch(slurm_cluster, tmp_path, ["-N1", "-n2"], ["--ppn", "2"], [PY, "-c", crash])
    # Rank 0 would sleep 600 s; the job ends in seconds (about 2.5 s under mpiexec here).
    assert time.monotonic() - began < 60, launch.explain()
    assert launch.proc.returncode == 3, launch.explain()
    run_dir = launch.run_dir
    state = json.loads((run_dir / "state.json").read_text())
    assert (state["state"], state["failed_rank"]) == ("failed", 1), launch.explain()
    statuses = {s["rank"]: s for s in _statuses(run_dir)}
    assert (statuses[1]["state"], statuses[1]["exit_code"]) == ("failed", 3)
    assert (statuses[0]["state"], statuses[0]["cause"]) == ("killed", "after rank 1 failed")


def test_launch_one_node_two_ranks(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    launch = _launch(
        slurm_cluster, tmp_path, ["-N1", "-n2"], ["--ppn", "2"], [*TRAIN, "--steps", "10"]
    )
    run_dir = _launched_ok(launch)
    # The CLI followed rank 0's log to its end.
    assert "rank 0/2" in launch.proc.stdout and "step 9/10" in launch.proc.stdout

    meta = read_run_toml(run_dir)
    assert meta["scheduler"] == "SLURM"
    assert meta["job_id"] == GRANTED.search(launch.proc.stderr).group(1)
    assert meta["sizes"]["world_size"] == 2
    options, program = _srun_argv(run_dir)
    assert "--mpi=pmi2" in options
    assert _option(options, "-N", "--nodes") == "1"
    assert _option(options, "-n", "--ntasks") == "2"
    assert _nodelist(options) == [slurm_cluster.nodes[0]]
    # The demo is the launch's own Python: watched from its own interpreter, no wrapper.
    assert program == [*TRAIN, "--steps", "10"]
    assert f"EZPZ_CAPTURE_IN_PROCESS={run_dir}" in _option(options, None, "--export").split(",")
    assert json.loads((run_dir / "state.json").read_text())["state"] == "succeeded"

    logs = [p.name for p, _ in RunDir(run_dir).logs()]
    assert logs == ["rank-00000.log", "rank-00001.log"]
    statuses = _statuses(run_dir)
    assert [s["rank"] for s in statuses] == [0, 1]
    assert [(s["state"], s["exit_code"], s["world_size"]) for s in statuses] == [
        ("succeeded", 0, 2)
    ] * 2
    # Placement as the ranks saw it: both on node 0, local ranks 0 and 1, from srun's pmi2
    # (or Slurm's variables), never the single-process fallback.
    seen = _describes(run_dir, 2)
    assert [seen[r][:2] for r in (0, 1)] == [(0, 0), (1, 0)]
    assert {seen[r][2] for r in (0, 1)} <= {"pmi", "slurm"}, seen

    for rank in (0, 1):
        records = _metrics(run_dir, rank)
        assert [r["step"] for r in records] == list(range(10))
        assert {r["rank"] for r in records} == {rank}
        losses = [r["metrics"]["loss"] for r in records]
        assert all(loss == loss and loss > 0 for loss in losses), losses  # no NaN
        assert losses[-1] < losses[0] - 0.5, losses
        assert sum(losses[-3:]) < sum(losses[:3]), losses


# --- 2. info -----------------------------------------------------------------------------------


def test_info_json_inside_salloc(slurm_cluster: SlurmCluster) -> None:
    slurm_cluster.need_two_nodes()
    # The job's CPUs per node go to stderr first, to compare with what info makes of them.
    show_cpus = 'echo "CPUS=$SLURM_JOB_CPUS_PER_NODE" >&2; exec "$@"'
    argv = [*_salloc(["-N2", "-n2"], minutes=10), "bash", "-c", show_cpus, "sh"]
    proc = slurm_cluster.run([*argv, PY, "-m", "ezpz_tui", "info", "--json"], timeout=120)
    info = json.loads(proc.stdout)
    assert info["scheduler"] == "SLURM"
    assert info["job_id"] == GRANTED.search(proc.stderr).group(1)
    assert info["hosts"] == slurm_cluster.nodes[:2] == ["node1", "node2"]
    left = info["walltime_left_s"]
    assert left is not None and 0 < left <= 600, left
    assert left > 480, f"a 10-minute job that just started has {left}s left"
    # salloc's shell has no SLURM_CPUS_ON_NODE: the CPUs per host come from the job's counts
    # (one per node for -N2 -n2 on single-threaded cores), not from this process's affinity.
    counts = _expand_counts(re.search(r"CPUS=(\S+)", proc.stderr).group(1))
    assert counts and info["cpus_per_host"] == min(counts), (counts, info)


# --- 3. two nodes, one rank each ---------------------------------------------------------------


def test_launch_two_nodes_one_rank_each(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    slurm_cluster.need_two_nodes()
    nodes = slurm_cluster.nodes[:2]
    launch = _launch(
        slurm_cluster, tmp_path, ["-N2", "-n2"], ["--ppn", "1"], [*TRAIN, "--steps", "5"]
    )
    run_dir = _launched_ok(launch)

    options, _ = _srun_argv(run_dir)
    assert _option(options, "-N", "--nodes") == "2"
    assert _option(options, "-n", "--ntasks") == "2"
    assert _option(options, None, "--ntasks-per-node") == "1"
    assert _nodelist(options) == nodes
    assert "--mpi=pmi2" in options
    # The allocation has one CPU per node, so the step asks for no more than that.
    assert _option(options, "-c", "--cpus-per-task") == "1"

    # One task on each node, as srun itself reports and as each rank saw it.
    assert _launching_hosts(run_dir) == dict.fromkeys(nodes, 1)
    seen = _describes(run_dir, 2)
    assert [seen[r][:2] for r in (0, 1)] == [(0, 0), (0, 1)]  # (local rank, node index)
    statuses = _statuses(run_dir)
    assert [(s["rank"], s["state"], s["exit_code"]) for s in statuses] == [
        (0, "succeeded", 0),
        (1, "succeeded", 0),
    ]
    for rank in (0, 1):
        assert [r["step"] for r in _metrics(run_dir, rank)] == list(range(5))


# --- 4. a subset of the allocation -----------------------------------------------------------


@pytest.mark.parametrize(
    ("salloc", "args", "node", "overcommit"),
    [
        (["-N2", "-n4"], ["--nodes", "1"], 0, False),
        (["-N2", "-n4"], ["--exclude", "node1"], 1, False),
        # One CPU per node in the job, two ranks on one node: srun needs --overcommit.
        (["-N2", "-n2"], ["--nodes", "1"], 0, True),
    ],
    ids=["first-node", "exclude-node1", "overcommit"],
)
def test_launch_on_a_subset_of_the_nodes(
    slurm_cluster: SlurmCluster,
    tmp_path: Path,
    salloc: list[str],
    args: list[str],
    node: int,
    overcommit: bool,
) -> None:
    slurm_cluster.need_two_nodes()
    want = slurm_cluster.nodes[node]
    launch = _launch(slurm_cluster, tmp_path, salloc, [*args, "--ppn", "2"], [PY, "-c", WHERE])
    run_dir = _launched_ok(launch)

    options, _ = _srun_argv(run_dir)
    assert _option(options, "-N", "--nodes") == "1"
    assert _option(options, "-n", "--ntasks") == "2"
    assert _nodelist(options) == [want]
    assert read_run_toml(run_dir)["hosts"] == [want]
    assert _launching_hosts(run_dir) == {want: 2}
    for rank in (0, 1):
        text = (run_dir / "logs" / "b0000" / f"rank-{rank:05d}.log").read_text()
        assert f"ON {want} {rank} 1\n" in text, text
    assert [(s["state"], s["exit_code"]) for s in _statuses(run_dir)] == [("succeeded", 0)] * 2
    assert ("--overcommit" in options) is overcommit


# --- 5. dry run ----------------------------------------------------------------------------------


def test_dry_run_inside_salloc_starts_nothing(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    slurm_cluster.need_two_nodes()
    nodes = slurm_cluster.nodes[:2]
    launch = _launch(
        slurm_cluster,
        tmp_path,
        ["-N2", "-n2"],
        ["--dry-run", "--ppn", "1"],
        [*TRAIN, "--steps", "10"],
    )
    assert launch.proc.returncode == 0, launch.explain()
    out = json.loads(launch.proc.stdout)
    assert out["problems"] == []
    assert out["launcher"] == "srun"
    assert out["world_size"] == 2
    argv = out["argv"]
    assert Path(argv[0]).name == "srun"
    cut = argv.index(PY)
    options, program = argv[1:cut], argv[cut:]
    assert _option(options, "-N", "--nodes") == "2"
    assert _nodelist(options) == nodes
    assert "--mpi=pmi2" in options
    assert program == [*TRAIN, "--steps", "10"]
    watched = f"EZPZ_CAPTURE_IN_PROCESS={launch.outputs / '<run-id>'}"
    assert watched in _option(options, None, "--export").split(",")
    # Nothing started: no run directory (so no logs), no "run ..." line, no srun step output.
    assert launch.run_dirs == []
    assert "ezpz-tui: run" not in launch.proc.stderr
    assert "srun:" not in launch.proc.stderr + launch.proc.stdout


# --- 6. Ctrl-C stops a run under srun ------------------------------------------------------------


def _pids_of(run_dir: Path) -> list[int]:
    """Live processes of this run on this host (both "nodes" are this host); the finalizer
    that writes summary.json after the end reads the run but is none of its processes."""
    marks = (f"EZPZ_RUN_DIR={run_dir}".encode(), str(run_dir).encode())
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            stat = (entry / "stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] == "Z":
                continue
            env = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            if b"ezpz_tui.core.launching.finalize" in cmdline:
                continue
            if marks[0] in env or marks[1] in cmdline:
                pids.append(int(entry.name))
    return pids


def _kill_all(run_dir: Path, wait_s: float = 10) -> None:
    """SIGKILL what is left of a run (processes this test started) and wait until it is gone."""
    deadline = time.monotonic() + wait_s
    while (pids := _pids_of(run_dir)) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            if int(entry.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.parent.name))
    return found


def _log_tails(outputs: Path) -> str:
    parts = []
    for run in _run_dirs(outputs):
        for path in [run / "launcher.log", *(p for p, _ in RunDir(run).logs())]:
            if path.is_file():
                text = path.read_text("utf-8", "replace")[-3000:]
                parts.append(f"--- {path.relative_to(outputs)}\n{text}")
    return "\n".join(parts)


def _unused_mpich_shm(world: str) -> list[Path]:
    """MPICH's node-shared segments for a PMI world that no live process maps.

    MPICH names them ``mpich_shm_<FNV-1a of the PMI job id>_<node>``; srun's pmi2 job id is
    ``<job>.<step>``. A rank killed by SIGKILL never unlinks them, and the next world with the
    same id attaches the stale queues and dies in MPI_Init ("Message truncated"). A fresh local
    cluster numbers its jobs from 1 again, so a segment left here would break the same job of
    the next session (or of one running beside it).
    """
    digest = 2166136261
    for byte in world.encode():
        digest = ((digest ^ byte) * 16777619) & 0xFFFFFFFF
    shm = Path("/dev/shm")
    found = [*shm.glob(f"mpich_shm_{digest:x}_*"), *shm.glob(f"mpich_vci_{digest:x}_*")]
    if not found:
        return []
    mapped = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        with contextlib.suppress(OSError):
            text = maps.read_text()
            mapped.update(p for p in found if str(p) in text)
    return [p for p in found if p not in mapped]


def _cmdline(pid: int) -> bytes:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    return b""


def _wait_for(
    check: Callable[[], bool], timeout: float, what: str, explain: Callable[[], str]
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{explain()}")
        time.sleep(0.2)


@dataclass
class Stopped:
    code: int
    stdout: str
    stderr: str
    run_dir: Path
    left: list[int]
    leaked_shm: list[str]


@pytest.fixture(scope="module")
def stopped_run(
    slurm_cluster: SlurmCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stopped]:
    """A 2-rank srun launch interrupted the way Ctrl-C does it: SIGINT to ``ezpz-tui``."""
    tmp = tmp_path_factory.mktemp("stop")
    outputs = tmp / "outputs"
    train = [*TRAIN, "--steps", "100000", "--sleep", "0.2"]
    argv = [*_salloc(["-N1", "-n2"]), PY, "-m", "ezpz_tui", "launch", "--ppn", "2", "--", *train]
    env = slurm_cluster.environ({"EZPZ_OUTPUTS": str(outputs)})
    for name in (*RANK_VARS, *SIZE_VARS.values(), "EZPZ_RUN_DIR"):
        env.pop(name, None)
    with (tmp / "stdout").open("wb") as out, (tmp / "stderr").open("wb") as err:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=Path(__file__).resolve().parents[2],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,  # a Ctrl-C in pytest's terminal must not reach it
        )
    run_dir: Path | None = None
    try:

        def explain() -> str:
            parts = [f"salloc: {'running' if proc.poll() is None else f'exit {proc.returncode}'}"]
            parts += [
                f"--- {name}\n{(tmp / name).read_text('utf-8', 'replace')}"
                for name in ("stdout", "stderr")
            ]
            return "\n".join([*parts, _log_tails(outputs)])

        def stepped_or_ended() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"the launch ended before it could be stopped\n{explain()}")
            failed = [s for d in _run_dirs(outputs) for s in _statuses(d) if s["end"]]
            if failed:
                raise AssertionError(f"a rank ended before the stop: {failed}\n{explain()}")
            return first_run_logged(outputs, "step 1/")

        _wait_for(stepped_or_ended, LAUNCH_TIMEOUT_S, "rank 0 to log a training step", explain)
        (run_dir,) = _run_dirs(outputs)
        assert _pids_of(run_dir), "the running ranks are not visible"
        # Ctrl-C in a terminal reaches the CLI (salloc's foreground child); salloc itself is
        # left alone so that the job outlives the stop and the CLI's cleanup is what counts.
        (cli,) = [p for p in _children(proc.pid) if b"ezpz_tui" in _cmdline(p)]
        os.kill(cli, signal.SIGINT)
        code = proc.wait(timeout=120)
        stderr = (tmp / "stderr").read_text("utf-8", "replace")
        granted = GRANTED.search(stderr)
        world = f"{granted.group(1)}.0" if granted else None  # the job's first srun step
        yield Stopped(
            code,
            (tmp / "stdout").read_text("utf-8", "replace"),
            stderr,
            run_dir,
            _pids_of(run_dir),
            [p.name for p in _unused_mpich_shm(world)] if world else [],
        )
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for run in _run_dirs(outputs):
            _kill_all(run)
        # Whatever killed the ranks, leave no segment for the next job with this number.
        granted = GRANTED.search((tmp / "stderr").read_text("utf-8", "replace"))
        if granted:
            for path in _unused_mpich_shm(f"{granted.group(1)}.0"):
                path.unlink(missing_ok=True)


def test_ctrl_c_stops_an_srun_launch(stopped_run: Stopped) -> None:
    run = stopped_run
    assert run.code == 130, run.stderr
    assert "stopped (clean)" in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    assert "step 1/" in run.stdout
    state = json.loads((run.run_dir / "state.json").read_text())
    assert state["state"] == "stopped"
    assert state.get("stopped_by_user") is True
    assert state.get("stop_remaining") == []
    assert run.left == [], f"processes of the run still alive: {run.left}"


def test_ctrl_c_reaches_the_ranks_through_srun(stopped_run: Stopped) -> None:
    """A stop should end every rank through its wrapper, which records how it ended."""
    statuses = _statuses(stopped_run.run_dir)
    assert len(statuses) == 2
    launcher_log = (stopped_run.run_dir / "launcher.log").read_text("utf-8", "replace")
    assert "--disable-status" in _srun_argv(stopped_run.run_dir)[0]
    assert SRUN_STATUS_ONLY not in launcher_log, launcher_log[-2000:]
    assert stopped_run.leaked_shm == [], "ranks killed before MPI could clean up"
    for status in statuses:
        assert status["state"] == "stopped" and status["end"] is not None, status
        assert status.get("signal_name") in ("SIGINT", "SIGTERM") or status["exit_code"], status
