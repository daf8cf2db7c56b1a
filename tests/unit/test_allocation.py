"""Allocation detection: the parsers on real tool output shapes, and whole machines by env."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from ezpz_tui.core.launching.allocation import (
    CPU_SLOTS,
    accelerators_from_env,
    count_listed_devices,
    detect_allocation,
    detect_machine,
    parse_duration,
    parse_nvidia_smi,
    parse_qstat_walltime,
    parse_rocm_smi,
    parse_squeue_time_left,
    parse_xpu_smi,
)
from runtime.env import expand_nodelist


@pytest.mark.parametrize(
    ("spec", "hosts"),
    [
        ("nid[001-002]", ["nid001", "nid002"]),
        ("nid[0098-0101]", ["nid0098", "nid0099", "nid0100", "nid0101"]),
        ("nid[001140-001141,001144]", ["nid001140", "nid001141", "nid001144"]),
        ("x3006c0s[13,19]b0n0", ["x3006c0s13b0n0", "x3006c0s19b0n0"]),
        ("x3006c0s13b0n0", ["x3006c0s13b0n0"]),
        ("a[1-2]b[3-4]", ["a1b3", "a1b4", "a2b3", "a2b4"]),
        ("sophia-gpu-[07-08]", ["sophia-gpu-07", "sophia-gpu-08"]),
        ("login-1x[1-2],nid[8,10]", ["login-1x1", "login-1x2", "nid8", "nid10"]),
        (
            "frontier[00001-00002],frontier00010",
            ["frontier00001", "frontier00002", "frontier00010"],
        ),
    ],
)
def test_nodelists_expand_in_order(spec: str, hosts: list[str]) -> None:
    assert expand_nodelist(spec) == hosts


@pytest.mark.parametrize("spec", ["nid[3-1]", "nid[001-", "nid[a-b]"])
def test_bad_nodelists_say_which_entry(spec: str) -> None:
    with pytest.raises(ValueError, match="nid"):
        expand_nodelist(spec)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1-02:03:04", 93784.0),
        ("02:03:04", 7384.0),
        ("72:00:00", 259200.0),
        ("03:04", 184.0),
        ("45", 45.0),
        ("0-00:00:30", 30.0),
        ("UNLIMITED", None),
        ("NOT_SET", None),
        ("INVALID", None),
        ("", None),
        ("1-", None),
        ("1:2:3:4", None),
    ],
)
def test_durations(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


def test_squeue_time_left_reads_first_line() -> None:
    assert parse_squeue_time_left("  1-00:00:00\n") == 86400.0
    assert parse_squeue_time_left("UNLIMITED\n") is None
    assert parse_squeue_time_left("") is None


def _qstat_text(stime: str | None) -> str:
    lines = [
        "Job Id: 1234567.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov",
        "    Job_Name = STDIN",
        "    resources_used.walltime = 00:10:00",
        "    job_state = R",
        "    Resource_List.walltime = 01:00:00",
        "    Resource_List.select = 2:system=polaris",
    ]
    if stime:
        lines.append(f"    stime = {stime}")
    return "\n".join(lines) + "\n"


def test_qstat_walltime_from_start_time() -> None:
    now = time.time()
    stime = time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now - 900))
    left = parse_qstat_walltime(_qstat_text(stime), now)
    assert left is not None and abs(left - 2700) < 2


def test_qstat_walltime_falls_back_to_used_walltime() -> None:
    assert parse_qstat_walltime(_qstat_text(None), time.time()) == 3000.0
    assert parse_qstat_walltime(_qstat_text("not a date"), time.time()) == 3000.0


def test_qstat_walltime_from_json() -> None:
    data = {
        "Jobs": {
            "42.aurora-pbs-0001": {
                "Resource_List": {"walltime": "02:00:00"},
                "resources_used": {"walltime": "00:30:00"},
            }
        }
    }
    assert parse_qstat_walltime(json.dumps(data), time.time()) == 5400.0


def test_qstat_without_walltime_is_unknown() -> None:
    assert parse_qstat_walltime("Job Id: 1\n    job_state = R\n", time.time()) is None
    assert parse_qstat_walltime('{"Jobs": {}}', time.time()) is None


def test_vendor_tool_listings() -> None:
    nvidia = "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-1)\nGPU 1: NVIDIA A100 (UUID: GPU-2)\n"
    mig = "GPU 0: NVIDIA A100 (UUID: GPU-1)\n  MIG 1g.5gb     Device  0: (UUID: MIG-1)\n"
    assert parse_nvidia_smi(nvidia) == 2
    assert parse_nvidia_smi(mig) == 1
    table = (
        "+-----------+------------------------------------------+\n"
        "| Device ID | Device Information                       |\n"
        "+-----------+------------------------------------------+\n"
        "| 0         | Device Name: Intel(R) Data Center GPU Max 1550 |\n"
        "|           | Vendor Name: Intel(R) Corporation        |\n"
        "| 1         | Device Name: Intel(R) Data Center GPU Max 1550 |\n"
    )
    assert parse_xpu_smi(table) == 2
    assert parse_xpu_smi(json.dumps({"device_list": [{"device_id": i} for i in range(6)]})) == 6
    rocm = "GPU[0]\t\t: Device ID: 0x740c\nGPU[0]\t\t: Device Rev: 0x01\nGPU[1]\t\t: Device ID: x\n"
    assert parse_rocm_smi(rocm) == 2
    assert count_listed_devices("0,1,2,3") == 4
    assert count_listed_devices("GPU-aaa,GPU-bbb") == 2
    assert count_listed_devices("0.0,0.1,1.0") == 3
    assert count_listed_devices("") == 0
    assert count_listed_devices("-1") == 0


@pytest.mark.parametrize(
    ("env", "host", "hosts", "machine"),
    [
        ({"NERSC_HOST": "perlmutter"}, "nid001140", (), "Perlmutter"),
        ({"LMOD_SYSTEM_NAME": "frontier"}, "frontier00001", (), "Frontier"),
        ({}, "frontier00001", (), "Frontier"),
        ({"PBS_O_HOST": "aurora-uan-0010.hostmgmt1000.cm.aurora.alcf.anl.gov"}, "x", (), "Aurora"),
        ({}, "x4102c5s2b0n0", (), "Aurora"),
        ({}, "x1921c0s0b0n0", (), "Sunspot"),
        ({}, "x3006c0s13b0n0", (), "Polaris"),
        ({"PBS_O_HOST": "sirius-login-01.alcf.anl.gov"}, "x3200c0s1b0n0", (), "Sirius"),
        ({}, "sophia-gpu-07", (), "Sophia"),
        ({}, "vm", ("x3006c0s13b0n0.hsn.cm.polaris.alcf.anl.gov",), "Polaris"),
        ({}, "x40", (), "x40"),  # a laptop called x40 is not an Aurora node
        ({}, "laptop.local", (), "laptop"),
    ],
)
def test_machine_names(
    env: dict[str, str], host: str, hosts: tuple[str, ...], machine: str
) -> None:
    assert detect_machine(env, host, hosts) == machine


def test_accelerator_override_and_hints() -> None:
    assert accelerators_from_env({"EZPZ_ACCELERATORS_PER_HOST": "cuda:4"}, "vm") == (
        "cuda",
        4,
        "EZPZ_ACCELERATORS_PER_HOST=cuda:4",
    )
    assert accelerators_from_env({"EZPZ_ACCELERATORS_PER_HOST": "6"}, "Aurora")[:2] == ("xpu", 6)
    assert accelerators_from_env({"EZPZ_ACCELERATORS_PER_HOST": "3"}, "vm")[:2] == ("cpu", 3)
    assert accelerators_from_env({"CUDA_VISIBLE_DEVICES": "0,1"}, "Sophia")[:2] == ("cuda", 2)
    assert accelerators_from_env({"ZE_AFFINITY_MASK": "0,1,2"}, "vm")[:2] == ("xpu", 3)
    assert accelerators_from_env({"ROCR_VISIBLE_DEVICES": "0"}, "vm")[:2] == ("rocm", 1)
    assert accelerators_from_env({"SLURM_GPUS_ON_NODE": "8"}, "Frontier")[:2] == ("rocm", 8)
    assert accelerators_from_env({"CUDA_VISIBLE_DEVICES": ""}, "vm") is None
    assert accelerators_from_env({"EZPZ_ACCELERATORS_PER_HOST": "lots"}, "vm") is None


def _nodefile(tmp_path: Path, hosts: list[str], repeat: int = 1) -> str:
    path = tmp_path / "nodefile"
    path.write_text("".join(f"{h}\n" for h in hosts for _ in range(repeat)))
    return str(path)


POLARIS = [f"x3006c0s{n}b0n0.hsn.cm.polaris.alcf.anl.gov" for n in (13, 19, 1)]


def test_polaris_job(tmp_path: Path) -> None:
    nodefile = _nodefile(tmp_path, POLARIS, repeat=2)  # a slot-per-line nodefile de-duplicates
    env = {"PBS_JOBID": "1234567.polaris-pbs-01.hsn.cm.polaris.alcf.anl.gov"}
    env["PBS_NODEFILE"] = nodefile
    alloc = detect_allocation(env, probe=False, host=POLARIS[0])
    assert alloc.scheduler == "PBS"
    assert alloc.job_id == env["PBS_JOBID"]
    assert alloc.machine == "Polaris"
    assert alloc.hosts == tuple(POLARIS)
    assert (alloc.accelerator_kind, alloc.accelerators_per_host) == ("cuda", 4)
    assert alloc.accelerator_source == "every Polaris node has 4"
    assert alloc.nodefile == nodefile
    assert alloc.walltime_left_s is None


def test_aurora_and_sunspot_have_twelve_xpu_tiles(tmp_path: Path) -> None:
    for host, machine in (("x4102c5s2b0n0", "Aurora"), ("x1921c0s0b0n0", "Sunspot")):
        env = {"PBS_JOBID": "8765.pbs", "PBS_NODEFILE": _nodefile(tmp_path, [host])}
        alloc = detect_allocation(env, probe=False, host="uan-0001")
        assert (alloc.machine, alloc.accelerator_kind, alloc.accelerators_per_host) == (
            machine,
            "xpu",
            12,
        )


def test_sophia_partial_node_uses_visible_devices(tmp_path: Path) -> None:
    env = {"PBS_JOBID": "99.sophia-pbs-01.lab.alcf.anl.gov", "CUDA_VISIBLE_DEVICES": "2,3"}
    env["PBS_NODEFILE"] = _nodefile(tmp_path, ["sophia-gpu-07.lab.alcf.anl.gov"])
    alloc = detect_allocation(env, probe=False)
    assert alloc.machine == "Sophia"
    assert (alloc.accelerator_kind, alloc.accelerators_per_host) == ("cuda", 2)
    assert alloc.accelerator_source == "CUDA_VISIBLE_DEVICES=2,3"


def test_perlmutter_and_frontier_jobs() -> None:
    now = time.time()
    perlmutter = {
        "SLURM_JOB_ID": "123",
        "SLURM_JOB_NODELIST": "nid[001140-001141,001144]",
        "NERSC_HOST": "perlmutter",
        "SLURM_GPUS_ON_NODE": "4",
        "SLURM_CPUS_ON_NODE": "128",
        "SLURM_JOB_END_TIME": str(int(now + 3600)),
    }
    alloc = detect_allocation(perlmutter, probe=False)
    assert (alloc.scheduler, alloc.job_id, alloc.machine) == ("SLURM", "123", "Perlmutter")
    assert alloc.hosts == ("nid001140", "nid001141", "nid001144")
    assert (alloc.accelerator_kind, alloc.accelerators_per_host) == ("cuda", 4)
    assert alloc.cpus_per_host == 128
    assert alloc.nodefile is None
    assert alloc.walltime_left_s is not None and 3590 < alloc.walltime_left_s <= 3601
    frontier = {
        "SLURM_JOB_ID": "456",
        "SLURM_JOB_NODELIST": "frontier[00001-00002]",
        "LMOD_SYSTEM_NAME": "frontier",
    }
    alloc = detect_allocation(frontier, probe=False)
    assert alloc.machine == "Frontier"
    assert (alloc.accelerator_kind, alloc.accelerators_per_host) == ("rocm", 8)


def test_bad_slurm_nodelist_falls_back_to_this_host() -> None:
    env = {"SLURM_JOB_ID": "1", "SLURM_JOB_NODELIST": "nid[3-1]"}
    assert detect_allocation(env, probe=False, host="nid000001").hosts == ("nid000001",)


def test_this_machine_really_probed() -> None:
    """No scheduler, no GPU tools here: a CPU host with two ranks, found quickly."""
    started = time.perf_counter()
    alloc = detect_allocation({}, probe=True, timeout_s=5.0)
    assert time.perf_counter() - started < 5.0
    assert alloc.scheduler == "none" and alloc.job_id is None
    assert len(alloc.hosts) == 1
    assert (alloc.accelerator_kind, alloc.accelerators_per_host) == ("cpu", CPU_SLOTS)
    assert alloc.walltime_left_s is None and alloc.walltime_left() is None
    assert alloc.cpus_per_host >= 1


def test_local_job_ignores_a_stray_pbs_nodefile(tmp_path: Path) -> None:
    env = {"PBS_NODEFILE": _nodefile(tmp_path, ["elsewhere1", "elsewhere2"])}
    alloc = detect_allocation(env, probe=False, host="laptop")
    assert (alloc.scheduler, alloc.hosts, alloc.nodefile) == ("none", ("laptop",), None)


def test_walltime_counts_down_from_the_reading() -> None:
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "nid1", "SLURM_JOB_END_TIME": "0"}
    alloc = detect_allocation(env, probe=False)
    checked = alloc.walltime_checked_at
    assert alloc.walltime_left_s is not None
    assert alloc.walltime_left(checked + 10) == pytest.approx(alloc.walltime_left_s - 10)


def _tool(bin_dir: Path, name: str, script: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)


def test_vendor_tool_and_scheduler_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real subprocesses: stand-in tools on PATH print what the real ones print."""
    _tool(tmp_path, "nvidia-smi", "echo 'GPU 0: NVIDIA A100 (UUID: a)'; echo 'GPU 1: NVIDIA A100'")
    _tool(tmp_path, "squeue", "echo '1-00:00:00'")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    env = {"SLURM_JOB_ID": "5", "SLURM_JOB_NODELIST": "gpu[01-02]"}
    alloc = detect_allocation(env, probe=True, host="gpu01")
    assert (alloc.accelerator_kind, alloc.accelerators_per_host) == ("cuda", 2)
    assert alloc.accelerator_source == "`nvidia-smi -L` lists 2"
    assert alloc.walltime_left_s == 86400.0


def test_a_hung_qstat_is_cut_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tool(tmp_path, "qstat", "exec sleep 300")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    env = {"PBS_JOBID": "1.pbs", "PBS_NODEFILE": _nodefile(tmp_path, ["x3006c0s13b0n0"])}
    started = time.perf_counter()
    alloc = detect_allocation(env, probe=True, timeout_s=0.5)
    # Cut off after its 0.5 s (about 0.50 s here), long before the 300 s qstat would take.
    assert time.perf_counter() - started < 10
    assert alloc.walltime_left_s is None
    assert alloc.machine == "Polaris"
