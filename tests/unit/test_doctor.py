"""The doctor on this machine for real: mpi4py, the mpich wheel's mpiexec and torch are here.

Two runs use the real probes (torch's import dominates them); the rest pass ``/bin/false`` as the
Python, which makes the probes fail at once, to test the checks that do not need them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ezpz_tui.core.checking.check import (
    Check,
    Context,
    Verdict,
    declare,
    ok,
    timed_out,
    warning,
)
from ezpz_tui.core.checking.doctor import CHECKS, run_checks, worst_level
from ezpz_tui.core.checking.environment import nested_launcher
from ezpz_tui.core.checking.mpi import mpi_family
from ezpz_tui.core.launching.allocation import detect_allocation
from ezpz_tui.core.launching.plan import LaunchPlan
from tests.fixtures.mounts import tmpfs

NAMES = [
    "mpi4py",
    "launcher",
    "scheduler",
    "torch",
    "backend",
    "rank python",
    "hostfile",
    "outputs",
    "staging",
    "rank env",
    "torchrun env",
    "walltime",
    "wandb",
]
NO_PYTHON = "/bin/false"


@pytest.fixture(autouse=True)
def _venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in an activated venv: its mpiexec (the mpich wheel's) first on PATH. CI calls
    .venv/bin/python directly, so without this the launcher row would depend on the runner."""
    bin_dir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ.get("PATH", ""))


def by_name(rows: list[Check]) -> dict[str, Check]:
    assert [r.name for r in rows] == NAMES
    return {r.name: r for r in rows}


def read_only_dir(tmp_path: Path) -> Path:
    """A directory nobody may write in; root ignores modes, but not sysfs."""
    if os.geteuid() == 0:
        return Path("/sys/ezpz-doctor-outputs")
    path = tmp_path / "read-only"
    path.mkdir()
    path.chmod(0o555)
    return path / "outputs"


def test_doctor_on_this_machine_is_healthy(tmp_path: Path) -> None:
    env = dict(os.environ)
    env.pop("PBS_NODEFILE", None)
    env["WANDB_MODE"] = "offline"  # wandb is installed (the trackers extra); no login here
    alloc = detect_allocation(env, probe=False)
    # How long the checks take is bench/tui_bench.py's (start-up to the doctor's result).
    rows = by_name(run_checks(alloc, outputs=tmp_path / "outputs", env=env))
    assert {name: row.level for name, row in rows.items()} == dict.fromkeys(NAMES, "ok"), rows
    assert "MPICH" in rows["mpi4py"].reason
    assert rows["launcher"].reason == (
        f"mpiexec at {Path(sys.executable).parent / 'mpiexec'} (MPICH)."
    )
    assert rows["torch"].reason.startswith("torch 2.")
    assert rows["backend"].reason.startswith("gloo")
    assert f"can be created in {tmp_path}" in rows["outputs"].reason
    assert worst_level(list(rows.values())) == "ok"


def test_doctor_finds_what_is_wrong(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    here = socket.gethostname()
    monkeypatch.setenv("MASTER_ADDR", "10.1.2.3")
    monkeypatch.setenv("MASTER_PORT", "29500")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    fake_site = tmp_path / "site"
    (fake_site / "wandb").mkdir(parents=True)
    (fake_site / "wandb" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(fake_site))
    env = dict(os.environ)
    env.update(
        SLURM_JOB_ID="77",
        SLURM_JOB_NODELIST=here,
        SLURM_JOB_END_TIME=str(int(time.time()) + 300),
        EZPZ_ACCELERATORS_PER_HOST="cuda:4",
    )
    alloc = detect_allocation(env, probe=False)
    nested = ("torchrun", "--nproc-per-node", "4", "train.py")
    plan = LaunchPlan(ppn=4, launcher="mpiexec", command=nested)
    rows = by_name(run_checks(alloc, plan, outputs=read_only_dir(tmp_path), env=env))
    levels = {name: row.level for name, row in rows.items()}
    assert levels == {
        "mpi4py": "ok",
        "launcher": "ok",
        "scheduler": "ok",
        "torch": "error",
        "backend": "warning",
        "rank python": "ok",  # the venv's torchrun names this Python
        "hostfile": "ok",
        "outputs": "error",
        "staging": "ok",
        "rank env": "warning",
        "torchrun env": "warning",
        "walltime": "warning",
        "wandb": "warning",
    }, rows
    assert "but the hosts have 4 cuda accelerators" in rows["torch"].reason
    assert rows["backend"].reason.startswith("Collectives fall back to gloo")
    assert rows["outputs"].reason.startswith("Cannot write in ")
    assert rows["rank env"].reason.startswith("MASTER_ADDR=10.1.2.3, MASTER_PORT=29500 set")
    assert "ezpz-tui removes them" in rows["rank env"].reason
    assert rows["rank env"].remedy == "unset MASTER_ADDR MASTER_PORT"
    assert rows["walltime"].reason in (
        "Only 5 minutes of walltime left.",
        "Only 4 minutes of walltime left.",
    )
    assert rows["wandb"].remedy == "wandb login, or export WANDB_MODE=offline."
    assert rows["torchrun env"].reason.startswith(
        "The command starts its own launcher (torchrun) and mpiexec with 4 ranks per node"
    )
    assert rows["torchrun env"].remedy.startswith("Run the script itself (python train.py)")
    assert worst_level(list(rows.values())) == "error"


def test_wandb_credentials_in_netrc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    netrc_file = tmp_path / ".netrc"
    netrc_file.write_text("machine api.wandb.ai\n  login user\n  password abc123\n")
    netrc_file.chmod(0o600)
    (tmp_path / "site" / "wandb").mkdir(parents=True)
    (tmp_path / "site" / "wandb" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    rows = by_name(
        run_checks(detect_allocation({}, probe=False), outputs=tmp_path, python=NO_PYTHON)
    )
    assert rows["wandb"] == Check(
        "wandb", "ok", "wandb is installed and ~/.netrc has api.wandb.ai."
    )
    assert rows["mpi4py"].level == "error"
    assert "printed nothing" in rows["mpi4py"].reason


def _pbs_env(tmp_path: Path, hosts: list[str]) -> dict[str, str]:
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("".join(f"{h}\n" for h in hosts))
    return {"PBS_JOBID": "1.pbs", "PBS_NODEFILE": str(nodefile)}


def _fast(alloc, env: dict[str, str], tmp_path: Path) -> dict[str, Check]:
    rows = run_checks(alloc, outputs=tmp_path, env=env, python=NO_PYTHON, which=lambda _: None)
    return by_name(rows)


def test_pbs_hostfile_checks(tmp_path: Path) -> None:
    here = socket.gethostname()
    env = _pbs_env(tmp_path, [here, "x1001"])
    alloc = detect_allocation(env, probe=False)
    rows = _fast(alloc, env, tmp_path)
    assert rows["hostfile"].level == "ok"
    assert rows["scheduler"].reason.startswith("PBS job 1.pbs on ")
    assert rows["walltime"].reason == "Could not read the walltime left from PBS."
    # no MPI launcher on this PBS node: auto still means mpiexec, never a silent torchrun
    assert (rows["launcher"].level, rows["launcher"].reason) == ("error", "mpiexec is not on PATH.")
    assert rows["mpi4py"].level == "error"

    elsewhere = _pbs_env(tmp_path, ["x1000", "x1001"])
    rows = _fast(detect_allocation(elsewhere, probe=False), elsewhere, tmp_path)
    assert rows["hostfile"].level == "warning"
    assert (
        rows["hostfile"].reason
        == f"This host ({here.split('.')[0]}) is not one of the job's 2 hosts."
    )

    # Node-local, so the other host cannot read rank logs; large enough to warn of nothing else.
    with tmpfs(tmp_path / "local", size="8g") as local:
        outputs = local / "ezpz-outputs"
        rows = by_name(run_checks(alloc, outputs=outputs, python=NO_PYTHON, env=env))
    assert rows["outputs"].level == "warning"
    assert f"{local} is on tmpfs, which the other host cannot see" in rows["outputs"].reason

    Path(env["PBS_NODEFILE"]).unlink()
    rows = _fast(alloc, env, tmp_path)
    assert rows["hostfile"].level == "error"
    assert rows["hostfile"].reason.startswith(f"Cannot read PBS_NODEFILE {env['PBS_NODEFILE']}")


def test_stray_nodefile_and_login_node(tmp_path: Path) -> None:
    env = {"PBS_NODEFILE": "/var/spool/pbs/aux/1.pbs"}
    rows = _fast(detect_allocation(env, probe=False, host="laptop"), env, tmp_path)
    assert rows["hostfile"].level == "warning"
    assert rows["hostfile"].remedy == "unset PBS_NODEFILE"
    login = detect_allocation({}, probe=False, host="polaris-login-02")
    rows = _fast(login, {}, tmp_path)
    assert rows["scheduler"].level == "warning"
    assert "Polaris login node" in rows["scheduler"].reason


def test_probes_that_run_out_of_time_are_warnings(tmp_path: Path) -> None:
    alloc = detect_allocation({}, probe=False)
    started = time.perf_counter()
    rows = by_name(run_checks(alloc, outputs=tmp_path, timeout_s=0.01))
    assert time.perf_counter() - started < 5
    for name in ("mpi4py", "launcher", "torch", "backend"):
        assert rows[name].level == "warning"
        assert rows[name].reason == "The check did not finish within 0.01 s."
    assert rows["outputs"].level == "ok"


def test_a_crashing_check_is_an_error_row(tmp_path: Path) -> None:
    def broken_which(name: str) -> str | None:
        raise RuntimeError(f"cannot look up {name}")

    rows = run_checks(
        detect_allocation({}, probe=False),
        outputs=tmp_path,
        python=NO_PYTHON,
        which=broken_which,
    )
    named = by_name(rows)
    for name in ("mpi4py", "launcher"):
        assert named[name].level == "error"
        assert named[name].reason == "The check crashed: RuntimeError: cannot look up mpiexec"


@pytest.mark.parametrize(
    ("text", "family"),
    [
        ("HYDRA build details:\n    Version: 5.0.2", "MPICH"),
        ("MPICH Version:      5.0.2\nMPICH Release date", "MPICH"),
        ("mpiexec (OpenRTE) 4.1.5", "Open MPI"),
        ("Open MPI v5.0.3, package: Open MPI", "Open MPI"),
        ("MPI VERSION    : CRAY MPICH version 8.1.28.15 (ANL base 3.4a2)", "Cray MPICH"),
        ("Intel(R) MPI Library 2021.13 for Linux* OS", "Intel MPI"),
        ("something else", None),
    ],
)
def test_mpi_families(text: str, family: str | None) -> None:
    assert mpi_family(text) == family


def test_every_row_is_declared_once_in_display_order() -> None:
    assert [name for check in CHECKS for name in check.names] == NAMES


def test_a_declared_check_names_its_rows_and_never_raises(tmp_path: Path) -> None:
    ctx = Context(
        detect_allocation({}, probe=False), None, tmp_path, 0.5, {}, NO_PYTHON, lambda _: None
    )
    both = declare("a", "b")(lambda _: (ok("fine"), warning("odd", "look")))
    assert both.rows(ctx) == [Check("a", "ok", "fine"), Check("b", "warning", "odd", "look")]

    one_for_two = declare("a", "b")(lambda _: ok("one verdict for two rows"))
    assert [(r.name, r.level) for r in one_for_two.rows(ctx)] == [("a", "error"), ("b", "error")]

    def slow(_: Context) -> Verdict:
        raise subprocess.TimeoutExpired("probe", 0.5)

    assert declare("a", "b")(slow).rows(ctx) == [
        Check(name, "warning", "The check did not finish within 0.5 s.", timed_out(0.5).remedy)
        for name in ("a", "b")
    ]


@pytest.mark.parametrize(
    ("command", "launcher"),
    [
        (("torchrun", "--nproc-per-node=4", "train.py"), "torchrun"),
        (("/opt/conda/bin/torchrun", "train.py"), "torchrun"),
        (("python3", "-m", "torch.distributed.run", "train.py"), "torchrun"),
        (("accelerate", "launch", "train.py"), "accelerate launch"),
        (("lightning", "run", "model", "train.py"), "lightning run"),
        (("mpiexec", "-n", "2", "python", "train.py"), "mpiexec"),
        (("accelerate", "config"), None),
        (("python", "train.py"), None),
        (("python", "-m", "runtime.examples.train"), None),
        (("python", "-m"), None),
    ],
)
def test_a_command_that_starts_its_own_launcher(command: tuple[str, ...], launcher: str) -> None:
    assert nested_launcher(command) == launcher


def test_torchrun_env_row(tmp_path: Path) -> None:
    alloc = detect_allocation({}, probe=False)

    def row(plan: LaunchPlan) -> Check:
        rows = run_checks(alloc, plan, outputs=tmp_path, python=NO_PYTHON)
        return by_name(rows)["torchrun env"]

    plain = row(LaunchPlan(ppn=2, launcher="mpiexec", command=("python", "train.py")))
    assert plain.level == "ok" and "from mpiexec through runtime.capture" in plain.reason
    # One torchrun per node under mpiexec is a layout people use on purpose.
    per_node = LaunchPlan(ppn=1, launcher="mpiexec", command=("torchrun", "train.py"))
    assert row(per_node).level == "ok"
    # torchrun starting torchrun is never right.
    nested = LaunchPlan(ppn=1, launcher="torchrun", command=("torchrun", "train.py"))
    assert row(nested).level == "warning"
    own = row(LaunchPlan(ppn=2, launcher="torchrun", command=("python", "train.py")))
    assert own.level == "ok" and own.reason.startswith("torchrun gives every rank RANK")
