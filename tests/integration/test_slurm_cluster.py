"""Launching under a real (local) Slurm: what srun and salloc really hand to the ranks.

Needs ``scripts/slurm-local`` (Debian's slurm-wlm and munge, root); skipped where they are
missing. The cluster has two node names on this one host when the slurmd supports it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.fixtures.slurm import SlurmCluster


pytestmark = [pytest.mark.slurm, pytest.mark.timeout(180)]

MARK = "EZPZ-TASK "

# What one task reports: its Slurm/PMI variables, what runtime.env makes of them and, when asked,
# what MPI says (a world size and the sum of all ranks, to show the world really is connected).
# Each task writes its own file: srun may interleave the tasks' stdout mid-line.
TASK = """
import dataclasses, json, os, sys
from runtime.env import rank_info
keys = [k for k in os.environ if k.startswith(("SLURM", "PMI", "MPI_LOCAL"))]
out = {"env": {k: os.environ[k] for k in keys}}
info = rank_info()
out["rank_info"] = None if info is None else dataclasses.asdict(info)
if "--mpi" in sys.argv:
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    out["mpi_rank"], out["mpi_size"] = comm.rank, comm.size
    out["rank_sum"] = comm.allreduce(comm.rank)
path = os.path.join(sys.argv[1], "task-%s.json" % os.environ["SLURM_PROCID"])
with open(path + ".tmp", "w") as f:
    json.dump(out, f)
os.replace(path + ".tmp", path)
"""


def _tasks(
    cluster: SlurmCluster, tmp_path: Path, salloc: list[str], srun: list[str], mpi: bool
) -> list[dict]:
    out = tmp_path / "tasks"
    out.mkdir()
    argv = [
        "salloc", "--immediate=60", "-t", "5", *salloc,
        "srun", *srun, sys.executable, "-c", TASK, str(out), *(["--mpi"] if mpi else []),
    ]  # fmt: skip
    proc = cluster.run(argv)
    found = [json.loads(p.read_text()) for p in out.glob("task-*.json")]
    assert found, f"no task output\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
    return sorted(found, key=lambda t: int(t["env"]["SLURM_PROCID"]))


def test_cluster_is_up(slurm_cluster: SlurmCluster) -> None:
    assert slurm_cluster.env["SLURM_CONF"].endswith("slurm.conf")
    assert slurm_cluster.nodes
    states = slurm_cluster.run(["sinfo", "-h", "-N", "-o", "%N %T"]).stdout.split("\n")
    assert all(line.split()[1] in ("idle", "mixed", "allocated") for line in states if line)


def test_srun_pmi2_gives_mpi_world_of_two(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    tasks = _tasks(slurm_cluster, tmp_path, ["-N1", "-n2"], ["--mpi=pmi2"], mpi=True)
    assert len(tasks) == 2
    assert [t["env"]["SLURM_PROCID"] for t in tasks] == ["0", "1"]
    assert [t["mpi_rank"] for t in tasks] == [0, 1]
    assert [t["mpi_size"] for t in tasks] == [2, 2]
    assert [t["rank_sum"] for t in tasks] == [1, 1]
    # pmi2 hands out PMI_RANK/PMI_SIZE that agree with Slurm's numbering.
    assert [t["env"].get("PMI_RANK") for t in tasks] == ["0", "1"]
    assert {t["env"].get("PMI_SIZE") for t in tasks} == {"2"}


def test_srun_without_pmi_gives_mpi_worlds_of_one(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    # docs/pitfalls.md: no error, every rank alone in its world; only SLURM_NTASKS > 1 tells.
    tasks = _tasks(slurm_cluster, tmp_path, ["-N1", "-n2"], ["--mpi=none"], mpi=True)
    assert [t["env"]["SLURM_PROCID"] for t in tasks] == ["0", "1"]
    assert [t["mpi_size"] for t in tasks] == [1, 1]
    assert [t["mpi_rank"] for t in tasks] == [0, 0]
    assert {t["env"]["SLURM_NTASKS"] for t in tasks} == {"2"}
    assert not any("PMI_RANK" in t["env"] for t in tasks)


def test_rank_info_reads_srun(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    tasks = _tasks(slurm_cluster, tmp_path, ["-N1", "-n2"], ["--mpi=none"], mpi=False)
    infos = [t["rank_info"] for t in tasks]
    assert all(info is not None for info in infos), infos
    assert [i["source"] for i in infos] == ["slurm", "slurm"]
    assert [i["rank"] for i in infos] == [0, 1]
    assert [i["local_rank"] for i in infos] == [0, 1]
    assert [i["world_size"] for i in infos] == [2, 2]
    assert [i["local_world_size"] for i in infos] == [2, 2]
    assert [i["node_index"] for i in infos] == [0, 0]


def test_rank_info_reads_srun_pmi2_one_node(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    tasks = _tasks(slurm_cluster, tmp_path, ["-N1", "-n2"], ["--mpi=pmi2"], mpi=False)
    infos = [t["rank_info"] for t in tasks]
    assert [i["rank"] for i in infos] == [0, 1]
    assert [i["world_size"] for i in infos] == [2, 2]
    assert [i["local_rank"] for i in infos] == [0, 1]
    assert [i["node_index"] for i in infos] == [0, 0]


def test_two_nodes_one_rank_each(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    slurm_cluster.need_two_nodes()
    tasks = _tasks(slurm_cluster, tmp_path, ["-N2", "-n2"], ["--mpi=pmi2"], mpi=True)
    assert [t["env"]["SLURM_NODEID"] for t in tasks] == ["0", "1"]
    assert [t["env"]["SLURMD_NODENAME"] for t in tasks] == slurm_cluster.nodes[:2]
    assert [t["env"]["SLURM_LOCALID"] for t in tasks] == ["0", "0"]
    assert [t["mpi_size"] for t in tasks] == [2, 2]
    assert [t["rank_sum"] for t in tasks] == [1, 1]


def test_rank_info_reads_srun_two_nodes(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    slurm_cluster.need_two_nodes()
    tasks = _tasks(slurm_cluster, tmp_path, ["-N2", "-n4"], ["--mpi=none"], mpi=False)
    infos = [t["rank_info"] for t in tasks]
    assert [i["source"] for i in infos] == ["slurm"] * 4
    assert [i["rank"] for i in infos] == [0, 1, 2, 3]
    assert [i["local_rank"] for i in infos] == [0, 1, 0, 1]
    assert [i["local_world_size"] for i in infos] == [2, 2, 2, 2]
    assert [i["node_index"] for i in infos] == [0, 0, 1, 1]


def test_rank_info_reads_srun_pmi2_two_nodes(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    slurm_cluster.need_two_nodes()
    tasks = _tasks(slurm_cluster, tmp_path, ["-N2", "-n4"], ["--mpi=pmi2"], mpi=False)
    infos = [t["rank_info"] for t in tasks]
    assert [i["rank"] for i in infos] == [0, 1, 2, 3]
    assert [i["world_size"] for i in infos] == [4, 4, 4, 4]
    assert [i["local_rank"] for i in infos] == [0, 1, 0, 1]
    assert [i["local_world_size"] for i in infos] == [2, 2, 2, 2]
    assert [i["node_index"] for i in infos] == [0, 0, 1, 1]


# Run as salloc's command (no srun): what a job's own shell sees.
SHELL = f"""
import dataclasses, json, subprocess, os
from runtime.env import job_hosts, rank_info, scheduler
info = rank_info()
left = subprocess.run(["squeue", "-h", "-j", os.environ["SLURM_JOB_ID"], "-o", "%L"],
                      capture_output=True, text=True).stdout.strip()
seen = {{
    "rank_info": info and dataclasses.asdict(info),
    "scheduler": scheduler(),
    "hosts": job_hosts(),
    "left": left,
    "env": {{k: v for k, v in os.environ.items() if k.startswith("SLURM")}},
}}
print({MARK!r} + json.dumps(seen), flush=True)
"""


def test_salloc_shell_is_not_a_rank(slurm_cluster: SlurmCluster) -> None:
    n = min(2, len(slurm_cluster.nodes))
    proc = slurm_cluster.run(
        ["salloc", "--immediate=60", f"-N{n}", "-n2", "-t", "10", sys.executable, "-c", SHELL]
    )
    lines = [line.split(MARK, 1)[1] for line in proc.stdout.splitlines() if MARK in line]
    assert len(lines) == 1, proc.stdout + proc.stderr
    seen = json.loads(lines[0])
    # An allocation without a step: Slurm's variables describe the job, not this process.
    assert seen["rank_info"] is None
    assert "SLURM_PROCID" not in seen["env"] and "SLURM_STEP_ID" not in seen["env"]
    assert seen["scheduler"] == "SLURM"
    assert seen["hosts"] == slurm_cluster.nodes[:n]
    assert seen["env"]["SLURM_NTASKS"] == "2"
    # Walltime left, as squeue prints it for a 10-minute job that just started.
    assert re.fullmatch(r"10:00|9:[0-5]\d", seen["left"]), seen["left"]
