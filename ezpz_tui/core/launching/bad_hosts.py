"""``bad_hosts.txt``: the hosts failures have named, shared by every later run in an outputs
directory (docs/run-directory.md).

A failure on a node (a shepherd killed, a GPU lost, a bus error) usually repeats on that node,
so the next launch should not use it. The file is for people too: one host per line, ``#`` starts
a comment that says which run named it and why, and a person may edit or empty it at any time.
Reading is tolerant (blank lines, comments, a second word on a line, CRLF, bad bytes) and never
raises; adding keeps the file's lines and appends only hosts not already listed. Hosts compare
by their short name, as the plan's ``--exclude`` does, since hostfiles and launcher messages mix
short and full names for one node.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import LaunchPlan
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


def add_bad_hosts(outputs: Path, hosts: Iterable[str], run_id: str, why: str) -> list[str]:
    """Append the ``hosts`` not yet listed, each with a comment naming ``run_id`` and ``why``;
    returns the hosts added. ``OSError`` when the file cannot be written."""
    listed = read_bad_hosts(outputs)
    new: list[str] = []
    for host in hosts:
        if host and not is_listed(host, listed + new):
            new.append(host)
    if not new:
        return []
    path = bad_hosts_path(outputs)
    when = time.strftime("%Y-%m-%d %H:%M:%S")
    reason = " ".join(why.split())  # one line, whatever the message held
    text = "".join(f"{host}  # {when} run {run_id}: {reason}\n" for host in new)
    try:
        needs_newline = path.stat().st_size > 0 and not path.read_bytes().endswith(b"\n")
    except OSError:
        needs_newline = False
    # O_APPEND: two processes adding at once each land whole lines, never interleaved halves.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (("\n" if needs_newline else "") + text).encode("utf-8"))
    finally:
        os.close(fd)
    return new


def exclude_listed(plan: LaunchPlan, alloc: Allocation, listed: Iterable[str]) -> LaunchPlan:
    """``plan`` with the allocated hosts that ``listed`` names added to its exclusions, so the
    run's record says which hosts it skipped; hosts outside the allocation are ignored."""
    listed = list(listed)
    skipped = [
        host
        for host in alloc.hosts
        if is_listed(host, listed) and not is_listed(host, plan.exclude)
    ]
    if not skipped:
        return plan
    return plan.with_changes(exclude=(*plan.exclude, *(short_host(h) for h in skipped)))
