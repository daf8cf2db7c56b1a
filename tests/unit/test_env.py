"""Rank discovery and scheduler facts from launcher environments as each launcher writes them."""

from __future__ import annotations

import pytest

from runtime import env as renv


def _env(variables: str) -> dict[str, str]:
    """``"A=1 B=2"`` as an environment: a launcher's variables as ``env`` prints them."""
    return dict(item.split("=", 1) for item in variables.split())


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        (
            "RANK=3 LOCAL_RANK=1 WORLD_SIZE=8 LOCAL_WORLD_SIZE=2 GROUP_RANK=1",
            (3, 1, 8, 2, 1, "torchrun"),
        ),
        ("PMI_RANK=1 PMI_SIZE=2 MPI_LOCALRANKID=1 MPI_LOCALNRANKS=2", (1, 1, 2, 2, 0, "pmi")),
        (
            "PALS_RANKID=13 PALS_LOCAL_RANKID=1 PALS_NODEID=1 "
            "PMI_SIZE=24 PMI_LOCAL_SIZE=12 PMI_RANK=13",
            (13, 1, 24, 12, 1, "pals"),
        ),
        (
            "OMPI_COMM_WORLD_RANK=5 OMPI_COMM_WORLD_SIZE=8 OMPI_COMM_WORLD_LOCAL_RANK=1 "
            "OMPI_COMM_WORLD_LOCAL_SIZE=4 OMPI_COMM_WORLD_NODE_RANK=1",
            (5, 1, 8, 4, 1, "openmpi"),
        ),
        (
            "SLURM_PROCID=3 SLURM_LOCALID=1 SLURM_NTASKS=4 SLURM_NODEID=1 SLURM_STEP_ID=0 "
            "SLURM_TASKS_PER_NODE=2(x2)",
            (3, 1, 4, 2, 1, "slurm"),
        ),
    ],
    ids=["torchrun", "mpich-hydra-as-the-wheel-sets-them", "cray-pals", "open-mpi", "srun-task"],
)
def test_each_launchers_variables(variables: str, expected: tuple[int | str, ...]) -> None:
    assert renv.rank_info(_env(variables)) == renv.RankInfo(*expected)


def test_mpiexec_inside_slurm_trusts_pmi_not_slurm_procid() -> None:
    # Every rank of mpiexec inside a batch step sees SLURM_PROCID=0 (docs/pitfalls.md).
    env = _env("SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_STEP_ID=0 PMI_RANK=1 PMI_SIZE=2")
    assert renv.rank_info(env).rank == 1
    assert renv.rank_info(env).source == "pmi"


def test_salloc_shell_is_not_a_rank() -> None:
    # The shell salloc opens has job variables but no step: it is no task of a launch.
    assert renv.rank_info({"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "4"}) is None


@pytest.mark.parametrize(
    "env",
    [
        {"RANK": "2", "WORLD_SIZE": "2"},
        {"RANK": "x", "WORLD_SIZE": "2"},
        {"RANK": "0"},
        {"PMI_RANK": "0", "PMI_SIZE": "0"},
    ],
)
def test_nonsense_is_ignored(env: dict[str, str]) -> None:
    assert renv.rank_info(env) is None
    assert renv.rank_info_or_single(env) == renv.RankInfo(0, 0, 1, 1, 0, "none")


def test_sizes_from_env_defaults_and_bad_values() -> None:
    assert renv.sizes_from_env({"EZPZ_TP": "2", "EZPZ_PP": "bad", "EZPZ_CP": "-1"}) == {
        "tp": 2,
        "pp": 1,
        "cp": 1,
    }


@pytest.mark.parametrize(
    ("spec", "hosts"),
    [
        ("nid001", ["nid001"]),
        ("nid[001-003]", ["nid001", "nid002", "nid003"]),
        ("nid[008-010,015]", ["nid008", "nid009", "nid010", "nid015"]),
        ("a[1-2]b[3-4]", ["a1b3", "a1b4", "a2b3", "a2b4"]),
        (
            "x3006c0s13b0n0,x3006c0s19b[0-1]n0",
            ["x3006c0s13b0n0", "x3006c0s19b0n0", "x3006c0s19b1n0"],
        ),
        ("login-1x[1-2],gpu-2[09-10]", ["login-1x1", "login-1x2", "gpu-209", "gpu-210"]),
        ("frontier[00001-00002]", ["frontier00001", "frontier00002"]),
    ],
)
def test_expand_nodelist(spec: str, hosts: list[str]) -> None:
    assert renv.expand_nodelist(spec) == hosts


@pytest.mark.parametrize("spec", ["nid[001-", "nid[3-1]", "nid[a-b]"])
def test_expand_nodelist_rejects_with_a_message(spec: str) -> None:
    with pytest.raises(ValueError, match="host list"):
        renv.expand_nodelist(spec)


def test_pbs_job(tmp_path) -> None:
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("x3006c0s13b0n0\nx3006c0s13b0n0\nx3006c0s19b0n0\n\nx3006c0s19b0n0\n")
    env = {"PBS_JOBID": "123.polaris-pbs-01", "PBS_NODEFILE": str(nodefile)}
    assert renv.scheduler(env) == "PBS"
    assert renv.job_id(env) == "123.polaris-pbs-01"
    assert renv.job_hosts(env) == ["x3006c0s13b0n0", "x3006c0s19b0n0"]


def test_slurm_job_and_no_scheduler() -> None:
    env = {"SLURM_JOB_ID": "42", "SLURM_JOB_NODELIST": "nid[001-002]"}
    assert (renv.scheduler(env), renv.job_id(env)) == ("SLURM", "42")
    assert renv.job_hosts(env) == ["nid001", "nid002"]
    assert renv.scheduler({}) == "none"
    assert renv.job_hosts({}) == [renv.hostname()]


def test_srun_pmi2_fills_placement_from_the_step() -> None:
    # As seen under `salloc -N2 -n4; srun --mpi=pmi2`: PMI_RANK/PMI_SIZE but nothing per node.
    env = _env(
        "PMI_RANK=2 PMI_SIZE=4 SLURM_PROCID=2 SLURM_NTASKS=4 SLURM_LOCALID=0 SLURM_NODEID=1 "
        "SLURM_STEP_ID=0 SLURM_STEP_TASKS_PER_NODE=2(x2)"
    )
    assert renv.rank_info(env) == renv.RankInfo(2, 0, 4, 2, 1, "pmi")


def test_hydra_proxies_started_by_srun_do_not_lend_their_numbers() -> None:
    # mpiexec inside salloc: Hydra's proxies are srun tasks numbered by node, not by rank.
    env = _env(
        "PMI_RANK=3 PMI_SIZE=4 MPI_LOCALRANKID=1 MPI_LOCALNRANKS=2 "
        "SLURM_PROCID=1 SLURM_NTASKS=2 SLURM_LOCALID=0 SLURM_NODEID=1 SLURM_STEP_ID=0"
    )
    assert renv.rank_info(env) == renv.RankInfo(3, 1, 4, 2, 1, "pmi")
