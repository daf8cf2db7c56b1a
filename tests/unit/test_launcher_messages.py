"""The launcher's word parsed from sample logs: one sample per pattern family, in the shape each
launcher prints it (MPICH Hydra as the mpich wheel printed it here, PALS and srun as ezpz's
failover package quotes them from real Aurora, Polaris and Perlmutter jobs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ezpz_tui.core.watching.launcher_messages import (
    MAX_MESSAGES,
    PATTERNS,
    match_line,
    parse_text,
    read_messages,
)

HYDRA_LOG = """\

===================================================================================
=   BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES
=   PID 6616 RUNNING AT x3005c0s19b0n0
=   EXIT CODE: 9
=   CLEANING UP REMAINING PROCESSES
=   YOU CAN IGNORE THE BELOW CLEANUP MESSAGES
===================================================================================
YOUR APPLICATION TERMINATED WITH THE EXIT STRING: Killed (signal 9)
This typically refers to a problem with your application.
"""


def test_hydra_block_gives_the_host_pid_exit_and_signal() -> None:
    found = {m.kind: m for m in parse_text(HYDRA_LOG)}
    assert set(found) == {
        "hydra_bad_termination",
        "hydra_running_at",
        "hydra_exit_code",
        "hydra_exit_string",
    }
    running = found["hydra_running_at"]
    assert (running.host, running.pid, running.launcher) == ("x3005c0s19b0n0", 6616, "hydra")
    assert running.text == "PID 6616 RUNNING AT x3005c0s19b0n0"  # the '=' frame dropped
    assert found["hydra_exit_code"].exit_code == 9
    assert found["hydra_exit_string"].signal == 9
    assert found["hydra_running_at"].line == 4
    assert not any(m.node_fault for m in found.values())  # every Hydra failure looks like this


def test_hydra_killed_by_signal() -> None:
    message = match_line("=   KILLED BY SIGNAL: 9 (Killed)")
    assert message is not None and message.kind == "hydra_killed_by_signal"
    assert message.signal == 9


@pytest.mark.parametrize(
    ("line", "kind", "host", "rank", "signal", "code", "node_fault"),
    [
        (
            "x4102c7s1b0n0.hsn.cm.aurora.alcf.anl.gov: shepherd died from signal 9",
            "pals_shepherd_killed",
            "x4102c7s1b0n0.hsn.cm.aurora.alcf.anl.gov",
            None,
            9,
            None,
            True,
        ),
        (
            "x3006c0s19b1n0.hsn.cm.polaris.alcf.anl.gov: rank 0 died from signal 6 and dumped core",
            "pals_rank_signal",
            "x3006c0s19b1n0.hsn.cm.polaris.alcf.anl.gov",
            0,
            6,
            None,
            False,
        ),
        (
            "x3005c0s13b0n0.hsn.cm.polaris.alcf.anl.gov: rank 3 exited with code 1",
            "pals_rank_exit",
            "x3005c0s13b0n0.hsn.cm.polaris.alcf.anl.gov",
            3,
            None,
            1,
            False,
        ),
        ("application 8459818 exit codes: 139", "pals_exit_codes", None, None, None, 139, False),
        (
            "application 8459818 exit signals: Killed",
            "pals_exit_signals",
            None,
            None,
            None,
            None,
            False,
        ),
        (
            "srun: error: nid001321: tasks 4-7: Killed",
            "srun_task_killed",
            "nid001321",
            None,
            None,
            None,
            True,
        ),
        (
            "srun: error: nid001321: task 5: Killed",
            "srun_task_killed",
            "nid001321",
            5,
            None,
            None,
            True,
        ),
        (
            "srun: error: nid001320: task 2: Exited with exit code 3",
            "srun_task_exit",
            "nid001320",
            2,
            None,
            3,
            False,
        ),
        (
            "srun: error: nid001320: task 0: Out Of Memory",
            "srun_task_oom",
            "nid001320",
            0,
            None,
            None,
            False,
        ),
        (
            "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=57540936.0. Some of your "
            "processes may have been killed by the cgroup out-of-memory handler.",
            "slurm_oom_kill",
            None,
            None,
            None,
            None,
            False,
        ),
        (
            "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
            "slurm_step_aborted",
            None,
            None,
            None,
            None,
            False,
        ),
        (
            "slurmstepd: error: *** STEP 57540936.0 ON nid001320 CANCELLED AT "
            "2026-11-22T10:31:05 DUE TO TIME LIMIT ***",
            "slurm_time_limit",
            "nid001320",
            None,
            None,
            None,
            False,
        ),
        (
            "slurmstepd: error: *** JOB 57540936 ON nid001321 CANCELLED AT 2026-11-22T10:31:05 "
            "DUE TO NODE FAILURE, SEE SLURMCTLD LOG FOR DETAILS ***",
            "slurm_node_failure",
            "nid001321",
            None,
            None,
            None,
            True,
        ),
    ],
)
def test_launcher_lines(
    line: str,
    kind: str,
    host: str | None,
    rank: int | None,
    signal: int | None,
    code: int | None,
    node_fault: bool,
) -> None:
    message = match_line(line)
    assert message is not None, line
    assert (message.kind, message.host, message.rank) == (kind, host, rank)
    assert (message.signal, message.exit_code, message.node_fault) == (signal, code, node_fault)
    assert message.meaning


@pytest.mark.parametrize(
    ("line", "kind", "node_fault"),
    [
        (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "cuda_oom",
            False,
        ),
        ("RuntimeError: CUDA error: out of memory", "cuda_oom", False),
        ("UR_RESULT_ERROR_OUT_OF_RESOURCES", "cuda_oom", False),
        (
            "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
            "cuda_error",
            True,
        ),
        (
            "RuntimeError: CUDA error: CUDA-capable device(s) is/are busy or unavailable",
            "gpu_lost",
            True,
        ),
        (
            "Unable to determine the device handle for GPU 0000:07:00.0: GPU is lost.",
            "gpu_lost",
            True,
        ),
        (
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
            "unhandled system error",
            "nccl_error",
            True,
        ),
        (
            "x3005c0s13b0n0:12345:12399 [0] NCCL WARN NET/IB : Got completion with error 12",
            "nccl_warn",
            False,
        ),
        (
            "[rank1]:[E1125 10:31:05 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=52, OpType=ALLREDUCE) ran for 600000 milliseconds",
            "collective_timeout",
            False,
        ),
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed "
            "by peer [10.201.3.14]:41234",
            "gloo_peer_closed",
            False,
        ),
        ("Fatal Python error: Bus error", "bus_error", True),
        ("/bin/sh: line 1: 4242 Bus error (core dumped) python train.py", "bus_error", True),
        ("Fatal Python error: Segmentation fault", "segfault", False),
        ("OSError: [Errno 28] No space left on device", "no_space", False),
        ("OSError: [Errno 122] Disk quota exceeded: 'ckpt.pt'", "no_space", False),
        ("terminate called after throwing an instance of 'std::bad_alloc'", "bad_alloc", False),
    ],
)
def test_crash_lines_anywhere(line: str, kind: str, node_fault: bool) -> None:
    message = match_line(line, source="logs/rank-00001.log", line=7)
    assert message is not None, line
    assert (message.kind, message.node_fault, message.launcher) == (kind, node_fault, "any")
    assert (message.source, message.line) == ("logs/rank-00001.log", 7)


def test_a_pals_label_names_the_host_and_rank_of_a_crash_line() -> None:
    line = (
        "x3005c0s31b1n0.hsn.cm.polaris.alcf.anl.gov 1: torch.AcceleratorError: CUDA error: "
        "CUDA-capable device(s) is/are busy or unavailable"
    )
    message = match_line(line)
    assert message is not None and message.kind == "gpu_lost"
    assert (message.host, message.rank) == ("x3005c0s31b1n0.hsn.cm.polaris.alcf.anl.gov", 1)


def test_the_gloo_peer_is_the_host_named() -> None:
    message = match_line("Connection closed by peer [10.201.3.14]:41234")
    assert message is not None and message.host == "10.201.3.14"


@pytest.mark.parametrize(
    "line",
    [
        "step 12/100 loss=2.31",
        "srun: error: nid001320: tasks 0-3: Terminated",  # the normal teardown, not a fault
        "NCCL INFO Bootstrap : Using hsn0",
        "Using CUDA device 0",
        "",
    ],
)
def test_ordinary_lines_are_not_messages(line: str) -> None:
    assert match_line(line) is None


def test_ansi_colour_does_not_hide_a_message() -> None:
    message = match_line("\x1b[1;31mFatal Python error: Segmentation fault\x1b[0m")
    assert message is not None and message.kind == "segfault"
    assert "\x1b" not in message.text


def test_a_cascade_is_told_once_and_capped() -> None:
    cascade = "".join(f"srun: error: nid{n:06d}: task {n}: Killed\n" for n in range(500))
    repeated = "Fatal Python error: Segmentation fault\n" * 20
    assert len(parse_text(repeated)) == 1
    assert len(parse_text(cascade)) == MAX_MESSAGES


def test_every_pattern_has_a_sample_here() -> None:
    """A row added to the table without a sample in this file fails here."""
    text = Path(__file__).read_text()
    missing = [p.kind for p in PATTERNS if f'"{p.kind}"' not in text]
    assert not missing


def test_read_messages_reads_the_end_of_a_big_log(tmp_path: Path) -> None:
    log = tmp_path / "launcher.log"
    log.write_bytes(b"x" * 300_000 + b"\n\xff\xfe broken bytes\n" + HYDRA_LOG.encode())
    kinds = [m.kind for m in read_messages(log, "launcher.log")]
    assert "hydra_running_at" in kinds
    assert read_messages(tmp_path / "missing.log", "launcher.log") == []
