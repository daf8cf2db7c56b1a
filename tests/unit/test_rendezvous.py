"""The run's MASTER_ADDR/MASTER_PORT, and the torchrun variables the capture wrapper derives."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from ezpz_tui.core.launching.allocation import parse_node_addr
from ezpz_tui.core.launching.rendezvous import (
    BASE_PORT,
    LOOPBACK,
    PORT_SPREAD,
    choose,
    contract_note,
    hsn_name,
    port_free,
    resolves,
    run_port,
    same_name,
)
from runtime.capture import child_env
from runtime.env import RANK_SOURCE_VAR, RankInfo, rank_info

POLARIS = [f"x3005c0s{n}b0n0.hsn.cm.polaris.alcf.anl.gov" for n in (13, 19)]
AURORA = ["x4102c7s0b0n0.hostmgmt2102.cm.aurora.alcf.anl.gov", "x4102c7s1b0n0"]


def always_free(_port: int) -> bool:
    return True


def known(_name: str) -> bool:
    return True


@pytest.mark.parametrize(
    ("host", "machine", "name"),
    [
        (POLARIS[0], "Polaris", POLARIS[0]),
        ("x3005c0s13b0n0", "Polaris", POLARIS[0]),
        (AURORA[0], "Aurora", "x4102c7s0b0n0.hsn.cm.aurora.alcf.anl.gov"),
        ("x1921c0s0b0n0", "Sunspot", "x1921c0s0b0n0.hsn.cm.sunspot.alcf.anl.gov"),
        ("nid001140", "Perlmutter", "nid001140"),
        ("sophia-gpu-07.lab.alcf.anl.gov", "Sophia", "sophia-gpu-07.lab.alcf.anl.gov"),
        ("sophia-gpu-07", "Sophia", "sophia-gpu-07.lab.alcf.anl.gov"),  # as ezpz names it
    ],
)
def test_high_speed_network_names(host: str, machine: str, name: str) -> None:
    assert hsn_name(host, machine) == name


def test_a_multi_node_run_meets_on_the_first_host() -> None:
    meet = choose(AURORA, "Aurora", "run-1", "x4102c7s0b0n0", {}, always_free, same_name, known)
    assert meet.addr == "x4102c7s0b0n0.hsn.cm.aurora.alcf.anl.gov"
    assert meet.port == run_port("run-1")
    assert meet.why == "first host on the high-speed network; port free on this host"
    assert meet.env() == {"MASTER_ADDR": meet.addr, "MASTER_PORT": str(meet.port)}


def test_an_hsn_name_that_does_not_resolve_falls_back_to_the_plain_name() -> None:
    asked: list[str] = []

    def nowhere(name: str) -> bool:
        asked.append(name)
        return False

    meet = choose(AURORA, "Aurora", "run-1", "login", {}, always_free, same_name, nowhere)
    hsn = "x4102c7s0b0n0.hsn.cm.aurora.alcf.anl.gov"
    assert asked == [hsn]
    assert meet.addr == AURORA[0]
    assert meet.why.startswith(f"first host by its plain name, as {hsn} does not resolve here;")
    assert f"as {hsn} does not resolve here" in contract_note("mpiexec", meet)  # the preview


def test_a_name_that_is_already_on_the_hsn_is_not_looked_up() -> None:
    def never(name: str) -> bool:
        raise AssertionError(f"{name} looked up")

    meet = choose(POLARIS, "Polaris", "r", "login", {}, always_free, same_name, never)
    assert meet.addr == POLARIS[0] and meet.why.startswith("first host;")


def test_the_default_lookup_is_bounded() -> None:
    assert resolves("localhost")
    began = time.monotonic()
    assert not resolves("no-such-host.invalid", timeout_s=0.5)
    assert time.monotonic() - began < 2


def test_a_remote_first_host_is_not_probed() -> None:
    probed: list[int] = []

    def free(port: int) -> bool:
        probed.append(port)
        return True

    meet = choose(["nid001140", "nid001141"], "Perlmutter", "r", "login31", {}, free)
    assert (meet.addr, meet.port, probed) == ("nid001140", run_port("r"), [])
    assert "cannot be probed" in meet.why


def test_one_host_that_is_this_host_meets_on_loopback() -> None:
    meet = choose(["laptop"], "local", "r", "laptop.local", {}, always_free)
    assert meet.addr == LOOPBACK and meet.why.startswith("every rank on this host")


def test_a_busy_port_on_this_host_is_skipped() -> None:
    with socket.socket() as busy:
        busy.bind(("", run_port("busy-run")))
        busy.listen()
        assert not port_free(run_port("busy-run"))
        meet = choose(["here"], "local", "busy-run", "here", {})
    assert meet.port == run_port("busy-run") + 1


def test_ports_are_spread_over_runs_and_stable_per_run() -> None:
    ports = {run_port(f"20261125-1200{i:02d}-tp1pp1cp1") for i in range(60)}
    assert len(ports) > 40
    assert all(BASE_PORT <= p < BASE_PORT + PORT_SPREAD for p in ports)
    assert run_port("same") == run_port("same")


def test_what_the_user_set_is_kept() -> None:
    given = {"MASTER_ADDR": "10.0.0.5", "MASTER_PORT": "41000"}
    meet = choose(POLARIS, "Polaris", "r", POLARIS[0], given, always_free)
    assert (meet.addr, meet.port) == ("10.0.0.5", 41000)
    assert meet.why == "address from the plan's env; port from the env"


def test_the_preview_line_names_the_contract() -> None:
    meet = choose(POLARIS, "Polaris", "r", "elsewhere", {}, always_free)
    note = contract_note("mpiexec", meet)
    assert note.startswith("Each rank gets torchrun's RANK, LOCAL_RANK, WORLD_SIZE, ")
    assert f"MASTER_ADDR={POLARIS[0]} MASTER_PORT={meet.port}" in note
    assert contract_note("torchrun", None).startswith("torchrun gives each rank RANK")


# --- the capture wrapper's side ---------------------------------------------------------------


def test_capture_gives_a_pmi_rank_the_torchrun_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv(RANK_SOURCE_VAR, raising=False)
    hydra = {"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "1", "MPI_LOCALNRANKS": "2"}
    for name, value in hydra.items():
        monkeypatch.setenv(name, value)
    info = rank_info()
    assert info is not None and info.source == "pmi"
    env = child_env(tmp_path, info)
    assert {k: env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")} == {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
    }
    assert env["GROUP_RANK"] == "1"  # node index: rank 3 with 2 per node
    # The rank still knows which launcher placed it, though RANK now answers first.
    child = rank_info(env)
    assert child == RankInfo(3, 1, 4, 2, 1, "pmi")


def test_capture_never_overrides_torchrun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torchrun = {"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
    for name, value in {**torchrun, "GROUP_RANK": "0", "PMI_RANK": "0", "PMI_SIZE": "1"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(RANK_SOURCE_VAR, raising=False)
    info = rank_info()
    assert info is not None and info.source == "torchrun"
    env = child_env(tmp_path, info)
    assert {k: env[k] for k in torchrun} == torchrun
    assert RANK_SOURCE_VAR not in env


def test_slurm_node_addr_wins_over_the_node_name() -> None:
    addresses = {"node1": "10.0.0.7"}
    reach = lambda host: addresses.get(host, host)  # noqa: E731
    meet = choose(["node1", "node2"], "local", "r", "login", {}, always_free, reach)
    assert meet.addr == "10.0.0.7"
    assert meet.why.startswith("first host node1 at the scheduler's address for it")
    line = "NodeName=node1 Arch=x86_64 CoresPerSocket=1 NodeAddr=127.0.0.1 NodeHostName=box"
    assert parse_node_addr(line) == "127.0.0.1"
    assert parse_node_addr("Node nid9 not found") is None
