"""Where the ranks of a run meet: MASTER_ADDR and MASTER_PORT, chosen once per run.

A script written for torchrun calls ``init_process_group()`` with the ``env://`` rendezvous and
needs both on every rank. Under torchrun the agent provides them; under mpiexec, mpirun and srun
nothing does, so the launch chooses them when it is built and passes them with the launcher's
env flags (the capture wrapper adds RANK and the rest per rank, :mod:`runtime.capture`).

- The address is the plan's first host, by its high-speed-network name on the ALCF machines
  (``x3005c0s13b0n0.hsn.cm.polaris.alcf.anl.gov``, as ezpz does: the short name resolves to the
  management network there), by its full ``.lab.alcf.anl.gov`` name on Sophia (as ezpz does),
  when that name resolves here (asked with a bound of
  :data:`RESOLVE_TIMEOUT_S`, so a slow DNS cannot hold a launch), else by its plain name; at
  Slurm's NodeAddr where that differs from the node's name; loopback when every rank runs on
  this host. The reason says which was used.
- The port comes from the run id, so two runs on one node do not collide, and is probed free
  when the first host is this host (the usual case: an interactive job's shell is on the head
  node). Another host's ports cannot be probed from here.
- A MASTER_ADDR or MASTER_PORT the user put in the plan's environment is kept as given.
"""

from __future__ import annotations

import socket
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from runtime.env import TORCHRUN_VARS

# torchrun's default port; runs spread over the thousand ports above it.
BASE_PORT = 29500
PORT_SPREAD = 1000
PROBE_TRIES = 64
LOOPBACK = "127.0.0.1"

# Where the ALCF machines' nodes meet: on the Slingshot network as <short>.hsn.cm.<machine>...,
# on Sophia by the lab's domain (ezpz's dist setup names MASTER_ADDR so on each).
MEETING_DOMAINS = {
    "Aurora": "hsn.cm.aurora.alcf.anl.gov",
    "Sunspot": "hsn.cm.sunspot.alcf.anl.gov",
    "Polaris": "hsn.cm.polaris.alcf.anl.gov",
    "Sirius": "hsn.cm.sirius.alcf.anl.gov",
    "Sophia": "lab.alcf.anl.gov",
}

# How long the HSN name's lookup may take before the plain name is used.
RESOLVE_TIMEOUT_S = 1.0

PortFree = Callable[[int], bool]
Resolves = Callable[[str], bool]


def port_free(port: int) -> bool:
    """Whether nothing listens on ``port`` on this host now (a bind succeeds)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("", port))
        except OSError:
            return False
    return True


def resolves(name: str, timeout_s: float = RESOLVE_TIMEOUT_S) -> bool:
    """Whether ``name`` resolves on this host within ``timeout_s`` (getaddrinfo has no timeout
    of its own, so it runs in a daemon thread that is left behind if it hangs)."""
    answer: list[bool] = []

    def look_up() -> None:
        try:
            socket.getaddrinfo(name, None)
        except (OSError, UnicodeError):
            answer.append(False)
        else:
            answer.append(True)

    thread = threading.Thread(target=look_up, name=f"resolve {name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    return bool(answer) and answer[0]


def short_name(host: str) -> str:
    return host.split(".", 1)[0]


def hsn_name(host: str, machine: str) -> str:
    """The host's name where the machine's ranks meet (its high-speed network, Sophia's lab
    domain), else as given."""
    domain = MEETING_DOMAINS.get(machine)
    if domain is None or host.endswith(f".{domain}") or ".hsn." in host:
        return host
    return f"{short_name(host)}.{domain}"


@dataclass(frozen=True)
class Rendezvous:
    """The run's MASTER_ADDR and MASTER_PORT, and why those (shown in the preview)."""

    addr: str
    port: int
    why: str

    def env(self) -> dict[str, str]:
        return {"MASTER_ADDR": self.addr, "MASTER_PORT": str(self.port)}

    def endpoint(self) -> str:
        host = f"[{self.addr}]" if ":" in self.addr else self.addr
        return f"{host}:{self.port}"


def run_port(run_id: str) -> int:
    """The port a run starts from: the same for a run id, spread over runs."""
    return BASE_PORT + zlib.crc32(run_id.encode()) % PORT_SPREAD


def same_name(host: str) -> str:
    return host


def choose(
    hosts: Sequence[str],
    machine: str,
    run_id: str,
    this_host: str,
    given: Mapping[str, str],
    free: PortFree = port_free,
    address: Callable[[str], str] = same_name,
    resolved: Resolves = resolves,
) -> Rendezvous:
    """The rendezvous of a run on ``hosts`` (first host first); ``given`` is the plan's env,
    ``address`` says how a host is reached where the scheduler knows better than its name,
    ``resolved`` whether a host's high-speed-network name resolves here."""
    first = hosts[0] if hosts else this_host
    here = short_name(first) == short_name(this_host)
    whys: list[str] = []
    addr = given.get("MASTER_ADDR", "")
    if addr:
        whys.append("address from the plan's env")
    elif here and len(set(map(short_name, hosts))) <= 1:
        addr = LOOPBACK
        whys.append("every rank on this host")
    elif (reached := address(first)) != first:
        addr = reached
        whys.append(f"first host {short_name(first)} at the scheduler's address for it")
    elif (hsn := hsn_name(first, machine)) == first:
        addr = first
        whys.append("first host")
    elif resolved(hsn):
        addr = hsn
        whys.append(
            "first host on the high-speed network"
            if ".hsn." in hsn
            else "first host by its full name"
        )
    else:
        addr = first
        whys.append(f"first host by its plain name, as {hsn} does not resolve here")
    if given.get("MASTER_PORT"):
        return Rendezvous(addr, int(given["MASTER_PORT"]), "; ".join([*whys, "port from the env"]))
    port = run_port(run_id)
    if here:
        port = next((p for p in range(port, port + PROBE_TRIES) if free(p)), port)
        whys.append("port free on this host")
    else:
        whys.append(f"port from the run id ({short_name(first)} cannot be probed from here)")
    return Rendezvous(addr, port, "; ".join(whys))


def contract_note(launcher: str, rendezvous: Rendezvous | None) -> str:
    """The line a preview shows: what every rank is given to find its place and its peers."""
    names = ", ".join(TORCHRUN_VARS)
    if launcher == "torchrun" or rendezvous is None:
        where = f" (rendezvous at {rendezvous.endpoint()})" if rendezvous else ""
        return f"torchrun gives each rank {names}, MASTER_ADDR and MASTER_PORT{where}."
    return (
        f"Each rank gets torchrun's {names} (from {launcher}'s own, set by its watcher) and "
        f"MASTER_ADDR={rendezvous.addr} MASTER_PORT={rendezvous.port} ({rendezvous.why})."
    )
