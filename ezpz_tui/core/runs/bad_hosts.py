"""``bad_hosts.txt``: the hosts failures have named, shared by every later run in an outputs
directory (docs/run-directory.md), as its readers see it.

A failure on a node (a shepherd killed, a GPU lost, a bus error) usually repeats on that node,
so the next launch should not use it. The file is for people too: one host per line, ``#`` starts
a comment that says which run named it and why, and a person may edit or empty it at any time.
Reading is tolerant (blank lines, comments, a second word on a line, CRLF, bad bytes) and never
raises. Hosts compare by their short name, as the plan's ``--exclude`` does, since hostfiles and
launcher messages mix short and full names for one node. Adding to the file, and screening a plan
with it, is :mod:`ezpz_tui.core.launching.bad_hosts`'s: ``why``, the runs list and the failure
dialog only read it.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ezpz_tui.core.runs.hosts import short_host
from runtime.rundir import BAD_HOSTS


def bad_hosts_path(outputs: Path) -> Path:
    return Path(outputs) / BAD_HOSTS


def read_bad_hosts(outputs: Path) -> list[str]:
    """The hosts listed in the outputs directory's ``bad_hosts.txt``, in file order, each once;
    empty when there is no such file or it cannot be read."""
    try:
        raw = bad_hosts_path(outputs).read_bytes()
    except OSError:
        return []
    hosts: list[str] = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        words = line.partition("#")[0].split()
        if words and words[0] not in hosts:
            hosts.append(words[0])
    return hosts


def is_listed(host: str, listed: Iterable[str]) -> bool:
    return short_host(host) in {short_host(h) for h in listed}
