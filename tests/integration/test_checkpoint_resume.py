"""A run checkpointed at step 10 and resumed in another layout trains on as if never stopped.

Real mpiexec launches of the demo on 2 gloo ranks (4 for PP 2 x TP 2). Each source run trains 20
steps straight and saves every 5 (keeping 3); a resumed run loads step 10 in another layout (TP,
PP, CP, and PP x TP, from DP and from FSDP) and trains steps 10-19, whose loss and gradient norm
must equal the straight run's to 1e-5 relative (the layouts sum in other orders: float32
rounding, measured ~1e-7, is the only expected difference, as in test_parallel_equivalence.py).
A resume that lost the optimizer state, the data position or the step is off by 1e-2 or more
from the first resumed step. A save is written beside the steps after it: storage that holds
the write back shows the next step done before the write is.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.fixtures.cli import REPO
from tests.fixtures.mounts import fill, tmpfs

pytestmark = pytest.mark.mpi

STEPS, SAVED = 20, 10
RTOL = 1e-5
TINY = [
    "-m",
    "runtime.examples.train",
    *("--steps", str(STEPS), "--layers", "2", "--global-batch", "8", "--seq-len", "16"),
    *("--dim", "32", "--heads", "4", "--vocab", "32", "--dtype", "float32"),
]
SAVING = ["--checkpoint-every", "5", "--checkpoint-keep", "3"]
SLOW_WRITE = str(REPO / "tests" / "ranks" / "slow_checkpoint_write.py")


def _env(run_dir: Path) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("EZPZ_", "PMI_"))}
    return {**base, "EZPZ_RUN_DIR": str(run_dir), "EZPZ_DIST_TIMEOUT": "60", "OMP_NUM_THREADS": "1"}


def demo(mpiexec: str, args: list[str], run_dir: Path, ranks: int = 2) -> tuple[int, str]:
    proc = subprocess.run(
        [mpiexec, "-n", str(ranks), sys.executable, *TINY, *args],
        env=_env(run_dir),
        timeout=120,
        capture_output=True,
        text=True,
    )
    return proc.returncode, proc.stdout + proc.stderr


def records(run_dir: Path, rank: int = 0) -> list[dict]:
    path = run_dir / "metrics" / "b0000" / f"rank-{rank:05d}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def curve(run_dir: Path, rank: int = 0) -> dict[int, tuple[float, float]]:
    return {
        r["step"]: (r["metrics"]["loss"], r["metrics"]["grad_norm"]) for r in records(run_dir, rank)
    }


def source(mpiexec: str, root: Path, strategy: str) -> Path:
    run = root / strategy
    rc, output = demo(mpiexec, [*SAVING, "--strategy", strategy], run)
    assert rc == 0, output[-3000:]
    return run


@pytest.fixture(scope="module")
def ddp_run(mpiexec: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return source(mpiexec, tmp_path_factory.mktemp("ckpt"), "ddp")


@pytest.fixture(scope="module")
def fsdp_run(mpiexec: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return source(mpiexec, tmp_path_factory.mktemp("ckpt"), "fsdp")


def assert_continues(straight: Path, resumed: Path, first: int, rank: int = 0) -> None:
    want, got = curve(straight), curve(resumed, rank)
    assert sorted(got) == list(range(first, STEPS)), "the resumed run records its own steps"
    for step in range(first, STEPS):
        (loss, norm), (ref_loss, ref_norm) = got[step], want[step]
        assert math.isclose(loss, ref_loss, rel_tol=RTOL), f"step {step}: loss {loss} {ref_loss}"
        assert math.isclose(norm, ref_norm, rel_tol=RTOL), f"step {step}: norm {norm} {ref_norm}"


def test_saves_keep_the_newest_and_record_their_cost(ddp_run: Path) -> None:
    folder = ddp_run / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == ["step-10", "step-15", "step-20"]
    mark = json.loads((folder / "step-10" / "COMPLETE").read_text())
    assert mark["step"] == 10 and mark["sizes"] == {"pp": 1, "dp": 2, "cp": 1, "tp": 1}
    saves = [r["metrics"] for r in records(ddp_run) if "ckpt_save_s" in r["metrics"]]
    assert [int(m["ckpt_step"]) for m in saves] == [5, 10, 15]  # step 20's ends after the last
    assert all(m["ckpt_mb"] > 0.1 and m["ckpt_write_s"] >= m["ckpt_save_s"] for m in saves)


def recorded_steps(run_dir: Path) -> set[int]:
    """The steps rank 0 has written so far (a line still being written is left for later)."""
    path = run_dir / "metrics" / "b0000" / "rank-00000.jsonl"
    lines = path.read_text().splitlines(keepends=True) if path.is_file() else []
    return {json.loads(line)["step"] for line in lines if line.endswith("\n")}


def wait_until(done: Callable[[], bool], proc: subprocess.Popen, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not done():
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def held_back(
    mpiexec: str, run: Path, args: list[str], gate: Path, hold: Callable[[subprocess.Popen], None]
) -> tuple[int, str]:
    """The demo on 2 ranks over storage that holds each rank's first checkpoint file back
    (tests/ranks/slow_checkpoint_write.py, gated by ``gate``): ``hold(proc)`` runs meanwhile,
    then the writes are released; the exit code and the output."""
    with (gate.parent / f"{run.name}-output.log").open("w+") as log:
        proc = subprocess.Popen(
            [mpiexec, "-n", "2", sys.executable, SLOW_WRITE, *args],
            env={**_env(run), "WRITE_GATE": str(gate)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            hold(proc)
        finally:
            (gate / "release").touch()
            try:
                rc = proc.wait(timeout=60)
            finally:
                proc.kill()  # as subprocess.run does past its timeout; a no-op once it ended
        log.seek(0)
        return rc, log.read()


@pytest.mark.timeout(150)
def test_the_step_after_an_async_save_ends_before_its_write(mpiexec: str, tmp_path: Path) -> None:
    """Storage holds back each rank's first checkpoint file (tests/ranks/slow_checkpoint_write.py)
    until rank 0 has recorded step 5, the one after the save of step 5 (the demo's steps count
    from 0, its saves from 1), or for 20 s. Written beside the steps, the save lets step 5 run,
    start to end, before either rank's file is written; a synchronous save holds step 5 back
    until the writes end: then its record comes 20 s late, after them."""
    gate, run = tmp_path / "gate", tmp_path / "run"
    gate.mkdir()
    args = [*TINY[2:], "--steps", "8", "--checkpoint-every", "5"]

    def hold(proc: subprocess.Popen) -> None:
        held = lambda: all((gate / f"started-{r}").exists() for r in range(2))  # noqa: E731
        if wait_until(held, proc, 90):
            wait_until(lambda: 5 in recorded_steps(run), proc, 20)

    rc, output = held_back(mpiexec, run, args, gate, hold)
    assert rc == 0, output[-3000:]
    assert json.loads((run / "checkpoints" / "step-5" / "COMPLETE").read_text())["step"] == 5
    marks = sorted(p.name for p in gate.iterdir())
    assert marks == ["release", "started-0", "started-1", "written-0", "written-1"], marks
    started = min(float((gate / f"started-{r}").read_text()) for r in range(2))
    written = min(float((gate / f"written-{r}").read_text()) for r in range(2))
    step = next(r for r in records(run) if r["step"] == 5)
    begun, ended = step["timestamp"] - step["metrics"]["dt"], step["timestamp"]
    assert ended < written, (
        f"step 5 ran from {begun - started:+.2f} s to {ended - started:+.2f} s after the save's "
        f"write was held back; the first rank's write ended at {written - started:+.2f} s"
    )


@pytest.mark.timeout(150)
def test_tp1_to_tp2_from_the_run_skips_a_torn_checkpoint(
    ddp_run: Path, mpiexec: str, tmp_path: Path
) -> None:
    """The run is named, not a checkpoint: its newest complete one is loaded. Step 20's lost
    its mark and step 15's a shard, as a fault mid-save leaves them: step 15's is still
    complete, so the newest loadable is 15; with its mark gone too, 10."""
    copy = tmp_path / "parent"
    shutil.copytree(ddp_run, copy)
    (copy / "checkpoints" / "step-20" / "COMPLETE").unlink()
    (copy / "checkpoints" / "step-15" / "COMPLETE").unlink()
    (copy / "checkpoints" / "step-15" / "__1_0.distcp").write_bytes(b"torn")
    rc, output = demo(mpiexec, ["--tp", "2", "--resume", str(copy)], tmp_path / "tp2")
    assert rc == 0, output[-3000:]
    assert f"resumed at step {SAVED} from {copy / 'checkpoints' / 'step-10'}" in output
    assert "tp=1/2" in output
    assert_continues(ddp_run, tmp_path / "tp2", SAVED)


@pytest.mark.timeout(150)
def test_dp2_to_pp2(ddp_run: Path, mpiexec: str, tmp_path: Path) -> None:
    checkpoint = ddp_run / "checkpoints" / "step-10"
    rc, output = demo(mpiexec, ["--pp", "2", "--resume", str(checkpoint)], tmp_path / "pp2")
    assert rc == 0, output[-3000:]
    assert "stage 1/2 layers 1-1 +head" in output
    assert_continues(ddp_run, tmp_path / "pp2", SAVED)


@pytest.mark.timeout(150)
def test_dp2_to_cp2(ddp_run: Path, mpiexec: str, tmp_path: Path) -> None:
    checkpoint = ddp_run / "checkpoints" / "step-10"
    rc, output = demo(mpiexec, ["--cp", "2", "--resume", str(checkpoint)], tmp_path / "cp2")
    assert rc == 0, output[-3000:]
    assert "cp=1/2 dp=0/1 tokens 8-15 of 16" in output
    for rank in range(2):  # each holds half of every sequence: both record the whole loss
        assert_continues(ddp_run, tmp_path / "cp2", SAVED, rank)


@pytest.mark.timeout(150)
def test_dp2_to_pp2_by_tp2_on_4_ranks(ddp_run: Path, mpiexec: str, tmp_path: Path) -> None:
    """Each of the 4 ranks loads a quarter of the model the 2 DP ranks saved whole; ranks 2
    and 3 find no RNG state of theirs in the checkpoint."""
    checkpoint = ddp_run / "checkpoints" / "step-10"
    args = ["--pp", "2", "--tp", "2", "--resume", str(checkpoint)]
    rc, output = demo(mpiexec, args, tmp_path / "pp2xtp2", ranks=4)
    assert rc == 0, output[-3000:]
    assert "stage 1/2 layers 1-1 +head | shard tp=1/2" in output
    for rank in range(4):
        assert_continues(ddp_run, tmp_path / "pp2xtp2", SAVED, rank)


@pytest.mark.timeout(150)
def test_fsdp_dp2_to_tp2_from_the_environment(
    fsdp_run: Path, ddp_run: Path, mpiexec: str, tmp_path: Path
) -> None:
    """What a launch with --resume-from hands the ranks: EZPZ_RESUME_FROM, no flag."""
    checkpoint = fsdp_run / "checkpoints" / "step-10"
    run = tmp_path / "tp2"
    env = {**_env(run), "EZPZ_RESUME_FROM": str(checkpoint)}
    proc = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, *TINY, "--tp", "2"],
        env=env,
        timeout=120,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert_continues(fsdp_run, run, SAVED)
    assert_continues(ddp_run, run, SAVED)  # and FSDP trained what DDP did


@pytest.mark.timeout(150)
def test_a_checkpoint_of_another_model_is_refused(
    ddp_run: Path, mpiexec: str, tmp_path: Path
) -> None:
    checkpoint = ddp_run / "checkpoints" / "step-10"
    rc, output = demo(mpiexec, ["--dim", "64", "--resume", str(checkpoint)], tmp_path / "x")
    assert rc == 2, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: {checkpoint}: checkpoint is from a different model: shapes differ: "
        "blocks.0.attn_norm.bias is [32] in the checkpoint, [64] here, "
        "blocks.0.attn_norm.weight is [32] in the checkpoint, [64] here, "
        "blocks.0.down.bias is [32] in the checkpoint, [64] here (+26 more)"
    ]
    assert "Traceback" not in output
    assert not (tmp_path / "x" / "metrics").exists() or not records(tmp_path / "x")


@pytest.mark.timeout(150)
def test_a_data_file_cut_in_half_names_it_and_the_checkpoint_before(
    ddp_run: Path, mpiexec: str, tmp_path: Path
) -> None:
    """Step 20 is complete but rank 1's data file lost its second half (a copy cut short):
    the resume of the run names that file and step 15, the newest complete one before it,
    with the command that resumes from step 15 (this one, naming it in place of the run)."""
    copy = tmp_path / "parent"
    shutil.copytree(ddp_run, copy)
    data = copy / "checkpoints" / "step-20" / "__1_0.distcp"
    size = data.stat().st_size
    with open(data, "r+b") as fh:
        fh.truncate(size // 2)
    rc, output = demo(mpiexec, ["--resume", str(copy)], tmp_path / "again")
    assert rc == 2, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    before = copy / "checkpoints" / "step-15"
    command = " ".join([sys.executable, *TINY, "--resume", str(before)])
    assert errors == [
        f"error: {data} is cut short ({size // 2} of its {size} bytes); the newest earlier "
        f"complete checkpoint is step 15, {before}: resume from it with `ezpz-tui launch "
        f"--resume-from {before} -- {command}` (with this run's launch flags)"
    ]
    assert "Traceback" not in output


@pytest.mark.parametrize("case", ["only torn", "torn", "missing"])
def test_nothing_to_resume_is_refused_before_starting(
    case: str, mpiexec: str, tmp_path: Path
) -> None:
    target = {
        "only torn": tmp_path,
        "torn": tmp_path / "checkpoints" / "step-5",
        "missing": tmp_path / "gone",
    }[case]
    (tmp_path / "checkpoints" / "step-5").mkdir(parents=True)
    rc, output = demo(mpiexec, ["--resume", str(target)], tmp_path / "run")
    assert rc == 2, output[-3000:]
    want = {
        "only torn": f"error: {tmp_path}: no complete checkpoint (torn: step-5)",
        "torn": f"error: {target}: checkpoint is torn (no COMPLETE mark: its save never finished)",
        "missing": f"error: {target}: no such run or checkpoint",
    }[case]
    assert [line for line in output.splitlines() if line.startswith("error:")] == [want]


@pytest.mark.timeout(150)
def test_a_full_disk_during_a_save_keeps_the_previous_checkpoint(
    mpiexec: str, tmp_path: Path
) -> None:
    """A 2 MB tmpfs holds one checkpoint (1.1 MB) and not a second: the save of step 10 fails
    on every rank with one message, exit 2, and step 5's stays complete and loadable."""
    with tmpfs(tmp_path / "fs", "2m") as fs:
        run = fs / "run"
        rc, output = demo(mpiexec, ["--checkpoint-every", "5"], run)
        assert rc == 2, output[-3000:]
        errors = [line for line in output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, output[-3000:]
        assert errors[0].startswith(f"error: {run / 'checkpoints' / 'step-10'}: checkpoint save")
        assert "No space left on device" in errors[0]
        assert (run / "checkpoints" / "step-5" / "COMPLETE").is_file()
        assert not (run / "checkpoints" / "step-10" / "COMPLETE").exists()
        fill(fs)  # and a resume, which writes no checkpoint, still reads it
        rc, output = demo(mpiexec, ["--steps", "6", "--resume", str(run)], tmp_path / "again")
        assert rc == 0, output[-3000:]
        assert f"resumed at step 5 from {run / 'checkpoints' / 'step-5'}" in output
