"""Adding to ``bad_hosts.txt`` and screening a plan with it (the file, and reading it:
:mod:`ezpz_tui.core.runs.bad_hosts`).

Adding keeps the file's lines and appends only hosts not already listed, each with a comment
naming the run and why; a launch skips the allocated hosts the file lists, and says so in its
record.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import LaunchPlan
from ezpz_tui.core.runs.bad_hosts import bad_hosts_path, is_listed, read_bad_hosts
from ezpz_tui.core.runs.hosts import short_host


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
